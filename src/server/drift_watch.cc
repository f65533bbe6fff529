#include "fastpath/server/drift_watch.h"

#include <algorithm>
#include <set>

#include "fastpath/common/log.h"

namespace fastpath::server {
namespace {

}  // namespace

std::chrono::milliseconds DriftWatch::IntervalFor(std::chrono::nanoseconds window) {
  const auto interval = std::chrono::duration_cast<std::chrono::milliseconds>(window / 30);
  return std::clamp(interval, std::chrono::milliseconds(100), std::chrono::milliseconds(60000));
}

DriftWatch::DriftWatch(ListFn list, GpuFn gpus, Clock* clock, admission::DriftOptions options,
                       std::chrono::milliseconds interval)
    : list_(std::move(list)),
      gpus_(std::move(gpus)),
      clock_(OrSteadyClock(clock)),
      options_(options),
      periodic_(clock_, interval, [this] { SampleNow(); }) {}

void DriftWatch::SampleNow() {
  // One pass at a time, so that observations reach each detector in time order.
  std::lock_guard pass(pass_mu_);
  const std::vector<Watched> watched = list_();
  const std::vector<gpu::GpuStatus> statuses = gpus_ ? gpus_() : std::vector<gpu::GpuStatus>();
  const Clock::time_point now = clock_->Now();
  std::lock_guard lock(mu_);
  std::set<std::pair<std::string, int64_t>> seen;
  for (const auto& [version, gpus] : watched) {
    const auto key = std::make_pair(version->model_name, version->version);
    seen.insert(key);
    auto it = entries_.find(key);
    if (it == entries_.end() || it->second.runtime.lock() != version) {
      it = entries_.insert_or_assign(key, Entry{admission::DriftDetector(options_), {}, version})
               .first;
    }
    std::vector<admission::GpuReading> readings;
    for (const gpu::GpuStatus& s : statuses) {
      if (!std::binary_search(gpus.begin(), gpus.end(), s.gpu)) continue;
      readings.push_back(
          {s.gpu, s.cause_seconds, s.last.sm_clock_mhz,
           (s.last.clocks_event_reasons.value_or(0) & gpu::GpuSample::kGpuIdle) != 0});
    }
    Entry& entry = it->second;
    entry.detector.Observe(now, version->stats.Snapshot(version->model_name, "").batch_stats,
                           !gpus.empty(), std::move(readings));
    const bool was = entry.verdict.alert;
    admission::DriftVerdict verdict = entry.detector.Judge();
    // A window too quiet to judge keeps the last verdict (an alert does not flap with
    // bursty traffic); the detail says so.
    if (!verdict.ratio && entry.verdict.ratio) {
      verdict = entry.verdict;
      if (verdict.detail.find(" (held:") == std::string::npos) {
        verdict.detail += " (held: too few executions in the window since)";
      }
    }
    entry.verdict = std::move(verdict);
    const std::string which =
        "model '" + version->model_name + "' version " + std::to_string(version->version);
    if (entry.verdict.alert && !was) {
      log::Warn("!!! " + which + " drifted: " + entry.verdict.detail);
    } else if (was && !entry.verdict.alert) {
      log::Info(which + " no longer drifts: " +
                (entry.verdict.detail.empty() ? std::string("too few executions to judge")
                                              : entry.verdict.detail));
    }
  }
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = seen.count(it->first) ? std::next(it) : entries_.erase(it);
  }
}

std::optional<admission::DriftVerdict> DriftWatch::Verdict(
    const repository::ModelVersion& runtime) const {
  std::lock_guard lock(mu_);
  const auto it = entries_.find({runtime.model_name, runtime.version});
  if (it == entries_.end() || it->second.runtime.lock().get() != &runtime) return std::nullopt;
  return it->second.verdict;
}

}  // namespace fastpath::server
