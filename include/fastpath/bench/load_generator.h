// Drives a Target at a fixed concurrency (closed loop: each worker sends its next request
// when the previous one is answered) or at a fixed request rate (open loop: sends at
// scheduled times, constant or Poisson), through a warm-up and then measurement windows
// until the last three are stable or --max-trials is reached. The numbers of a point come
// from its last (up to) three windows, and so does the server-side split: statistics are
// read at every window boundary. A soak (MeasureSoak) holds one concurrency for a fixed
// duration instead and reports every window on its own.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "fastpath/bench/client.h"
#include "fastpath/bench/measurement.h"
#include "fastpath/bench/report.h"

namespace fastpath::bench {

struct MeasureOptions {
  std::chrono::milliseconds warmup{1000};
  std::chrono::milliseconds window{2000};
  double stability_percentage = 10;
  int max_trials = 10;
  int64_t batch_size = 1;  // recorded in the point; throughput_ips = rps * batch_size
  // Request-rate mode: worker threads available to keep sends on schedule.
  int max_threads = 16;
  RequestDistribution distribution = RequestDistribution::kConstant;
  uint64_t seed = 0;
  // Called after each window with a one-line summary of the point so far.
  std::function<void(const std::string&)> progress;
  // Called once a point is measured, with when the windows its numbers come from began and
  // ended (--collect-metrics adds the server's GPUs over that time).
  std::function<void(std::chrono::steady_clock::time_point, std::chrono::steady_clock::time_point,
                     BenchPoint*)>
      on_measured;
};

// One concurrency point. Fails only when no session can be opened at all for the first
// worker (the server is unreachable); request errors are counted, not fatal.
StatusOr<BenchPoint> MeasureConcurrency(Target& target, int64_t concurrency, const MeasureOptions& options);
StatusOr<BenchPoint> MeasureRequestRate(Target& target, double rate, const MeasureOptions& options);

// --soak: how long, cut into which windows, and an early stop.
struct SoakSchedule {
  std::chrono::milliseconds duration{0};
  std::chrono::milliseconds window{60000};
  // Set (by a SIGINT handler) to end the soak early: the window in progress ends at once and
  // is reported, shorter. Null: never.
  const std::atomic<bool>* stop = nullptr;
};

// Called on the measuring thread at every window boundary while the load goes on: index 0
// with no window when the first window starts, then each window's index (1-based) and point
// as it ends. The ends are fixed in advance, so the time a call takes (a metrics scrape)
// shortens no window.
using SoakBoundary = std::function<void(int index, const BenchPoint* window)>;

// `concurrency` closed-loop workers through options.warmup, then held without a pause for
// schedule.duration, measured in consecutive windows of schedule.window (the last one
// shorter when the window does not divide the duration): no gap between windows and no
// warm-up between them. Each window's point (mode "soak") holds that window alone, with the
// server split from statistics read at its two ends. options.progress gets one line per
// window. Fails only when the sessions cannot be opened.
Status MeasureSoak(Target& target, int64_t concurrency, const MeasureOptions& options,
                   const SoakSchedule& schedule, const SoakBoundary& on_boundary);

}  // namespace fastpath::bench
