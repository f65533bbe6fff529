// libFuzzer target for the gRPC inference codec: a ModelInferRequest is outside input. The
// bytes are parsed as the protobuf message (as gRPC would), converted by
// ParseModelInferRequest, and a decoded request is echoed back through
// FillModelInferResponse, as a facade would answer it. A crash, a sanitizer report or a
// response whose raw contents do not match its outputs is a finding.
#include <cstddef>
#include <cstdint>

#include "infer_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fastpath;
  inference::ModelInferRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto decoded = frontend::grpc_internal::ParseModelInferRequest(request, 1 << 20);
  if (!decoded.ok()) return 0;

  InferResponse response;
  response.id = decoded->id;
  response.outputs = decoded->inputs;
  frontend::grpc_internal::RequestEcho echo{decoded->model_name, decoded->model_version,
                                            decoded->id};
  inference::ModelInferResponse out;
  if (frontend::grpc_internal::FillModelInferResponse(std::move(response), echo, &out).ok() &&
      out.raw_output_contents_size() != out.outputs_size()) {
    __builtin_trap();
  }
  return 0;
}
