// Conversion between the protocol's ModelInferRequest/ModelInferResponse and the
// facade's InferRequest/InferResponse. Private to the gRPC front end; shared by the
// unary and the streaming handler so that both validate a request identically.
#pragma once

#include <cstdint>
#include <string>

#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"
#include "grpc_service.pb.h"

namespace fastpath::frontend::grpc_internal {

// Validates `request` and converts it. Every error is InvalidArgument (a shape whose element
// count could never fit in a message of `max_message_bytes` included) and names the
// offending input or field.
//
// Takes `request` by mutable reference because it moves the raw_input_contents out of
// it instead of copying them: the caller must not read them afterwards.
//
// Nothing is allocated from a declared shape: a tensor's element count is checked
// against the bytes or entries actually received before any buffer is sized by it.
[[nodiscard]] StatusOr<InferRequest> ParseModelInferRequest(inference::ModelInferRequest& request,
                                                            int64_t max_message_bytes);

// What a response repeats from its request. Kept apart from the InferRequest because
// that moves into the facade.
struct RequestEcho {
  std::string model_name;
  std::string model_version;
  std::string id;
};

// Fills `out` from `response`, moving the output bytes into raw_output_contents in the
// order of the outputs (raw_output_contents[i] holds outputs[i], as Triton's clients
// read it). Name, version and id fall back to `echo` where the facade left them empty,
// so the id is always echoed.
[[nodiscard]] Status FillModelInferResponse(InferResponse&& response, const RequestEcho& echo,
                                            inference::ModelInferResponse* out);

// For a failed streamed request: the identifying fields only, so that a client can tell
// which of its requests the error_message belongs to.
void FillErrorEcho(const RequestEcho& echo, inference::ModelInferResponse* out);

}  // namespace fastpath::frontend::grpc_internal
