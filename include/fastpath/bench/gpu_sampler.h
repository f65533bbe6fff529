// `fastpath bench --collect-metrics`: the server's GPUs while each point is measured, the
// figures perf_analyzer's --collect-metrics gives (each GPU's average utilization and power,
// its largest memory use). One thread scrapes the server's Prometheus /metrics (soak.h:
// MetricsSource, ParseGpuMetrics) every interval for the whole run, and each point takes the
// scrapes that fell within its measured windows: a gauge sampled through the windows, not
// one reading at their end. NVML's utilization is itself the share of its last sample period
// in which a kernel ran, so an average over a few seconds of scrapes is what a dashboard of
// the same series shows.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fastpath/bench/report.h"
#include "fastpath/bench/soak.h"
#include "fastpath/common/status.h"

namespace fastpath::bench {

class GpuSampler {
 public:
  using Clock = std::chrono::steady_clock;

  // `source` must outlive the sampler. Nothing is scraped before Start.
  GpuSampler(MetricsSource* source, std::chrono::milliseconds interval);
  ~GpuSampler();  // stops the thread
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  // Scrapes at once, then every interval, until destroyed.
  void Start();

  // The scrapes taken within [from, to]. Thread-safe.
  PointGpuMetrics Between(Clock::time_point from, Clock::time_point to) const;

  // Drops the scrapes taken before `before`, which no later Between asks for: a soak of days
  // keeps only its current window's. Thread-safe.
  void Forget(Clock::time_point before);

  // Keeps one scrape's outcome, taken at `at` (what the thread does with each; public so that
  // a test can feed scrapes at times of its choosing).
  void Record(Clock::time_point at, const StatusOr<std::string>& text);

 private:
  struct Scrape {
    Clock::time_point at;
    std::vector<GpuMetrics> gpus;
    std::string error;  // empty: the scrape worked
  };

  void Run();

  MetricsSource* const source_;
  const std::chrono::milliseconds interval_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;            // guarded by mu_
  std::vector<Scrape> scrapes_;  // guarded by mu_; in time order
  std::thread thread_;
};

}  // namespace fastpath::bench
