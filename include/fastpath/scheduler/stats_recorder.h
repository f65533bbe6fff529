// Thread-safe accumulation of one model version's statistics, recorded by its scheduler and
// read by the server facade.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "fastpath/common/statistics.h"
#include "fastpath/common/tensor.h"

namespace fastpath::scheduler {

// Thread-safe accumulator of one model version's statistics.
class StatsRecorder {
 public:
  using Timings = ModelTimes;
  // One request's own times: end to end in the server, and in the queue.
  struct RequestTimes {
    uint64_t request_ns = 0;
    uint64_t queue_ns = 0;
  };
  // One successful model execution of `requests`, holding `batch_size` batch elements in all
  // (Triton's inference_count counts elements, success counts requests). Each request's
  // own times feed the sums and the latency histograms (a batch's requests waited
  // differently: an average would flatten the tail); `timings`' compute figures are the
  // execution's, every request's (compute_infer's histogram once per execution), and its
  // queue_ns is not read. `canary_rows` of the batch belong to canaries (not among
  // `requests`): left out of inference_count.
  void RecordSuccess(const std::vector<RequestTimes>& requests, uint64_t batch_size,
                     const Timings& timings, uint64_t canary_rows = 0);
  // The same for `requests` requests that each took `request_ns`, and timings.queue_ns in
  // the queue.
  void RecordSuccess(uint64_t requests, uint64_t batch_size, const Timings& timings,
                     uint64_t request_ns, uint64_t canary_rows = 0);
  // A request that failed at any stage (rejected, timed out, or failed in the model);
  // `reason` is the label of Triton's nv_inference_request_failure.
  void RecordFailure(uint64_t request_ns, FailureReason reason = FailureReason::kOther);
  ModelStatistics Snapshot(const std::string& name, const std::string& version) const;
  // Back to nothing recorded.
  void Reset();
  // From now on keeps the end-to-end latency of each successful request, the latest
  // `capacity` of them (a canary phase compares two loads' p95 with them; the histograms'
  // buckets are too coarse for that). 0 stops keeping them and forgets them.
  void KeepLatencies(size_t capacity);
  std::vector<double> KeptLatenciesMs() const;

 private:
  mutable std::mutex mu_;
  ModelStatistics stats_;  // name/version filled by Snapshot
  // Guarded by mu_: a ring of kept_capacity_ entries once full, kept_next_ its oldest.
  std::vector<uint64_t> kept_ns_;
  size_t kept_capacity_ = 0;
  size_t kept_next_ = 0;
};

}  // namespace fastpath::scheduler
