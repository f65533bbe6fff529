#include "fastpath/bench/gpu_sampler.h"

#include <algorithm>
#include <utility>

namespace fastpath::bench {

GpuSampler::GpuSampler(MetricsSource* source, std::chrono::milliseconds interval)
    : source_(source), interval_(interval) {}

GpuSampler::~GpuSampler() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GpuSampler::Start() {
  thread_ = std::thread([this] { Run(); });
}

void GpuSampler::Run() {
  auto next = Clock::now();
  for (;;) {
    // Stamped when the scrape was asked for: the server answers with what it held then.
    const auto at = Clock::now();
    Record(at, source_->Scrape());
    next += interval_;
    // A scrape slower than the interval is not caught up on: the next one starts now.
    if (next < Clock::now()) next = Clock::now();
    std::unique_lock lock(mu_);
    if (wake_.wait_until(lock, next, [this] { return stop_; })) return;
  }
}

void GpuSampler::Record(Clock::time_point at, const StatusOr<std::string>& text) {
  Scrape scrape;
  scrape.at = at;
  StatusOr<std::vector<GpuMetrics>> gpus =
      text.ok() ? ParseGpuMetrics(*text) : StatusOr<std::vector<GpuMetrics>>(text.status());
  if (gpus.ok()) {
    scrape.gpus = std::move(gpus).value();
  } else {
    scrape.error = gpus.status().message();
  }
  std::lock_guard lock(mu_);
  auto where = std::upper_bound(scrapes_.begin(), scrapes_.end(), at,
                                [](Clock::time_point t, const Scrape& s) { return t < s.at; });
  scrapes_.insert(where, std::move(scrape));
}

void GpuSampler::Forget(Clock::time_point before) {
  std::lock_guard lock(mu_);
  auto end = std::lower_bound(scrapes_.begin(), scrapes_.end(), before,
                              [](const Scrape& s, Clock::time_point t) { return s.at < t; });
  scrapes_.erase(scrapes_.begin(), end);
}

PointGpuMetrics GpuSampler::Between(Clock::time_point from, Clock::time_point to) const {
  struct Sums {
    PointGpu gpu;
    double utilization = 0;
    int utilization_n = 0;
    double power = 0;
    int power_n = 0;
  };
  PointGpuMetrics out;
  std::vector<Sums> sums;  // in the order the GPUs first appear (each scrape is in GPU order)
  std::lock_guard lock(mu_);
  for (const Scrape& s : scrapes_) {
    if (s.at < from || s.at > to) continue;
    ++out.scrapes;
    if (!s.error.empty()) {
      if (out.failed++ == 0) out.error = s.error;
      continue;
    }
    for (const GpuMetrics& g : s.gpus) {
      auto it =
          std::find_if(sums.begin(), sums.end(), [&](const Sums& x) { return x.gpu.gpu == g.gpu; });
      if (it == sums.end()) {
        sums.emplace_back();
        it = sums.end() - 1;
        it->gpu.gpu = g.gpu;
      }
      PointGpu& p = it->gpu;
      if (!g.uuid.empty()) p.uuid = g.uuid;
      ++p.scrapes;
      if (g.utilization_ratio) {
        it->utilization += *g.utilization_ratio;
        ++it->utilization_n;
      }
      if (g.power_w) {
        it->power += *g.power_w;
        ++it->power_n;
      }
      if (g.memory_used_bytes) {
        p.memory_used_max_bytes =
            std::max(p.memory_used_max_bytes.value_or(0), *g.memory_used_bytes);
      }
      if (g.memory_total_bytes) p.memory_total_bytes = g.memory_total_bytes;
    }
  }
  for (Sums& x : sums) {
    if (x.utilization_n > 0) x.gpu.utilization_avg = x.utilization / x.utilization_n;
    if (x.power_n > 0) x.gpu.power_avg_w = x.power / x.power_n;
    out.gpus.push_back(std::move(x.gpu));
  }
  return out;
}

}  // namespace fastpath::bench
