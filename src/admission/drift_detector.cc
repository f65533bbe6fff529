#include "fastpath/admission/drift_detector.h"

#include <algorithm>
#include <cstdio>

namespace fastpath::admission {
namespace {

// What each cause held the clocks down with, for people.
const std::vector<std::pair<std::string, std::string>>& Causes() {
  static const std::vector<std::pair<std::string, std::string>> causes = {
      {"thermal", "thermal slowdown"},
      {"power", "power cap or power brake"},
      {"reliability", "HW slowdown"},
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
                            bool on_gpu, std::vector<GpuReading> gpus) {
  Observation o{now, ByBatchSize(batch_stats), on_gpu, std::move(gpus)};
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
    if (total.count < before.count || total.ns < before.ns) continue;  // never: reset counters
    const uint64_t n = total.count - before.count;
    executions += n;
    took_ns += static_cast<double>(total.ns - before.ns);
    expected_ns += static_cast<double>(n) * baseline->second.ns_per_execution;
  }
  if (executions < options_.min_executions || expected_ns <= 0) return v;
  v.ratio = took_ns / expected_ns;
  const double span_s = std::chrono::duration<double>(to.at - from.at).count();
  // The span judged: the window, or less while the server has served for less than that.
  const double judged_s =
      std::min(span_s, std::chrono::duration<double>(options_.window).count());
  const std::string window_text = Fixed(judged_s, judged_s < 10 ? 1 : 0) + " s";
  v.detail = "compute per execution " + Fixed(*v.ratio, 2) + "x its start-up baseline over the last " +
             window_text + " (" + std::to_string(executions) + " executions; alert at " +
             Fixed(1 + options_.threshold, 2) + "x)";
  v.alert = *v.ratio >= 1 + options_.threshold;

  // The cause: the reason that held the version's GPUs down longest over the same span.
  std::string cause = "not_gpu";
  std::string why = !to.on_gpu           ? "the model runs on no GPU"
                    : to.gpus.empty()    ? "its GPUs have no telemetry (NVML unavailable)"
                                         : "the GPU clocks held";
  if (to.on_gpu && to.gpus.empty()) cause = "unknown";
  std::string clocks;
  double worst = 0;
  for (const GpuReading& now : to.gpus) {
    const GpuReading* then = nullptr;
    for (const GpuReading& g : from.gpus) {
      if (g.gpu == now.gpu) then = &g;
    }
    for (const auto& named : Causes()) {
      // Not a structured binding: clang before 16 cannot capture one in a lambda.
      const std::string& name = named.first;
      const std::string& what = named.second;
      const auto at = [&](const GpuReading* r) {
        if (r == nullptr) return 0.0;
        auto it = r->cause_seconds.find(name);
        return it == r->cause_seconds.end() ? 0.0 : it->second;
      };
      const double fraction = span_s > 0 ? (at(&now) - at(then)) / span_s : 0;
      if (fraction > worst) {
        worst = fraction;
        if (fraction >= options_.cause_fraction) {
          cause = name;
          why = "GPU " + std::to_string(now.gpu) + " held down by " + what + " " +
                Fixed(100 * std::min(fraction, 1.0), 0) + "% of the window";
        }
      }
    }
    auto clock = baseline_clock_mhz_.find(now.gpu);
    if (now.sm_clock_mhz && clock != baseline_clock_mhz_.end()) {
      clocks += (clocks.empty() ? "" : ", ") + std::string("GPU ") + std::to_string(now.gpu) +
                " SM clock " + Fixed(*now.sm_clock_mhz, 0) + " MHz (" + Fixed(clock->second, 0) +
                " MHz at start)";
      if (cause == "not_gpu" && *now.sm_clock_mhz < 0.9 * clock->second) {
        if (now.idle) {
          why = "GPU " + std::to_string(now.gpu) +
                " idles (its SM clock fell as an idle GPU's does): it waits for work, so the "
                "GPU is not the cause";
        } else {
          cause = "gpu_clocks";
          why = "GPU " + std::to_string(now.gpu) +
                "'s SM clock fell with no clock-event reason to say why";
        }
      }
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
  if (cause == "gpu_clocks") {
    return "the GPU runs at lower clocks than at start: check its application clocks and "
           "power settings (nvidia-smi -q -d CLOCK,POWER) and whether another process "
           "changed them";
  }
  if (cause == "unknown") {
    return "give fastpath NVML (libnvidia-ml.so.1) to tell the GPU's part; meanwhile check "
           "the GPU's clocks and temperature and the host";
  }
  return "the GPU is not the cause: look at the host (CPU contention, a noisy neighbour), the "
         "request mix or the model version";
}

}  // namespace fastpath::admission
