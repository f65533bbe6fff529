// Helpers shared by the bench clients (client.cc, http_client.cc, grpc_client.cc,
// in_process_client.cc, http_once.cc); not part of fastpath::bench's interface.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "fastpath/bench/client.h"
#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"

namespace fastpath::bench::internal {

// `s` cut to `n` characters and marked "...": a server's error text as an error sample.
std::string Truncate(std::string s, size_t n = 300);

// How long a stopped closed loop waits with nothing coming back before it gives up on what
// is in flight (ClosedLoop::Run): twice `slowest`, the slowest answer of the run, within
// [1 s, 1 min].
std::chrono::nanoseconds Patience(std::chrono::nanoseconds slowest);
// What a stopped closed loop reports of a request still in flight when it gives up on it
// (ClosedLoop::Run): its kUnanswered outcome when it was sent more than `patience` before the
// run stopped, else nothing.
std::optional<InferOutcome> GiveUp(std::chrono::steady_clock::time_point sent,
                                   std::chrono::steady_clock::time_point stopped,
                                   std::chrono::steady_clock::time_point now,
                                   std::chrono::nanoseconds patience);

// A KServe v2 inference request body: `inputs`, and `outputs` asked for by name. With
// Encoding::kBinary the tensors travel in the binary tensor extension and `json_length` is
// the Inference-Header-Content-Length; with kJson it is 0 (FP16 and BF16 have no JSON form,
// an InvalidArgument). The HTTP sessions' prepared requests and InferOnce (http_once.h).
struct InferBody {
  std::string body;
  size_t json_length = 0;
};
StatusOr<InferBody> EncodeInferBody(const std::string& id, const std::vector<Tensor>& inputs,
                                    const std::vector<std::string>& outputs, Encoding encoding);

}  // namespace fastpath::bench::internal
