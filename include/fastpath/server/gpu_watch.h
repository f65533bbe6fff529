// The GPU watch (issue 14 §1, §5): a thread of its own samples every GPU the server was
// given every interval, off the request path, from NVML or a replayed trace
// (gpu/telemetry.h), and folds the samples into each GPU's status: the latest readings,
// throttle time per clock-event reason, XID counts, and the quarantine that an uncorrected
// ECC error or a critical XID puts the GPU in. A quarantine is logged once, turns readiness
// off and refuses new requests for models on that GPU; only a restart clears it. A pass of
// reads that has not returned for kHungAfter quarantines every GPU too, seen from a second
// thread. Time is the server's clock; tests call SampleNow() and CheckHungNow() after moving
// a manual one.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fastpath/common/clock.h"
#include "fastpath/gpu/telemetry.h"
#include "fastpath/server/periodic.h"

namespace fastpath::server {

class GpuWatch {
 public:
  // NVML answers a read in milliseconds. One that has not returned for this long is a driver
  // or a GPU that hangs (a GPU fallen off the bus hangs nvidia-smi alike): its readings,
  // ECC errors and XIDs will never be seen, and no later sample says so.
  static constexpr std::chrono::seconds kHungAfter{10};

  GpuWatch(std::shared_ptr<gpu::GpuSource> source, Clock* clock,
           std::chrono::milliseconds interval, std::set<uint64_t> ignored_xids);
  ~GpuWatch() { Stop(); }
  GpuWatch(const GpuWatch&) = delete;
  GpuWatch& operator=(const GpuWatch&) = delete;

  // Takes the first sample at once (a GPU already failing never looks ready), then starts
  // the sampling thread; an interval of 0 starts none (SampleNow still works).
  Status Start();
  // Stops the threads and waits for them; idempotent. With `patience`, waits that long at
  // most for a pass of reads: one that hangs keeps its thread, which is left to it (false),
  // and this watch, which that thread still uses, must then never be destroyed.
  bool Stop(std::optional<std::chrono::milliseconds> patience = std::nullopt);
  // One pass: every GPU sampled at the clock's now.
  void SampleNow();
  // Quarantines every GPU when a pass has been reading for kHungAfter or more.
  void CheckHungNow();

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

  // Logs the quarantine of `gpus` and marks them for the request path. With mu_ held.
  void Quarantine(const std::vector<int>& gpus);

  std::mutex sample_mu_;  // one pass at a time; held while the source is read
  mutable std::mutex mu_;  // never held while the source is read (NVML may stall)
  // When the pass reading the source now began (since start_, ms); -1 between passes.
  std::atomic<int64_t> pass_began_ms_{-1};
  gpu::GpuHealth health_;  // guarded
  std::atomic<uint64_t> quarantined_mask_{0};  // bit N: GPU N (0..63) is quarantined
  // Last: stopped before the rest goes.
  Periodic periodic_;    // SampleNow
  Periodic hang_watch_;  // CheckHungNow
};

}  // namespace fastpath::server
