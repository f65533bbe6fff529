// The drift watch (issue 14 §4): a thread of its own observes every READY version's batch
// statistics, and the GPU watch's readings of the GPUs it runs on (an ensemble: its steps'), every
// interval (the server's: window / 30, from 100 ms to 60 s), and judges each for throughput drift
// (admission/drift_detector.h). A drift first seen, and its end, are logged with the cause
// and what to fix; the verdicts show in /v2/health/admission and on /metrics. Time is the
// server's clock; tests call SampleNow() after moving a manual one.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fastpath/admission/drift_detector.h"
#include "fastpath/gpu/telemetry.h"
#include "fastpath/repository/model_repository.h"
#include "fastpath/server/periodic.h"

namespace fastpath::server {

class DriftWatch {
 public:
  // A READY version, held, and the GPUs it computes on (Server::GpusOf).
  struct Watched {
    std::shared_ptr<repository::ModelVersion> version;
    std::vector<int> gpus;
  };
  using ListFn = std::function<std::vector<Watched>()>;
  using GpuFn = std::function<std::vector<gpu::GpuStatus>()>;  // empty: no GPU telemetry

  // Observes every `interval` (0: only when SampleNow() is called).
  DriftWatch(ListFn list, GpuFn gpus, Clock* clock, admission::DriftOptions options,
             std::chrono::milliseconds interval);
  // The interval the server uses: window / 30, from 100 ms to 60 s.
  static std::chrono::milliseconds IntervalFor(std::chrono::nanoseconds window);
  ~DriftWatch() { Stop(); }
  DriftWatch(const DriftWatch&) = delete;
  DriftWatch& operator=(const DriftWatch&) = delete;

  Status Start() { return periodic_.Start("the drift watch's thread"); }
  void Stop() { periodic_.Stop(); }
  // One pass: every listed version observed at the clock's now, and judged. Versions no
  // longer listed are forgotten.
  void SampleNow();

  // The last verdict for this load of a version; nullopt when it was never observed.
  std::optional<admission::DriftVerdict> Verdict(const repository::ModelVersion& runtime) const;

 private:
  struct Entry {
    admission::DriftDetector detector;
    admission::DriftVerdict verdict;
    std::weak_ptr<repository::ModelVersion> runtime;  // which load this history is of
  };

  ListFn list_;
  GpuFn gpus_;
  Clock* clock_;
  admission::DriftOptions options_;
  std::mutex pass_mu_;  // one pass at a time
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int64_t>, Entry> entries_;  // guarded
  Periodic periodic_;  // last: stopped before the rest goes
};

}  // namespace fastpath::server
