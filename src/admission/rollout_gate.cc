#include "fastpath/admission/rollout_gate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>

#include "fastpath/common/decimal.h"
#include "fastpath/config/ensemble_config.h"

namespace fastpath::admission {
namespace {

constexpr const char* kRolloutPrefix = "fastpath.rollout.";

Status BadValue(const std::string& key, const std::string& value, const std::string& want) {
  return InvalidArgument("parameters: '" + key + "' is '" + value + "'; it must be " + want);
}

// Indexed by GateSetting.
constexpr GateSettingRange kGateSettings[] = {
    {kRolloutMaxP95Ratio, 1, 100, false, "a number from 1 to 100"},
    {kRolloutMinThroughputRatio, 0.01, 1, false, "a number from 0.01 to 1"},
    {kRolloutOutputTolerance, 0, 1, false, "a number from 0 to 1"},
    {kRolloutRounds, 5, 1000, true, "a whole number from 5 to 1000"},
    {kRolloutCanaryPercent, 1, 50, true, "a whole number from 1 to 50"},
    {kRolloutCanaryDuration, 10, 86400, true, "a whole number of seconds from 10 to 86400"},
    {kRolloutCanaryMaxP95Ratio, 1, 100, false, "a number from 1 to 100"},
};

// The setting whose config parameter is `key`.
std::optional<GateSetting> SettingOfKey(const std::string& key) {
  for (size_t i = 0; i < std::size(kGateSettings); ++i) {
    if (key == kGateSettings[i].key) return static_cast<GateSetting>(i);
  }
  return std::nullopt;
}

std::string Figure(double value) {
  char out[32];
  std::snprintf(out, sizeof out, value >= 100 ? "%.0f" : value >= 10 ? "%.1f" : "%.3g", value);
  return out;
}

double Median(std::vector<double> values) { return Percentile(std::move(values), 50); }

constexpr int kResamples = 400;

struct Interval {
  double low = 0, high = 0;
};

// The 5th and 95th percentiles of `statistic` over kResamples resamples of samples of the
// given sizes, each drawn with replacement (statistic(picks): picks[k] holds indices into
// sample k), from a fixed seed: the same samples always give the same verdict.
template <typename Statistic>
Interval Resampled(uint64_t seed, const std::vector<size_t>& sizes, Statistic statistic) {
  if (std::find(sizes.begin(), sizes.end(), size_t{0}) != sizes.end()) return {};
  auto next = [&seed] {  // SplitMix64
    uint64_t z = (seed += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  std::vector<double> values;
  values.reserve(kResamples);
  std::vector<std::vector<size_t>> picks;
  for (size_t n : sizes) picks.emplace_back(n);
  for (int r = 0; r < kResamples; ++r) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      for (size_t& i : picks[k]) i = next() % sizes[k];
    }
    values.push_back(statistic(picks));
  }
  return {Percentile(values, 5), Percentile(values, 95)};
}

// Over resamples of the rounds 0..n-1 (pairs stay together).
template <typename Statistic>
Interval Bootstrap(size_t n, Statistic statistic) {
  return Resampled(
      0x676174652d626f6fULL /* "gate-boo" */, {n},
      [&](const std::vector<std::vector<size_t>>& picks) { return statistic(picks[0]); });
}

}  // namespace

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<size_t>(std::ceil(p / 100 * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

const GateSettingRange& RangeOf(GateSetting setting) {
  return kGateSettings[static_cast<size_t>(setting)];
}

std::optional<double> GateSettingValue(GateSetting setting, const std::string& text) {
  const GateSettingRange& range = RangeOf(setting);
  const std::optional<double> value = ParseDecimal(text);
  if (!value || *value < range.lo || *value > range.hi ||
      (range.whole && *value != std::floor(*value))) {
    return std::nullopt;
  }
  return value;
}

StatusOr<double> ParseGateSetting(GateSetting setting, const std::string& name,
                                  const std::string& text) {
  const std::optional<double> value = GateSettingValue(setting, text);
  if (!value) {
    return InvalidArgument(name + " must be " + RangeOf(setting).description + ", not '" + text +
                           "'");
  }
  return *value;
}

StatusOr<std::optional<GatePolicy>> RolloutGateFor(const inference::ModelConfig& config) {
  const auto& parameters = config.parameters();
  bool on = false;
  if (const auto it = parameters.find(kRolloutGate); it != parameters.end()) {
    const std::string& value = it->second.string_value();
    if (value != "true" && value != "false") return BadValue(kRolloutGate, value, "true or false");
    on = value == "true";
  }
  GatePolicy policy;
  for (const auto& [key, parameter] : parameters) {
    if (key.rfind(kRolloutPrefix, 0) != 0 || key == kRolloutGate) continue;
    const std::string& value = parameter.string_value();
    if (!on) {
      return InvalidArgument("parameters: '" + key +
                             "' tunes the rollout gate, which is off; set " + kRolloutGate +
                             " to \"true\", or remove it");
    }
    if (const std::optional<GateSetting> setting = SettingOfKey(key)) {
      const std::optional<double> number = GateSettingValue(*setting, value);
      if (!number) return BadValue(key, value, RangeOf(*setting).description);
      switch (*setting) {
        case GateSetting::kMaxP95Ratio:
          policy.max_p95_ratio = *number;
          break;
        case GateSetting::kMinThroughputRatio:
          policy.min_throughput_ratio = *number;
          break;
        case GateSetting::kOutputTolerance:
          policy.output_tolerance = *number;
          break;
        case GateSetting::kRounds:
          policy.rounds = static_cast<uint32_t>(*number);
          break;
        case GateSetting::kCanaryPercent:
          policy.canary_percent = static_cast<uint32_t>(*number);
          break;
        case GateSetting::kCanaryDuration:
          policy.canary_duration_s = static_cast<uint32_t>(*number);
          break;
        case GateSetting::kCanaryMaxP95Ratio:
          policy.canary_max_p95_ratio = *number;
          break;
      }
    } else {
      return InvalidArgument("parameters: unknown key '" + key + "' (known: " + kRolloutGate +
                             ", " + kRolloutMaxP95Ratio + ", " + kRolloutMinThroughputRatio + ", " +
                             kRolloutOutputTolerance + ", " + kRolloutRounds + ", " +
                             kRolloutCanaryPercent + ", " + kRolloutCanaryDuration + ", " +
                             kRolloutCanaryMaxP95Ratio + ")");
    }
  }
  if (!on) return std::optional<GatePolicy>();
  for (const char* key : {kRolloutCanaryDuration, kRolloutCanaryMaxP95Ratio}) {
    if (policy.canary_percent == 0 && parameters.count(key) > 0) {
      return InvalidArgument(std::string("parameters: '") + key +
                             "' tunes a canary phase, which is off; set " + kRolloutCanaryPercent +
                             ", or remove it");
    }
  }
  if (config::IsEnsemble(config)) {
    return InvalidArgument(std::string("parameters: '") + kRolloutGate +
                           "' is for models that run: an ensemble's time is its steps'; declare "
                           "it on the step models");
  }
  return std::optional<GatePolicy>(policy);
}

GateVerdict JudgeGate(const GatePolicy& policy, const GateSamples& samples) {
  GateVerdict v;
  v.baseline_p50_ms = Median(samples.baseline_ms);
  v.baseline_p95_ms = Percentile(samples.baseline_ms, 95);
  v.candidate_p50_ms = Median(samples.candidate_ms);
  v.candidate_p95_ms = Percentile(samples.candidate_ms, 95);
  v.p95_ratio = v.baseline_p95_ms > 0 ? v.candidate_p95_ms / v.baseline_p95_ms : 0;

  // Per round, the baseline's time over the candidate's: both ran next to each other, so
  // what changed between rounds (clocks, other load) divides out.
  const bool batched = !samples.baseline_batch_ms.empty();
  const std::vector<double>& a = batched ? samples.baseline_batch_ms : samples.baseline_ms;
  const std::vector<double>& b = batched ? samples.candidate_batch_ms : samples.candidate_ms;
  std::vector<double> ratios;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (b[i] > 0) ratios.push_back(a[i] / b[i]);
  }
  v.throughput_ratio = Median(ratios);
  v.throughput_rows = batched ? samples.batch_rows : samples.rows;

  const size_t pairs = std::min(samples.baseline_ms.size(), samples.candidate_ms.size());
  const Interval p95 = Bootstrap(pairs, [&](const std::vector<size_t>& rounds) {
    std::vector<double> base, cand;
    for (size_t i : rounds) {
      base.push_back(samples.baseline_ms[i]);
      cand.push_back(samples.candidate_ms[i]);
    }
    const double b = Percentile(base, 95);
    return b > 0 ? Percentile(cand, 95) / b : 0;
  });
  const Interval throughput = Bootstrap(ratios.size(), [&](const std::vector<size_t>& rounds) {
    std::vector<double> picked;
    for (size_t i : rounds) picked.push_back(ratios[i]);
    return Median(picked);
  });
  v.p95_ratio_low = p95.low;
  v.p95_ratio_high = p95.high;
  v.throughput_ratio_low = throughput.low;
  v.throughput_ratio_high = throughput.high;

  const auto has_zero = [](const std::vector<double>& ms) {
    return std::any_of(ms.begin(), ms.end(), [](double x) { return !(x > 0); });
  };
  if (samples.baseline_ms.empty() || samples.candidate_ms.empty() || ratios.empty()) {
    v.failures.push_back("nothing was measured");
  } else if (has_zero(samples.baseline_ms) || has_zero(samples.candidate_ms) || has_zero(a) ||
             has_zero(b)) {
    v.failures.push_back("a run was timed at 0 ms: the timing is not to be trusted");
  }
  if (v.p95_ratio > policy.max_p95_ratio && v.p95_ratio_low > policy.max_p95_ratio) {
    v.failures.push_back("p95 " + Figure(v.p95_ratio) + "x the serving version's, " +
                         Figure(v.p95_ratio_low) + "x at the least (at most " +
                         Figure(policy.max_p95_ratio) + "x)");
  }
  if (v.throughput_ratio < policy.min_throughput_ratio &&
      v.throughput_ratio_high < policy.min_throughput_ratio) {
    v.failures.push_back("throughput " + Figure(v.throughput_ratio) + "x the serving version's, " +
                         Figure(v.throughput_ratio_high) + "x at the most (at least " +
                         Figure(policy.min_throughput_ratio) + "x)");
  }
  if (policy.output_tolerance) {
    if (!samples.output_difference) {
      v.failures.push_back("outputs were not compared");
    } else if (*samples.output_difference > *policy.output_tolerance) {
      v.failures.push_back("outputs differ: " + samples.output_difference_detail + " (tolerance " +
                           Figure(*policy.output_tolerance) + ")");
    }
  }
  v.passed = v.failures.empty();

  std::string figures =
      "candidate p50 " + Figure(v.candidate_p50_ms) + " ms p95 " + Figure(v.candidate_p95_ms) +
      " ms, serving p50 " + Figure(v.baseline_p50_ms) + " ms p95 " + Figure(v.baseline_p95_ms) +
      " ms (" + std::to_string(samples.baseline_ms.size()) + " rounds of " +
      std::to_string(samples.rows) + " row" + (samples.rows == 1 ? "" : "s") + "); p95 ratio " +
      Figure(v.p95_ratio) + " (90% interval " + Figure(v.p95_ratio_low) + "-" +
      Figure(v.p95_ratio_high) + "), throughput ratio " + Figure(v.throughput_ratio) + " (" +
      Figure(v.throughput_ratio_low) + "-" + Figure(v.throughput_ratio_high) + ") at batch " +
      std::to_string(v.throughput_rows);
  if (samples.output_difference) {
    figures += *samples.output_difference == 0
                   ? "; outputs identical"
                   : "; outputs differ by " + Figure(*samples.output_difference) +
                         (samples.output_difference_detail.empty()
                              ? ""
                              : " (" + samples.output_difference_detail + ")");
  }
  if (v.passed) {
    v.summary = "passed: " + figures;
  } else {
    std::string why;
    for (const std::string& f : v.failures) why += (why.empty() ? "" : "; ") + f;
    v.summary = "refused: " + why + " — " + figures;
  }
  return v;
}

namespace {

constexpr double kCanaryErrorMargin = 0.01;  // a percentage point
constexpr double kCanaryErrorZ = 3;
constexpr uint64_t kCanaryMinErrors = 5;

std::string Percent(double rate) { return Figure(rate * 100) + "%"; }

}  // namespace

bool GateInconclusive(const GatePolicy& policy, const GateVerdict& v) {
  return (v.p95_ratio > policy.max_p95_ratio && v.p95_ratio_low <= policy.max_p95_ratio) ||
         (v.throughput_ratio < policy.min_throughput_ratio &&
          v.throughput_ratio_high >= policy.min_throughput_ratio);
}

CanaryVerdict JudgeCanary(const GatePolicy& policy, const CanaryCounts& stable,
                          const CanaryCounts& candidate, bool final) {
  CanaryVerdict v;
  auto rate = [](const CanaryCounts& c) {
    return c.requests == 0 ? 0.0 : static_cast<double>(c.errors) / static_cast<double>(c.requests);
  };
  v.stable_error_rate = rate(stable);
  v.candidate_error_rate = rate(candidate);
  std::string figures = "candidate " + std::to_string(candidate.errors) + " errors in " +
                        std::to_string(candidate.requests) + " requests (" +
                        Percent(v.candidate_error_rate) + "), serving " +
                        std::to_string(stable.errors) + " in " + std::to_string(stable.requests) +
                        " (" + Percent(v.stable_error_rate) + ")";
  // The excess over the margin, in standard errors of the difference of two proportions.
  // Each rate is taken with one error and one success added (Agresti-Caffo): a side with few
  // requests, all failed or none, is not a rate known exactly, so one failed request out of
  // one (a client's malformed request among them) never rolls back.
  auto adjusted = [](const CanaryCounts& c) {
    return (static_cast<double>(c.errors) + 1) / (static_cast<double>(c.requests) + 2);
  };
  auto variance = [&](const CanaryCounts& c) {
    const double p = adjusted(c);
    return p * (1 - p) / (static_cast<double>(c.requests) + 2);
  };
  const double excess = adjusted(candidate) - adjusted(stable) - kCanaryErrorMargin;
  const double se = std::sqrt(variance(candidate) + variance(stable));
  if (candidate.errors >= kCanaryMinErrors && excess > 0 && excess / se > kCanaryErrorZ) {
    v.call = CanaryVerdict::Call::kRollBack;
    v.summary =
        "rolled back: the candidate's error rate is above the serving load's by more "
        "than " +
        Percent(kCanaryErrorMargin) + " beyond noise — " + figures;
    return v;
  }
  if (!final) {
    v.summary = "watching: " + figures;
    return v;
  }
  const size_t ns = stable.latency_ms.size(), nc = candidate.latency_ms.size();
  if (ns < kCanaryMinLatencies || nc < kCanaryMinLatencies) {
    v.call = CanaryVerdict::Call::kPromote;
    v.summary = "promoted: no error regression; p95 not judged, too few requests (" +
                std::to_string(nc) + " candidate, " + std::to_string(ns) + " serving, " +
                std::to_string(kCanaryMinLatencies) + " needed on each side) — " + figures;
    return v;
  }
  const double stable_p95 = Percentile(stable.latency_ms, 95);
  const double candidate_p95 = Percentile(candidate.latency_ms, 95);
  v.p95_ratio = stable_p95 > 0 ? candidate_p95 / stable_p95 : 0;
  // The two sides are independent samples: each is resampled on its own.
  auto ratio = [&](const std::vector<std::vector<size_t>>& picks) {
    std::vector<double> s, c;
    for (size_t i : picks[0]) s.push_back(stable.latency_ms[i]);
    for (size_t i : picks[1]) c.push_back(candidate.latency_ms[i]);
    const double base = Percentile(s, 95);
    return base > 0 ? Percentile(c, 95) / base : 0;
  };
  const Interval p95 = Resampled(0x63616e6172792d62ULL /* "canary-b" */, {ns, nc}, ratio);
  v.p95_ratio_low = p95.low;
  v.p95_ratio_high = p95.high;
  figures += "; p95 " + Figure(candidate_p95) + " ms candidate, " + Figure(stable_p95) +
             " ms serving: ratio " + Figure(v.p95_ratio) + " (90% interval " +
             Figure(v.p95_ratio_low) + "-" + Figure(v.p95_ratio_high) + ", at most " +
             Figure(policy.canary_max_p95_ratio) + ")";
  if (v.p95_ratio > policy.canary_max_p95_ratio && v.p95_ratio_low > policy.canary_max_p95_ratio) {
    v.call = CanaryVerdict::Call::kRollBack;
    v.summary = "rolled back: the candidate's p95 regressed beyond noise — " + figures;
  } else {
    v.call = CanaryVerdict::Call::kPromote;
    v.summary = "promoted: no error or p95 regression — " + figures;
  }
  return v;
}

}  // namespace fastpath::admission
