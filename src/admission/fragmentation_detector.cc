#include "fastpath/admission/fragmentation_detector.h"

#include <algorithm>

#include "fastpath/admission/memory_budget.h"

namespace fastpath::admission {

void FragmentationDetector::Observe(Clock::time_point now, const backend::MemoryStats& stats) {
  samples_.push_back({now, stats.in_use_bytes, stats.reserved_bytes, stats.peak_bytes,
                      stats.arena_extensions, stats.arena_shrinkages});
  least_in_use_ = std::min(least_in_use_, stats.in_use_bytes);
  // Keep one sample at or before the window's start: the growth is counted from it.
  while (samples_.size() > 1 && samples_[1].at <= now - window_) samples_.pop_front();
}

namespace {
uint64_t Free(uint64_t reserved, uint64_t in_use) { return reserved > in_use ? reserved - in_use : 0; }
}  // namespace

FragmentationVerdict FragmentationDetector::Judge() const {
  FragmentationVerdict v;
  if (samples_.empty()) {
    v.reason = "not sampled yet";
    return v;
  }
  const Sample& last = samples_.back();
  v.largest_run_bytes = last.peak_bytes > least_in_use_ ? last.peak_bytes - least_in_use_ : 0;
  // From the first sample after the last shrink in the window (or the window's start).
  size_t base = 0;
  for (size_t i = 1; i < samples_.size(); ++i) {
    if (samples_[i].arena_shrinkages != samples_[i - 1].arena_shrinkages) base = i;
  }
  v.extensions_in_window = last.arena_extensions >= samples_[base].arena_extensions
                               ? last.arena_extensions - samples_[base].arena_extensions
                               : 0;
  if (v.extensions_in_window == 0) {
    v.free_bytes = Free(last.reserved_bytes, last.in_use_bytes);
    v.reason = base == 0 ? "the arena did not grow in the window"
                         : "the arena did not grow since it was last shrunk";
    return v;
  }
  // The sample just before the first growth.
  size_t before = base;
  while (before + 1 < samples_.size() &&
         samples_[before + 1].arena_extensions == samples_[base].arena_extensions) {
    ++before;
  }
  v.free_bytes = Free(samples_[before].reserved_bytes, samples_[before].in_use_bytes);
  const std::string grew = "the arena grew " + std::to_string(v.extensions_in_window) +
                           " time" + (v.extensions_in_window == 1 ? "" : "s") +
                           " in the window while it held " + FormatBytes(v.free_bytes) + " free";
  if (v.largest_run_bytes == 0 || v.free_bytes < v.largest_run_bytes) {
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
