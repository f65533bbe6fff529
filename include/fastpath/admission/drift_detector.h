// Throughput drift, with its cause (issue 14 §4). A GPU near its thermal limit, capped in
// power or slowed by its hardware lowers its clocks: nothing fails, every run just takes
// longer. The detector compares what one execution costs now with what it cost when the
// version started serving, batch size by batch size (a batch of 8 is not 8 batches of 1),
// and names the cause from the clock-event reasons of the version's GPUs over the same
// window:
//   - the baseline of a batch size is the mean compute time per execution of its first
//     `baseline_executions` executions after the version became READY (its self-test and
//     warm-up are before that: excluded), with the GPUs' SM clocks at that moment;
//   - the ratio over the window (default 30 minutes) is the compute time the window's
//     executions took divided by what they would have taken at their baselines;
//   - the alert holds while the ratio is at least 1 + threshold (default 0.15);
//   - the cause is thermal (SW/HW thermal slowdown), power (SW power cap, HW power brake)
//     or reliability (HW slowdown alone), whichever held the clocks down longest over the
//     window when that is at least `cause_fraction` of it; otherwise gpu_clocks when the SM
//     clock fell 10% or more below its baseline, unknown when the GPUs have no telemetry,
//     and "not_gpu" when the clocks held (or the version runs on no GPU).
// Time is the caller's (an injected clock), so tests drive the window by hand.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fastpath/common/clock.h"
#include "fastpath/common/statistics.h"

namespace fastpath::admission {

struct DriftOptions {
  std::chrono::nanoseconds window = std::chrono::minutes(30);
  double threshold = 0.15;
  uint64_t baseline_executions = 20;  // per batch size
  uint64_t min_executions = 20;       // in the window, for a verdict
  double cause_fraction = 0.2;        // of the window, for a GPU cause
};

// One GPU the version runs on, at one moment: cumulative seconds per cause of slowdown
// (gpu::GpuStatus::cause_seconds: thermal, power, reliability) and the SM clock.
struct GpuReading {
  int gpu = 0;
  std::map<std::string, double> cause_seconds;
  std::optional<double> sm_clock_mhz;
  // The latest sample's clock-event reasons include "GPU idle": a GPU left waiting for work
  // lowers its clocks, and that is no cause of a slowdown, but a sign of one elsewhere.
  bool idle = false;
};

// The causes, as fastpath_drift_alert's `cause` label shows them: a clock-event reason
// (thermal, power, reliability); gpu_clocks when the SM clock fell by 10% or more with no
// reason to say why (an idle GPU's lower clock is none); unknown when the version runs on GPUs
// without telemetry; not_gpu when the clocks held, the GPU idled, or the version runs on no
// GPU.
inline constexpr const char* kDriftCauses[] = {"thermal",    "power",   "reliability",
                                               "gpu_clocks", "unknown", "not_gpu"};

struct DriftVerdict {
  std::optional<double> ratio;  // nullopt until the window has enough executions
  bool alert = false;
  std::string cause;   // one of kDriftCauses while alerting; empty otherwise
  std::string detail;  // the figures and what to fix, for people
};

class DriftDetector {
 public:
  explicit DriftDetector(DriftOptions options = {}) : options_(options) {}

  // One observation at `now` (never earlier than the last): the version's cumulative batch
  // statistics (ModelStatistics::batch_stats), whether it runs on GPUs, and the readings of
  // those that have telemetry.
  void Observe(Clock::time_point now, const std::vector<BatchStatistics>& batch_stats,
               bool on_gpu, std::vector<GpuReading> gpus);

  // The verdict over the window that ends at the last observation.
  DriftVerdict Judge() const;

 private:
  struct Observation {
    Clock::time_point at;
    std::map<uint64_t, StatDuration> by_batch_size;  // cumulative compute_infer
    bool on_gpu = false;
    std::vector<GpuReading> gpus;
  };
  struct Baseline {
    double ns_per_execution = 0;
  };
  DriftOptions options_;
  std::optional<Observation> first_;  // when the version started serving
  std::map<uint64_t, Baseline> baselines_;
  std::map<int, double> baseline_clock_mhz_;  // per GPU, when the first baseline was set
  std::deque<Observation> window_;  // oldest first; the oldest at or before the window start
};

// What to do about a drift with this cause, in one sentence.
std::string DriftFix(const std::string& cause);

}  // namespace fastpath::admission
