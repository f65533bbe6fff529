// Drives a Target at a fixed concurrency (closed loop: each worker sends its next request
// when the previous one is answered) or at a fixed request rate (open loop: sends at
// scheduled times, constant or Poisson), through a warm-up and then measurement windows
// until the last three are stable or --max-trials is reached. The numbers of a point come
// from its last (up to) three windows, and so does the server-side split: statistics are
// read at every window boundary.
#pragma once

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
};

// One concurrency point. Fails only when no session can be opened at all for the first
// worker (the server is unreachable); request errors are counted, not fatal.
StatusOr<BenchPoint> MeasureConcurrency(Target& target, int64_t concurrency, const MeasureOptions& options);
StatusOr<BenchPoint> MeasureRequestRate(Target& target, double rate, const MeasureOptions& options);

}  // namespace fastpath::bench
