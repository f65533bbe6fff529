// The arithmetic of `fastpath bench`: latency percentiles, the stability rule that ends a
// measurement, the concurrency/rate range specs of the command line, and the send
// schedule of the fixed-rate mode. Everything here is pure and deterministic, so that the
// numbers a report shows can be checked by unit tests without a server.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fastpath/common/status.h"

namespace fastpath::bench {

// Latencies of one measurement, in microseconds.
struct LatencySummary {
  uint64_t count = 0;
  double mean_us = 0;
  double min_us = 0;
  double p50_us = 0;
  double p90_us = 0;
  double p95_us = 0;
  double p99_us = 0;
  double max_us = 0;
};

// Nearest-rank percentile (the smallest value with at least p% of the values at or below
// it), as perf_analyzer reports: p in (0, 100] of `sorted_ns` (ascending). 0 when empty.
int64_t PercentileNs(const std::vector<int64_t>& sorted_ns, double p);

// Sorts `latencies_ns` and summarizes it.
LatencySummary Summarize(std::vector<int64_t> latencies_ns);

// One measurement window, as the stability rule sees it.
struct WindowSample {
  double throughput = 0;  // completed requests per second
  double p95_us = 0;
};

// perf_analyzer's rule: the last `windows_needed` windows are stable when, for throughput
// and for p95 latency each, (max - min) / mean is at most `stability_percentage` / 100.
// Fewer windows than needed, or a window with no completed request, is never stable.
bool IsStable(const std::vector<WindowSample>& windows, double stability_percentage,
              size_t windows_needed = 3);

// A list of positive integers from a range spec, as --concurrency and --request-rate take:
//   "16"          one value
//   "1,8,16,32"   a list (kept in the order given, duplicates refused)
//   "1:32"        1..32 step 1
//   "1:32:4"      1, 5, 9, ..., 29 (linear step; the end is included when reached)
//   "1:32:2x"     1, 2, 4, 8, 16, 32 (geometric factor; the end is always included)
// Errors are InvalidArgument naming `flag` and what is wrong.
StatusOr<std::vector<int64_t>> ParseRangeSpec(std::string_view spec, std::string_view flag);

// A comma-separated list of non-negative integers ("0,500,1000"); "" is an error.
StatusOr<std::vector<int64_t>> ParseIntList(std::string_view spec, std::string_view flag);

enum class RequestDistribution { kConstant, kPoisson };
StatusOr<RequestDistribution> ParseRequestDistribution(std::string_view text);
const char* RequestDistributionName(RequestDistribution distribution);

// The gaps between the send times of the fixed-rate mode: all 1/rate for kConstant,
// exponentially distributed with mean 1/rate for kPoisson. The generator is our own
// (splitmix64 and an inverse transform), not <random>'s distributions, so the same seed
// gives the same schedule with every standard library.
class RequestSchedule {
 public:
  RequestSchedule(RequestDistribution distribution, double rate_per_sec, uint64_t seed);
  std::chrono::nanoseconds NextGap();

 private:
  RequestDistribution distribution_;
  double mean_gap_ns_;
  uint64_t state_;
};

// splitmix64: advances `state` and returns the next 64 random bits.
uint64_t SplitMix64(uint64_t* state);
// A double uniform in [0, 1) from the next 53 bits.
double UniformDouble(uint64_t* state);

}  // namespace fastpath::bench
