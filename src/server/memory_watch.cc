#include "fastpath/server/memory_watch.h"

#include <set>
#include <utility>

#include "fastpath/common/log.h"

namespace fastpath::server {

MemoryWatch::MemoryWatch(ListFn list, Clock* clock, std::chrono::milliseconds interval,
                         admission::LeakDetectorOptions options)
    : list_(std::move(list)),
      clock_(OrSteadyClock(clock)),
      options_(options),
      periodic_(clock_, interval, [this] { SampleNow(); }) {}

void MemoryWatch::SampleNow() {
  const std::vector<std::shared_ptr<repository::ModelVersion>> versions = list_();
  const Clock::time_point now = clock_->Now();
  std::lock_guard lock(mu_);
  std::set<Key> seen;
  std::set<std::pair<std::string, int64_t>> seen_versions;
  for (const auto& version : versions) {
    // The request mix since the last sample: mean batch rows per execution.
    const ModelStatistics stats = version->stats.Snapshot(version->model_name, "");
    const auto id = std::make_pair(version->model_name, version->version);
    seen_versions.insert(id);
    Counts& last = counts_[id];
    std::optional<double> mean_rows;
    if (stats.execution_count > last.executions && stats.inference_count >= last.inferences) {
      mean_rows = static_cast<double>(stats.inference_count - last.inferences) /
                  static_cast<double>(stats.execution_count - last.executions);
    }
    last = {stats.execution_count, stats.inference_count};
    for (size_t i = 0; i < version->audited_instances.size(); ++i) {
      const auto memory = version->audited_instances[i]->memory_stats();
      if (!memory) continue;
      const Key key{version->model_name, version->version, i};
      seen.insert(key);
      auto it = entries_.find(key);
      if (it == entries_.end() || it->second.runtime.lock() != version) {
        // A new version, or the same number loaded again: a new history.
        it = entries_
                 .insert_or_assign(key, Entry{admission::LeakDetector(options_), {},
                                              admission::FragmentationDetector(options_.window),
                                              {}, version})
                 .first;
      }
      Entry& entry = it->second;
      entry.detector.Observe(now, memory->in_use_bytes, mean_rows);
      entry.fragmentation_detector.Observe(now, *memory);
      const bool was_leak = entry.verdict.suspected;
      const bool was_fragmented = entry.fragmentation.suspected;
      entry.verdict = entry.detector.Judge();
      entry.fragmentation = entry.fragmentation_detector.Judge();
      const std::string which = "model '" + version->model_name + "' version " +
                                std::to_string(version->version) + " instance " +
                                std::to_string(i);
      if (entry.verdict.suspected && !was_leak) {
        log::Warn("!!! " + which + ": memory leak suspected: " + entry.verdict.reason);
      }
      if (entry.fragmentation.suspected && !was_fragmented) {
        log::Warn("!!! " + which + ": memory fragmentation suspected: " +
                  entry.fragmentation.reason);
      }
    }
  }
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = seen.count(it->first) ? std::next(it) : entries_.erase(it);
  }
  for (auto it = counts_.begin(); it != counts_.end();) {
    it = seen_versions.count(it->first) ? std::next(it) : counts_.erase(it);
  }
}

std::optional<admission::LeakVerdict> MemoryWatch::Verdict(const std::string& model,
                                                           int64_t version, size_t index) const {
  std::lock_guard lock(mu_);
  const auto it = entries_.find({model, version, index});
  if (it == entries_.end()) return std::nullopt;
  return it->second.verdict;
}

std::optional<admission::FragmentationVerdict> MemoryWatch::Fragmentation(
    const std::string& model, int64_t version, size_t index) const {
  std::lock_guard lock(mu_);
  const auto it = entries_.find({model, version, index});
  if (it == entries_.end()) return std::nullopt;
  return it->second.fragmentation;
}

}  // namespace fastpath::server
