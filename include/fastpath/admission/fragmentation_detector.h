// Fragmentation told from need (issue 13 §4). An arena is fragmented when it grows although
// the memory it already holds free would have been enough for the largest run: no single
// free region was large enough, so it took more from the device. Mixed request sizes do
// this, and it ends in an out-of-memory run with plenty free in total. The detector keeps
// the samples of one window (default 30 minutes) and suspects fragmentation when the arena
// grew in it (its extension count rose) and, at the sample just before it first grew in
// the window, it held free (reserved minus in use) at least what the largest run needs
// beyond what rests: the peak in use minus the least in use seen. A shrink (after an
// out-of-memory run) gives the free regions back, so growth is counted from the last
// shrink in the window on: the arena growing back after one is not fragmentation. A sample
// taken while a run holds memory counts less free, so the verdict errs towards "not
// fragmented".
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>

#include "fastpath/backend/backend.h"
#include "fastpath/common/clock.h"

namespace fastpath::admission {

struct FragmentationVerdict {
  bool suspected = false;
  // Reserved minus in use: just before the arena first grew in the window, or at the last
  // sample when it did not grow.
  uint64_t free_bytes = 0;
  uint64_t largest_run_bytes = 0;  // peak in use minus the least in use seen
  uint64_t extensions_in_window = 0;
  std::string reason;  // why it is or is not suspected, for people
};

class FragmentationDetector {
 public:
  explicit FragmentationDetector(std::chrono::nanoseconds window = std::chrono::minutes(30))
      : window_(window) {}

  // One sample at `now` (never earlier than the last).
  void Observe(Clock::time_point now, const backend::MemoryStats& stats);
  // The verdict over the window that ends at the last sample.
  FragmentationVerdict Judge() const;

 private:
  struct Sample {
    Clock::time_point at;
    uint64_t in_use_bytes;
    uint64_t reserved_bytes;
    uint64_t peak_bytes;
    uint64_t arena_extensions;
    uint64_t arena_shrinkages;
  };
  std::chrono::nanoseconds window_;
  std::deque<Sample> samples_;  // the last window's, oldest first
  uint64_t least_in_use_ = UINT64_MAX;  // over every sample, not only the window's
};

}  // namespace fastpath::admission
