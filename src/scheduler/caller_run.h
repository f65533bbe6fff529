// Whether a request may run on its caller's thread (InferRequest::caller_may_run_model): a
// front end's event loop, which every connection on it waits for while the model runs
// (issue 11 §5). A run there saves the hand-off to an instance's worker and back, and is
// allowed only when it is predicted to take at most the limit.
//
// The prediction is the slowest of the last kRuns successful runs of one request alone, each
// scaled up by how much larger this request's inputs are than that run's (never down: a
// smaller request is not assumed faster, as fixed costs dominate many models). Judged by the
// last run's time alone, a request 100 times larger than the one before held the loop for
// 100 times the limit; scaled by its bytes it goes to a worker. Nothing timed yet: the worker
// runs it.
//
// Bytes do not predict every model: a Range's limit or a Loop's trip count are values, and a
// request of the usual size can run a thousand times longer. A run predicted within the
// limit that took more than kMispredicted times it keeps every request of the model off the
// caller's thread for the next kOffAfterMisprediction: without that, the history forgets
// the slow run after kRuns fast ones and the loop could be held again and again.
//
// Lock-free hints: each run is one 64-bit word (its time and its bytes, each capped), so a
// reader never pairs one run's time with another's bytes.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>

#include "fastpath/common/tensor.h"

namespace fastpath::scheduler {

class CallerRunEstimate {
 public:
  static constexpr size_t kRuns = 8;
  static constexpr double kMispredicted = 4;
  static constexpr uint64_t kOffAfterMisprediction = 1024;

  // `limit` 0: never on the caller.
  explicit CallerRunEstimate(std::chrono::microseconds limit)
      : limit_ns_(static_cast<double>(limit.count()) * 1000.0) {
    for (auto& run : runs_) run.store(kEmpty, std::memory_order_relaxed);
  }

  // Whether a request with `input_bytes` of inputs may run on its caller's thread.
  bool MayRun(uint64_t input_bytes) const {
    if (limit_ns_ <= 0) return false;
    if (off_for_.load(std::memory_order_relaxed) > 0) {
      off_for_.fetch_sub(1, std::memory_order_relaxed);  // a race may take one extra: harmless
      return false;
    }
    return Predicted(input_bytes) <= limit_ns_;
  }

  // One request alone, with `input_bytes` of inputs, ran successfully for `ns` (on any
  // thread). A failed run says nothing of how long a run takes: do not record it.
  void Record(uint64_t ns, uint64_t input_bytes) {
    if (limit_ns_ > 0 && static_cast<double>(ns) > kMispredicted * limit_ns_ &&
        Predicted(input_bytes) <= limit_ns_) {
      off_for_.store(kOffAfterMisprediction, std::memory_order_relaxed);
    }
    // Capped: a longer run is over any limit anyway, and inputs over 64 MiB recorded as 64 MiB
    // only make the prediction for a larger request more cautious.
    const uint64_t run = (std::min(ns, kMaxNs) << kBytesBits) | std::min(input_bytes, kMaxBytes);
    const size_t slot = next_.fetch_add(1, std::memory_order_relaxed) % kRuns;
    runs_[slot].store(run == kEmpty ? run - 1 : run, std::memory_order_relaxed);
  }

 private:
  // The slowest recent run scaled to `input_bytes`, in ns; infinity with nothing timed.
  double Predicted(uint64_t input_bytes) const {
    double worst = -1;
    for (const auto& slot : runs_) {
      const uint64_t run = slot.load(std::memory_order_relaxed);
      if (run == kEmpty) continue;
      const double ns = static_cast<double>(run >> kBytesBits);
      const double bytes = static_cast<double>(std::max<uint64_t>(run & kMaxBytes, 1));
      worst = std::max(worst, ns * std::max(1.0, static_cast<double>(input_bytes) / bytes));
    }
    return worst >= 0 ? worst : std::numeric_limits<double>::infinity();
  }

  static constexpr int kBytesBits = 26;                            // up to 64 MiB
  static constexpr uint64_t kMaxBytes = (uint64_t{1} << kBytesBits) - 1;
  static constexpr uint64_t kMaxNs = (uint64_t{1} << (64 - kBytesBits)) - 1;  // ~4.6 minutes
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  const double limit_ns_;
  std::array<std::atomic<uint64_t>, kRuns> runs_;
  std::atomic<size_t> next_{0};
  mutable std::atomic<uint64_t> off_for_{0};  // requests still kept off after a misprediction
};

// The bytes of a request's input tensors.
inline uint64_t InputBytes(const InferRequest& request) {
  uint64_t bytes = 0;
  for (const Tensor& t : request.inputs) bytes += t.data.size();
  return bytes;
}

}  // namespace fastpath::scheduler
