// The GPU watch (issue 14 §1, §5): a thread of its own samples every GPU the server was
// given every interval, off the request path, from NVML or a replayed trace
// (gpu/telemetry.h), and folds the samples into each GPU's status: the latest readings,
// throttle time per clock-event reason, XID counts, and the quarantine that an uncorrected
// ECC error or a critical XID puts the GPU in. A quarantine is logged once, turns readiness
// off and refuses new requests for models on that GPU; only a restart clears it. Time is the
// server's clock; tests call SampleNow() after moving a manual one.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "fastpath/common/clock.h"
#include "fastpath/gpu/telemetry.h"
#include "fastpath/server/periodic.h"

namespace fastpath::server {

class GpuWatch {
 public:
  GpuWatch(std::shared_ptr<gpu::GpuSource> source, Clock* clock,
           std::chrono::milliseconds interval, std::set<uint64_t> ignored_xids);
  ~GpuWatch() { Stop(); }
  GpuWatch(const GpuWatch&) = delete;
  GpuWatch& operator=(const GpuWatch&) = delete;

  // Takes the first sample at once (a GPU already failing never looks ready), then starts
  // the sampling thread; an interval of 0 starts none (SampleNow still works).
  void Start();
  // Stops the thread and waits for it; idempotent.
  void Stop() { periodic_.Stop(); }
  // One pass: every GPU sampled at the clock's now.
  void SampleNow();

  std::string source() const { return source_description_; }
  std::vector<gpu::GpuStatus> Statuses() const;
  // Cheap, for the request path: false until some GPU is quarantined.
  bool AnyQuarantined() const { return quarantined_mask_.load(std::memory_order_acquire) != 0; }
  // Cheap, for the request path: the first of `gpus` in quarantine, or -1.
  int FirstQuarantined(const std::vector<int>& gpus) const;
  // Why GPU `gpu` is quarantined; empty when it is not (or was never sampled).
  std::string Quarantined(int gpu) const;

 private:
  std::shared_ptr<gpu::GpuSource> source_;
  std::string source_description_;
  Clock* clock_;
  Clock::time_point start_;

  std::mutex sample_mu_;  // one pass at a time; held while the source is read
  mutable std::mutex mu_;  // never held while the source is read (NVML may stall)
  gpu::GpuHealth health_;  // guarded
  std::atomic<uint64_t> quarantined_mask_{0};  // bit N: GPU N (0..63) is quarantined
  Periodic periodic_;  // last: stopped before the rest goes
};

}  // namespace fastpath::server
