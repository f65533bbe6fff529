// The memory watch (issue 13 §4): a thread of its own samples the memory arena of every
// READY version's instances every interval, off the request path, and judges each for a
// slow leak (admission/leak_detector.h) and for fragmentation
// (admission/fragmentation_detector.h), over the same window. The request mix it hands the detector is the
// version's mean batch rows per execution since the previous sample. A leak or
// fragmentation first suspected is logged as a warning; the verdicts show in /v2/health/admission and on
// /metrics. Time is the server's clock; tests call SampleNow() after moving a manual one.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "fastpath/admission/fragmentation_detector.h"
#include "fastpath/admission/leak_detector.h"
#include "fastpath/common/clock.h"
#include "fastpath/repository/model_repository.h"
#include "fastpath/server/periodic.h"

namespace fastpath::server {

class MemoryWatch {
 public:
  // The versions to sample now (each held for the pass).
  using ListFn = std::function<std::vector<std::shared_ptr<repository::ModelVersion>>()>;

  MemoryWatch(ListFn list, Clock* clock, std::chrono::milliseconds interval,
              admission::LeakDetectorOptions options);
  ~MemoryWatch() { Stop(); }
  MemoryWatch(const MemoryWatch&) = delete;
  MemoryWatch& operator=(const MemoryWatch&) = delete;

  // Starts the sampling thread; an interval of 0 starts none (SampleNow still works).
  Status Start() { return periodic_.Start("the memory watch's thread"); }
  // Stops the thread and waits for it; idempotent.
  void Stop() { periodic_.Stop(); }
  // One pass: every instance of every listed version sampled at the clock's now, and judged.
  // Versions no longer listed are forgotten.
  void SampleNow();

  // The last verdict for instance `index` of `model` version `version`; nullopt when it was
  // never sampled (or its backend reports no memory).
  std::optional<admission::LeakVerdict> Verdict(const std::string& model, int64_t version,
                                                size_t index) const;
  // Likewise for fragmentation.
  std::optional<admission::FragmentationVerdict> Fragmentation(const std::string& model,
                                                               int64_t version,
                                                               size_t index) const;

 private:
  using Key = std::tuple<std::string, int64_t, size_t>;
  struct Entry {
    admission::LeakDetector detector;
    admission::LeakVerdict verdict;
    admission::FragmentationDetector fragmentation_detector;
    admission::FragmentationVerdict fragmentation;
    // Which load of the version this history is of: a reload restarts it. Weak, so that
    // the address of an unloaded version cannot be reused by its reload while it is held.
    std::weak_ptr<repository::ModelVersion> runtime;
  };
  struct Counts {
    uint64_t executions = 0;
    uint64_t inferences = 0;
  };

  ListFn list_;
  Clock* clock_;
  admission::LeakDetectorOptions options_;

  mutable std::mutex mu_;
  std::map<Key, Entry> entries_;  // guarded
  std::map<std::pair<std::string, int64_t>, Counts> counts_;  // guarded: at the last sample
  Periodic periodic_;  // last: stopped before the rest goes
};

}  // namespace fastpath::server
