// Whether a request may run on its caller's thread (InferRequest::caller_may_run_model): a
// front end's event loop, which every connection on it waits for while the model runs
// (issue 11 §5). A run there saves the hand-off to an instance's worker and back, and is
// allowed only when it is predicted to take at most the limit.
//
// The prediction is the request's input bytes times the highest cost per input byte among
// the last kRuns runs of one request alone. Judged by the last run's time alone, a request
// 100 times larger than the one before would hold the loop for 100 times the limit; scaled
// by its bytes it goes to a worker, and a run that varies with its inputs' contents is
// judged by the slowest of the recent ones. Nothing timed yet: the worker runs it.
//
// Lock-free hints: Record and MayRun race benignly (a prediction may use a cost one run old).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "fastpath/common/tensor.h"

namespace fastpath::scheduler {

class CallerRunEstimate {
 public:
  static constexpr size_t kRuns = 8;

  // `limit` 0: never on the caller.
  explicit CallerRunEstimate(std::chrono::microseconds limit)
      : limit_ns_(static_cast<double>(limit.count()) * 1000.0) {}

  // Whether a request with `input_bytes` of inputs may run on its caller's thread.
  bool MayRun(uint64_t input_bytes) const {
    if (limit_ns_ <= 0) return false;
    double worst = -1;  // ns per byte; negative: not timed
    for (const auto& cost : costs_) worst = std::max(worst, cost.load(std::memory_order_relaxed));
    if (worst < 0) return false;
    return worst * static_cast<double>(std::max<uint64_t>(input_bytes, 1)) <= limit_ns_;
  }

  // One request alone, with `input_bytes` of inputs, ran for `ns` (on any thread).
  void Record(uint64_t ns, uint64_t input_bytes) {
    const size_t slot = next_.fetch_add(1, std::memory_order_relaxed) % kRuns;
    costs_[slot].store(static_cast<double>(ns) / static_cast<double>(std::max<uint64_t>(input_bytes, 1)),
                       std::memory_order_relaxed);
  }

 private:
  const double limit_ns_;
  std::array<std::atomic<double>, kRuns> costs_{-1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0};
  std::atomic<size_t> next_{0};
};

// The bytes of a request's input tensors.
inline uint64_t InputBytes(const InferRequest& request) {
  uint64_t bytes = 0;
  for (const Tensor& t : request.inputs) bytes += t.data.size();
  return bytes;
}

}  // namespace fastpath::scheduler
