#include "fastpath/server/gpu_watch.h"

#include <algorithm>
#include <utility>

#include "fastpath/common/log.h"

namespace fastpath::server {

GpuWatch::GpuWatch(std::shared_ptr<gpu::GpuSource> source, Clock* clock,
                   std::chrono::milliseconds interval, std::set<uint64_t> ignored_xids)
    : source_(std::move(source)),
      source_description_(source_->Describe()),
      clock_(OrSteadyClock(clock)),
      start_(clock_->Now()),
      health_(std::move(ignored_xids)),
      periodic_(clock_, interval, [this] { SampleNow(); }),
      // Each second (or each pass, when they are closer): a hang is told within a second of
      // kHungAfter.
      hang_watch_(clock_, std::min<std::chrono::milliseconds>(interval, std::chrono::seconds(1)),
                  [this] { CheckHungNow(); }) {}

Status GpuWatch::Start() {
  SampleNow();
  FASTPATH_RETURN_IF_ERROR(periodic_.Start("the GPU watch's thread"));
  return hang_watch_.Start("the GPU hang watch's thread");
}

bool GpuWatch::Stop(std::optional<std::chrono::milliseconds> patience) {
  hang_watch_.Stop();
  return periodic_.Stop(patience);
}

void GpuWatch::SampleNow() {
  std::lock_guard pass(sample_mu_);
  const auto at = std::chrono::duration_cast<std::chrono::milliseconds>(clock_->Now() - start_);
  pass_began_ms_.store(at.count(), std::memory_order_release);
  const std::vector<gpu::GpuSample> samples = source_->Sample(at);
  pass_began_ms_.store(-1, std::memory_order_release);
  std::lock_guard lock(mu_);
  Quarantine(health_.Add(samples, at));
}

void GpuWatch::CheckHungNow() {
  const int64_t began = pass_began_ms_.load(std::memory_order_acquire);
  if (began < 0) return;
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(clock_->Now() - start_);
  const std::chrono::milliseconds reading = now - std::chrono::milliseconds(began);
  if (reading < kHungAfter) return;
  std::lock_guard lock(mu_);
  Quarantine(health_.QuarantineAll(
      "a read of the GPU telemetry (" + source_description_ + ") has not returned for " +
      std::to_string(reading.count() / 1000) +
      " s: the driver or the GPU hangs, and what it would report (ECC errors, XIDs, "
      "throttling) cannot be seen"));
}

void GpuWatch::Quarantine(const std::vector<int>& gpus) {
  for (int gpu : gpus) {
    if (gpu >= 0 && gpu < 64) {
      quarantined_mask_.fetch_or(uint64_t{1} << gpu, std::memory_order_release);
    }
    std::string uuid;
    std::string why;
    for (const gpu::GpuStatus& s : health_.Statuses()) {
      if (s.gpu == gpu) {
        uuid = s.last.uuid;
        why = s.quarantined;
      }
    }
    log::Error("!!! GPU " + std::to_string(gpu) + (uuid.empty() ? "" : " (" + uuid + ")") +
               " is QUARANTINED: " + why +
               ". Readiness answers 503 from now on and new requests for models on this GPU are "
               "refused; requests in flight finish. Drain this node and reset or replace the "
               "GPU; only a restart of fastpath clears this (docs/runbooks/gpu.md)");
  }
}

std::vector<gpu::GpuStatus> GpuWatch::Statuses() const {
  std::lock_guard lock(mu_);
  return health_.Statuses();
}

int GpuWatch::FirstQuarantined(const std::vector<int>& gpus) const {
  const uint64_t mask = quarantined_mask_.load(std::memory_order_acquire);
  for (int gpu : gpus) {
    if (gpu >= 0 && gpu < 64 && ((mask >> gpu) & 1) != 0) return gpu;
  }
  return -1;
}

std::string GpuWatch::Quarantined(int gpu) const {
  if (!AnyQuarantined()) return {};
  std::lock_guard lock(mu_);
  for (const gpu::GpuStatus& s : health_.Statuses()) {
    if (s.gpu == gpu) return s.quarantined;
  }
  return {};
}

}  // namespace fastpath::server
