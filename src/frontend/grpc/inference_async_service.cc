#include "inference_async_service.h"

#include <google/protobuf/descriptor.h>

#include <cstdio>
#include <cstdlib>

namespace fastpath::frontend::grpc_internal {
namespace {

namespace pb = google::protobuf;

const pb::ServiceDescriptor* Descriptor() {
  return inference::ModelInferRequest::descriptor()->file()->FindServiceByName(
      "GRPCInferenceService");
}

}  // namespace

InferenceAsyncService::InferenceAsyncService() {
  for (int i = 0; i < Descriptor()->method_count(); ++i) MarkMethodRaw(i);
}

int InferenceAsyncService::MethodIndex(const std::string& name) {
  const pb::MethodDescriptor* m = Descriptor()->FindMethodByName(name);
  if (m == nullptr) {
    std::fprintf(stderr, "fastpath: inference.GRPCInferenceService has no method %s\n",
                 name.c_str());
    std::abort();
  }
  return m->index();
}

std::string InferenceAsyncService::NotParsed(const std::string& type) {
  return "the request is not a valid " + type +
         ": protobuf cannot parse it (a truncated or malformed message, or a string field that "
         "is not UTF-8)";
}

}  // namespace fastpath::frontend::grpc_internal
