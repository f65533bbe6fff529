#include "fastpath/admission/drift_detector.h"

#include <algorithm>
#include <cstdio>

namespace fastpath::admission {
namespace {

// The clock-event reason bits behind each cause (gpu/telemetry.h's labels).
struct CauseBits {
  const char* cause;
  std::vector<int> bits;
  const char* what;
};
const std::vector<CauseBits>& Causes() {
  static const std::vector<CauseBits> causes = {
      {"thermal", {5, 6}, "thermal slowdown"},
      {"power", {2, 7}, "power cap or power brake"},
      {"reliability", {3}, "HW slowdown"},
  };
  return causes;
}

std::string Fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

std::map<uint64_t, StatDuration> ByBatchSize(const std::vector<BatchStatistics>& batch_stats) {
  std::map<uint64_t, StatDuration> out;
  for (const BatchStatistics& b : batch_stats) out[b.batch_size] = b.compute_infer;
  return out;
}

}  // namespace

void DriftDetector::Observe(Clock::time_point now, const std::vector<BatchStatistics>& batch_stats,
                            std::vector<GpuReading> gpus) {
  Observation o{now, ByBatchSize(batch_stats), std::move(gpus)};
  if (!first_) first_ = o;
  for (const auto& [size, total] : o.by_batch_size) {
    if (baselines_.count(size) != 0) continue;
    const auto start = first_->by_batch_size.find(size);
    const StatDuration before = start == first_->by_batch_size.end() ? StatDuration{} : start->second;
    if (total.count < before.count + options_.baseline_executions) continue;
    baselines_[size].ns_per_execution =
        static_cast<double>(total.ns - before.ns) / static_cast<double>(total.count - before.count);
    if (baseline_clock_mhz_.empty()) {
      for (const GpuReading& g : o.gpus) {
        if (g.sm_clock_mhz) baseline_clock_mhz_[g.gpu] = *g.sm_clock_mhz;
      }
    }
  }
  window_.push_back(std::move(o));
  // Keep one observation at or before the window's start, so the window is covered.
  while (window_.size() >= 2 && window_[1].at <= now - options_.window) window_.pop_front();
}

DriftVerdict DriftDetector::Judge() const {
  DriftVerdict v;
  if (window_.size() < 2) return v;
  const Observation& from = window_.front();
  const Observation& to = window_.back();
  double took_ns = 0;
  double expected_ns = 0;
  uint64_t executions = 0;
  for (const auto& [size, total] : to.by_batch_size) {
    const auto baseline = baselines_.find(size);
    if (baseline == baselines_.end()) continue;
    const auto start = from.by_batch_size.find(size);
    const StatDuration before = start == from.by_batch_size.end() ? StatDuration{} : start->second;
    const uint64_t n = total.count - before.count;
    executions += n;
    took_ns += static_cast<double>(total.ns - before.ns);
    expected_ns += static_cast<double>(n) * baseline->second.ns_per_execution;
  }
  if (executions < options_.min_executions || expected_ns <= 0) return v;
  v.ratio = took_ns / expected_ns;
  const double span_s = std::chrono::duration<double>(to.at - from.at).count();
  const std::string window_text =
      Fixed(std::chrono::duration<double>(options_.window).count(), 0) + " s";
  v.detail = "compute per execution " + Fixed(*v.ratio, 2) + "x its start-up baseline over the last " +
             window_text + " (" + std::to_string(executions) + " executions; alert at " +
             Fixed(1 + options_.threshold, 2) + "x)";
  v.alert = *v.ratio >= 1 + options_.threshold;

  // The cause: the reason that held the version's GPUs down longest over the same span.
  std::string cause = "not_gpu";
  std::string why = to.gpus.empty() ? "the model runs on no GPU" : "the GPU clocks held";
  std::string clocks;
  double worst = 0;
  for (const GpuReading& now : to.gpus) {
    const GpuReading* then = nullptr;
    for (const GpuReading& g : from.gpus) {
      if (g.gpu == now.gpu) then = &g;
    }
    for (const CauseBits& c : Causes()) {
      double seconds = 0;
      for (int bit : c.bits) {
        const auto at = [&](const GpuReading* r) {
          if (r == nullptr) return 0.0;
          auto it = r->throttle_seconds.find(bit);
          return it == r->throttle_seconds.end() ? 0.0 : it->second;
        };
        seconds = std::max(seconds, at(&now) - at(then));
      }
      const double fraction = span_s > 0 ? seconds / span_s : 0;
      if (fraction > worst) {
        worst = fraction;
        if (fraction >= options_.cause_fraction) {
          cause = c.cause;
          why = "GPU " + std::to_string(now.gpu) + " held down by " + c.what + " " +
                Fixed(100 * std::min(fraction, 1.0), 0) + "% of the window";
        }
      }
    }
    auto clock = baseline_clock_mhz_.find(now.gpu);
    if (now.sm_clock_mhz && clock != baseline_clock_mhz_.end()) {
      clocks += (clocks.empty() ? "" : ", ") + std::string("GPU ") + std::to_string(now.gpu) +
                " SM clock " + Fixed(*now.sm_clock_mhz, 0) + " MHz (" + Fixed(clock->second, 0) +
                " MHz at start)";
    }
  }
  v.detail += "; " + why;
  if (!clocks.empty()) v.detail += "; " + clocks;
  if (v.alert) {
    v.cause = cause;
    v.detail += "; cause " + cause + ": " + DriftFix(cause);
  }
  return v;
}

std::string DriftFix(const std::string& cause) {
  if (cause == "thermal") {
    return "check the GPU's cooling (airflow, fans, inlet temperature, a blocked chassis; "
           "nvidia-smi -q -d TEMPERATURE,PERFORMANCE)";
  }
  if (cause == "power") {
    return "the power limit holds the clocks down: raise it within the board's rating "
           "(nvidia-smi -pl), or move load off this GPU";
  }
  if (cause == "reliability") {
    return "the board asserted HW slowdown (power brake, power supply or thermal hardware): "
           "check its power and cabling, and drain and replace it if it persists";
  }
  return "the GPU is not the cause: look at the host (CPU contention, a noisy neighbour), the "
         "request mix or the model version";
}

}  // namespace fastpath::admission
