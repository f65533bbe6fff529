#include "fastpath/bench/measurement.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

namespace fastpath::bench {

int64_t PercentileNs(const std::vector<int64_t>& sorted_ns, double p) {
  if (sorted_ns.empty()) return 0;
  const double n = static_cast<double>(sorted_ns.size());
  // Nearest rank: ceil(p/100 * n), 1-based. The small epsilon keeps 50% of 100 values at
  // rank 50 despite floating-point error.
  auto rank = static_cast<int64_t>(std::ceil(p / 100.0 * n - 1e-9));
  rank = std::clamp<int64_t>(rank, 1, static_cast<int64_t>(sorted_ns.size()));
  return sorted_ns[static_cast<size_t>(rank - 1)];
}

LatencySummary Summarize(std::vector<int64_t> latencies_ns) {
  LatencySummary s;
  if (latencies_ns.empty()) return s;
  std::sort(latencies_ns.begin(), latencies_ns.end());
  s.count = latencies_ns.size();
  long double total = 0;
  for (int64_t v : latencies_ns) total += v;
  s.mean_us = static_cast<double>(total / latencies_ns.size()) / 1000.0;
  s.min_us = latencies_ns.front() / 1000.0;
  s.p50_us = PercentileNs(latencies_ns, 50) / 1000.0;
  s.p90_us = PercentileNs(latencies_ns, 90) / 1000.0;
  s.p95_us = PercentileNs(latencies_ns, 95) / 1000.0;
  s.p99_us = PercentileNs(latencies_ns, 99) / 1000.0;
  s.max_us = latencies_ns.back() / 1000.0;
  return s;
}

namespace {

bool WithinSpread(const std::vector<double>& values, double stability_percentage) {
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  double sum = 0;
  for (double v : values) sum += v;
  const double mean = sum / values.size();
  if (mean <= 0) return false;
  return (*hi - *lo) / mean <= stability_percentage / 100.0;
}

StatusOr<int64_t> ParsePositive(std::string_view text, std::string_view flag, std::string_view spec) {
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    return InvalidArgument(std::string(flag) + ": '" + std::string(text) + "' in '" +
                           std::string(spec) + "' is not an integer");
  }
  if (value < 1) {
    return InvalidArgument(std::string(flag) + ": values must be at least 1, got " +
                           std::to_string(value) + " in '" + std::string(spec) + "'");
  }
  return value;
}

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(sep, start);
    parts.push_back(text.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

constexpr size_t kMaxRangeValues = 10000;

}  // namespace

bool IsStable(const std::vector<WindowSample>& windows, double stability_percentage,
              size_t windows_needed) {
  if (windows_needed == 0 || windows.size() < windows_needed) return false;
  std::vector<double> throughput;
  std::vector<double> p95;
  for (size_t i = windows.size() - windows_needed; i < windows.size(); ++i) {
    if (windows[i].throughput <= 0) return false;
    throughput.push_back(windows[i].throughput);
    p95.push_back(windows[i].p95_us);
  }
  return WithinSpread(throughput, stability_percentage) && WithinSpread(p95, stability_percentage);
}

StatusOr<std::vector<int64_t>> ParseRangeSpec(std::string_view spec, std::string_view flag) {
  const std::string f(flag);
  if (spec.empty()) return InvalidArgument(f + " needs a value such as 16, 1,8,16 or 1:32:2x");
  std::vector<int64_t> values;
  if (spec.find(':') == std::string_view::npos) {
    std::set<int64_t> seen;
    for (std::string_view part : Split(spec, ',')) {
      FASTPATH_ASSIGN_OR_RETURN(int64_t v, ParsePositive(part, flag, spec));
      if (!seen.insert(v).second) {
        return InvalidArgument(f + ": " + std::to_string(v) + " appears twice in '" + std::string(spec) + "'");
      }
      values.push_back(v);
    }
    if (values.size() > kMaxRangeValues) return InvalidArgument(f + ": too many values");
    return values;
  }
  const auto parts = Split(spec, ':');
  if (parts.size() > 3) {
    return InvalidArgument(f + ": '" + std::string(spec) + "' has more than start:end:step");
  }
  FASTPATH_ASSIGN_OR_RETURN(int64_t start, ParsePositive(parts[0], flag, spec));
  FASTPATH_ASSIGN_OR_RETURN(int64_t end, ParsePositive(parts[1], flag, spec));
  if (end < start) {
    return InvalidArgument(f + ": the end " + std::to_string(end) + " is below the start " +
                           std::to_string(start) + " in '" + std::string(spec) + "'");
  }
  bool geometric = false;
  int64_t step = 1;
  if (parts.size() == 3) {
    std::string_view s = parts[2];
    if (!s.empty() && (s.back() == 'x' || s.back() == 'X')) {
      geometric = true;
      s.remove_suffix(1);
    }
    FASTPATH_ASSIGN_OR_RETURN(step, ParsePositive(s, flag, spec));
    if (geometric && step < 2) {
      return InvalidArgument(f + ": a geometric step needs a factor of at least 2, got '" +
                             std::string(parts[2]) + "'");
    }
  }
  const auto too_many = [&] {
    return InvalidArgument(f + ": '" + std::string(spec) + "' gives more than " +
                           std::to_string(kMaxRangeValues) + " values");
  };
  // Each step checked before it is taken: near INT64_MAX the next value would wrap.
  if (geometric) {
    for (int64_t v = start; v < end;) {
      values.push_back(v);
      if (values.size() > kMaxRangeValues) return too_many();
      if (v > end / step) break;
      v *= step;
    }
    values.push_back(end);
  } else {
    if ((end - start) / step + 1 > static_cast<int64_t>(kMaxRangeValues)) return too_many();
    for (int64_t v = start;; v += step) {
      values.push_back(v);
      if (end - v < step) break;
    }
  }
  if (values.size() > kMaxRangeValues) return too_many();
  return values;
}

StatusOr<std::vector<int64_t>> ParseIntList(std::string_view spec, std::string_view flag) {
  const std::string f(flag);
  if (spec.empty()) return InvalidArgument(f + " needs a comma-separated list of integers");
  std::vector<int64_t> values;
  for (std::string_view part : Split(spec, ',')) {
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || v < 0) {
      return InvalidArgument(f + ": '" + std::string(part) + "' in '" + std::string(spec) +
                             "' is not a non-negative integer");
    }
    values.push_back(v);
  }
  return values;
}

