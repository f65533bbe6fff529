// Slow leaks told from everything else (issue 13 §4). A leak is live tensors piling up: the
// memory an instance's arena holds *at rest* rises and keeps rising while the requests stay
// alike. What a run holds while it runs comes and goes, so the detector looks at the floor:
// the window (default 30 minutes) is cut into equal buckets, each bucket keeps the least
// in-use figure sampled in it, and a leak is suspected when
//   - every bucket has samples (the window is covered),
//   - the floors never fall from one bucket to the next and rise by at least min_growth_bytes
//     from the first to the last,
//   - the request mix (mean batch rows per execution) stays within max_mix_change of itself
//     across the buckets: larger requests held in flight raise the floor honestly.
// The slope reported is the least-squares fit of the floors over time, in bytes per second.
// Time is the caller's (an injected clock), so tests drive the window by hand.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "fastpath/common/clock.h"

namespace fastpath::admission {

struct LeakDetectorOptions {
  std::chrono::nanoseconds window = std::chrono::minutes(30);
  int buckets = 6;
  uint64_t min_growth_bytes = uint64_t{1} << 20;
  double max_mix_change = 0.25;  // the largest bucket mix at most 1.25 × the smallest
};

struct LeakVerdict {
  // The window is covered and each part of it sampled: `suspected` and the slope say
  // something. Until then both are 0 for want of samples, and the metrics leave them out.
  bool judged = false;
  bool suspected = false;
  double slope_bytes_per_second = 0;  // of the floors; 0 until the window is covered
  uint64_t growth_bytes = 0;          // last floor minus first floor (0 when it fell)
  std::string reason;                 // why it is or is not suspected, for people
};

class LeakDetector {
 public:
  explicit LeakDetector(LeakDetectorOptions options = {}) : options_(options) {}

  // One sample at `now` (never earlier than the last): the arena's in-use bytes and the
  // mean batch rows of the executions since the previous sample (nullopt: none ran).
  void Observe(Clock::time_point now, uint64_t in_use_bytes, std::optional<double> mean_rows);

  // The verdict over the window that ends at the last sample.
  LeakVerdict Judge() const;

 private:
  struct Sample {
    Clock::time_point at;
    uint64_t in_use_bytes;
    std::optional<double> mean_rows;
  };
  LeakDetectorOptions options_;
  std::deque<Sample> samples_;  // the last window's, oldest first
};

}  // namespace fastpath::admission
