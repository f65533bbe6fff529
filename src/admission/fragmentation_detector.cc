#include "fastpath/admission/fragmentation_detector.h"

#include <algorithm>

#include "fastpath/admission/memory_budget.h"

namespace fastpath::admission {

void FragmentationDetector::Observe(Clock::time_point now, const backend::MemoryStats& stats) {
  samples_.push_back({now, stats.in_use_bytes, stats.reserved_bytes, stats.peak_bytes,
                      stats.arena_extensions});
  least_in_use_ = std::min(least_in_use_, stats.in_use_bytes);
  // Keep one sample at or before the window's start: the growth is counted from it.
  while (samples_.size() > 1 && samples_[1].at <= now - window_) samples_.pop_front();
}

FragmentationVerdict FragmentationDetector::Judge() const {
  FragmentationVerdict v;
  if (samples_.empty()) {
    v.reason = "not sampled yet";
    return v;
  }
  const Sample& last = samples_.back();
  v.free_bytes = last.reserved_bytes > last.in_use_bytes ? last.reserved_bytes - last.in_use_bytes
                                                         : 0;
  v.largest_run_bytes = last.peak_bytes > least_in_use_ ? last.peak_bytes - least_in_use_ : 0;
  v.extensions_in_window = last.arena_extensions >= samples_.front().arena_extensions
                               ? last.arena_extensions - samples_.front().arena_extensions
                               : 0;
  if (v.extensions_in_window == 0) {
    v.reason = "the arena did not grow in the window";
    return v;
  }
  // The sample just before the first growth in the window.
  size_t before = 0;
  while (before + 1 < samples_.size() &&
         samples_[before + 1].arena_extensions == samples_.front().arena_extensions) {
    ++before;
  }
  const Sample& s = samples_[before];
  const uint64_t free_before = s.reserved_bytes > s.in_use_bytes ? s.reserved_bytes - s.in_use_bytes
                                                                 : 0;
  const std::string grew = "the arena grew " + std::to_string(v.extensions_in_window) +
                           " time" + (v.extensions_in_window == 1 ? "" : "s") +
                           " in the window while it held " + FormatBytes(free_before) + " free";
  if (v.largest_run_bytes == 0 || free_before < v.largest_run_bytes) {
    v.reason = grew + ", less than the largest run needs (" + FormatBytes(v.largest_run_bytes) +
               "): growth for need, not fragmentation";
    return v;
  }
  v.suspected = true;
  v.reason = grew + ", enough for the largest run (" + FormatBytes(v.largest_run_bytes) +
             "): no free region was large enough; mixed request sizes fragment the arena "
             "(see docs/runbooks/memory.md)";
  return v;
}

}  // namespace fastpath::admission