StatusOr<RequestDistribution> ParseRequestDistribution(std::string_view text) {
  if (text == "constant") return RequestDistribution::kConstant;
  if (text == "poisson") return RequestDistribution::kPoisson;
  return InvalidArgument("--request-distribution must be constant or poisson, not '" +
                         std::string(text) + "'");
}

const char* RequestDistributionName(RequestDistribution distribution) {
  return distribution == RequestDistribution::kPoisson ? "poisson" : "constant";
}

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double UniformDouble(uint64_t* state) {
  return static_cast<double>(SplitMix64(state) >> 11) * (1.0 / 9007199254740992.0);
}

RequestSchedule::RequestSchedule(RequestDistribution distribution, double rate_per_sec,
                                 uint64_t seed)
    : distribution_(distribution),
      mean_gap_ns_(rate_per_sec > 0 ? 1e9 / rate_per_sec : 0),
      state_(seed) {}

std::chrono::nanoseconds RequestSchedule::NextGap() {
  if (distribution_ == RequestDistribution::kConstant) {
    return std::chrono::nanoseconds(static_cast<int64_t>(std::llround(mean_gap_ns_)));
  }
  // Inverse transform of the exponential distribution; 1 - u is in (0, 1].
  const double u = UniformDouble(&state_);
  return std::chrono::nanoseconds(static_cast<int64_t>(std::llround(-std::log(1.0 - u) * mean_gap_ns_)));
}

}  // namespace fastpath::bench
