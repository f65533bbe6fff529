#include <chrono>

#include "fastpath/scheduler/stats_recorder.h"

namespace fastpath::scheduler {
namespace {

void Add(StatDuration* d, uint64_t ns, uint64_t count = 1) {
  d->count += count;
  d->ns += ns;
}

uint64_t NowMsSinceEpoch() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

void StatsRecorder::RecordSuccess(uint64_t requests, uint64_t batch_size, const Timings& t,
                                  uint64_t request_ns, uint64_t canary_rows) {
  RecordSuccess(std::vector<RequestTimes>(requests, {request_ns, t.queue_ns}), batch_size, t,
                canary_rows);
}

void StatsRecorder::RecordSuccess(const std::vector<RequestTimes>& requests, uint64_t batch_size,
                                  const Timings& t, uint64_t canary_rows) {
  std::lock_guard lock(mu_);
  auto& s = stats_.inference_stats;
  const uint64_t n = requests.size();
  for (const RequestTimes& r : requests) {
    Add(&s.success, r.request_ns);
    Add(&s.queue, r.queue_ns);
    stats_.request_latency.Observe(r.request_ns);
    stats_.queue_latency.Observe(r.queue_ns);
    if (kept_capacity_ == 0) continue;
    if (kept_ns_.size() < kept_capacity_) {
      kept_ns_.push_back(r.request_ns);
    } else {
      kept_ns_[kept_next_] = r.request_ns;
      kept_next_ = (kept_next_ + 1) % kept_capacity_;
    }
  }
  // The execution's figures: every request of it spent these.
  Add(&s.compute_input, t.compute_input_ns * n, n);
  Add(&s.compute_infer, t.compute_infer_ns * n, n);
  Add(&s.compute_output, t.compute_output_ns * n, n);
  stats_.compute_infer_latency.Observe(t.compute_infer_ns);
  stats_.inference_count += batch_size - canary_rows;
  stats_.execution_count += 1;
  stats_.last_inference_ms = NowMsSinceEpoch();
  BatchStatistics* batch = nullptr;
  for (auto& b : stats_.batch_stats) {
    if (b.batch_size == batch_size) batch = &b;
  }
  if (batch == nullptr) {
    stats_.batch_stats.push_back({});
    batch = &stats_.batch_stats.back();
    batch->batch_size = batch_size;
  }
  Add(&batch->compute_input, t.compute_input_ns);
  Add(&batch->compute_infer, t.compute_infer_ns);
  Add(&batch->compute_output, t.compute_output_ns);
}

void StatsRecorder::RecordFailure(uint64_t request_ns, FailureReason reason) {
  std::lock_guard lock(mu_);
  Add(&stats_.inference_stats.fail, request_ns);
  const auto index = static_cast<size_t>(reason);
  stats_.failures[index < kFailureReasonCount ? index
                                                     : static_cast<size_t>(FailureReason::kOther)] += 1;
}

ModelStatistics StatsRecorder::Snapshot(const std::string& name,
                                                const std::string& version) const {
  std::lock_guard lock(mu_);
  ModelStatistics out = stats_;
  out.name = name;
  out.version = version;
  return out;
}

void StatsRecorder::Reset() {
  std::lock_guard lock(mu_);
  stats_ = ModelStatistics{};
}

void StatsRecorder::KeepLatencies(size_t capacity) {
  std::lock_guard lock(mu_);
  kept_capacity_ = capacity;
  kept_ns_.clear();
  kept_ns_.reserve(capacity);
  kept_next_ = 0;
}

std::vector<double> StatsRecorder::KeptLatenciesMs() const {
  std::lock_guard lock(mu_);
  std::vector<double> out;
  out.reserve(kept_ns_.size());
  for (uint64_t ns : kept_ns_) out.push_back(static_cast<double>(ns) / 1e6);
  return out;
}

}  // namespace fastpath::scheduler
