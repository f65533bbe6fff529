// inference.GRPCInferenceService on the async API with every method taken as bytes (raw):
// the front end parses each request itself (grpc::SerializationTraits, as gRPC would), so
// that one protobuf cannot parse is answered with an error naming its type. Left to gRPC, a
// unary call was answered INTERNAL "Unable to parse request" before any handler saw it, and
// a stream's message ended the stream with OK, its request unanswered. Private to the gRPC
// front end.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/async_stream.h>
#include <grpcpp/support/async_unary_call.h>
#include <grpcpp/support/byte_buffer.h>

#include <string>

#include "grpc_service.grpc.pb.h"

namespace fastpath::frontend::grpc_internal {

class InferenceAsyncService final : public inference::GRPCInferenceService::AsyncService {
 public:
  InferenceAsyncService();
  // The index of the method named `name` ("ModelInfer"); aborts on a name the service lacks.
  static int MethodIndex(const std::string& name);
  // What a request that does not parse is told: "the request is not a valid <type>: ...".
  static std::string NotParsed(const std::string& type);

  void RequestRaw(int method, grpc::ServerContext* context, grpc::ByteBuffer* request,
                  grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>* writer,
                  grpc::CompletionQueue* call_cq, grpc::ServerCompletionQueue* notification_cq,
                  void* tag) {
    RequestAsyncUnary(method, context, request, writer, call_cq, notification_cq, tag);
  }
  // ModelStreamInfer: its requests read as bytes, its responses written typed.
  void RequestRawStream(
      grpc::ServerContext* context,
      grpc::ServerAsyncReaderWriter<inference::ModelStreamInferResponse, grpc::ByteBuffer>* stream,
      grpc::CompletionQueue* call_cq, grpc::ServerCompletionQueue* notification_cq, void* tag) {
    RequestAsyncBidiStreaming(MethodIndex("ModelStreamInfer"), context, stream, call_cq,
                              notification_cq, tag);
  }
};

}  // namespace fastpath::frontend::grpc_internal
