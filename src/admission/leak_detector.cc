#include "fastpath/admission/leak_detector.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <vector>

namespace fastpath::admission {

void LeakDetector::Observe(Clock::time_point now, uint64_t in_use_bytes,
                           std::optional<double> mean_rows) {
  samples_.push_back({now, in_use_bytes, mean_rows});
  // Keep one window, and the sample just before it (it may open the first bucket).
  while (samples_.size() > 1 && samples_[1].at <= now - options_.window) samples_.pop_front();
}

LeakVerdict LeakDetector::Judge() const {
  LeakVerdict verdict;
  const int buckets = std::max(2, options_.buckets);
  if (samples_.empty()) {
    verdict.reason = "no samples yet";
    return verdict;
  }
  const Clock::time_point end = samples_.back().at;
  const Clock::time_point start = end - options_.window;
  if (samples_.front().at > start) {
    verdict.reason = "the window is not covered yet";
    return verdict;
  }
  const auto width = options_.window / buckets;
  std::vector<uint64_t> floor(buckets, std::numeric_limits<uint64_t>::max());
  std::vector<double> mix_sum(buckets, 0);
  std::vector<int> mix_count(buckets, 0);
  for (const Sample& s : samples_) {
    if (s.at < start) continue;
    const int b = std::min<int>(buckets - 1, static_cast<int>((s.at - start) / width));
    floor[b] = std::min(floor[b], s.in_use_bytes);
    if (s.mean_rows) {
      mix_sum[b] += *s.mean_rows;
      ++mix_count[b];
    }
  }
  for (int b = 0; b < buckets; ++b) {
    if (floor[b] == std::numeric_limits<uint64_t>::max()) {
      verdict.reason = "a part of the window has no sample";
      return verdict;
    }
  }
  verdict.judged = true;
  // Least squares of the floors against the buckets' middles, in seconds.
  double sum_t = 0, sum_y = 0, sum_tt = 0, sum_ty = 0;
  const double width_s = std::chrono::duration<double>(width).count();
  for (int b = 0; b < buckets; ++b) {
    const double t = (b + 0.5) * width_s;
    const double y = static_cast<double>(floor[b]);
    sum_t += t;
    sum_y += y;
    sum_tt += t * t;
    sum_ty += t * y;
  }
  const double n = buckets;
  verdict.slope_bytes_per_second = (n * sum_ty - sum_t * sum_y) / (n * sum_tt - sum_t * sum_t);
  verdict.growth_bytes = floor.back() > floor.front() ? floor.back() - floor.front() : 0;

  for (int b = 1; b < buckets; ++b) {
    if (floor[b] < floor[b - 1]) {
      verdict.reason = "the memory held at rest fell back within the window";
      return verdict;
    }
  }
  if (verdict.growth_bytes < options_.min_growth_bytes) {
    verdict.reason = "the memory held at rest grew by less than the threshold";
    return verdict;
  }
  double least = std::numeric_limits<double>::max(), most = 0;
  for (int b = 0; b < buckets; ++b) {
    if (mix_count[b] == 0) continue;
    const double mix = mix_sum[b] / mix_count[b];
    least = std::min(least, mix);
    most = std::max(most, mix);
  }
  if (most > 0 && most > least * (1 + options_.max_mix_change)) {
    verdict.reason = "the request mix changed within the window";
    return verdict;
  }
  char text[160];
  std::snprintf(text, sizeof text,
                "the memory held at rest rose by %llu bytes over %.0f s without falling back "
                "(%.1f bytes/s), with the request mix steady",
                static_cast<unsigned long long>(verdict.growth_bytes),
                std::chrono::duration<double>(options_.window).count(),
                verdict.slope_bytes_per_second);
  verdict.reason = text;
  verdict.suspected = true;
  return verdict;
}

}  // namespace fastpath::admission
