#include "instance_health.h"

#include <algorithm>

#include "fastpath/common/log.h"

namespace fastpath::scheduler {

InstanceHealth::InstanceHealth(size_t instances, Clock* clock)
    : clock_(clock), out_(instances, false) {}

bool InstanceHealth::Recover(size_t index, backend::ModelInstance* instance,
                             const std::function<void(const Status&)>& none_can_serve) {
  Clock::duration pause = kFirstPause;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return false;
    }
    const Status recovered = instance->RecoverFromOutOfMemory();
    // The pause runs from the failed attempt: taken before the state below is published, so
    // that whoever sees it (a test that then moves its clock on) cannot move the clock before
    // the pause begins and leave it waiting on a time that never comes.
    const Clock::time_point until = clock_->Now() + pause;
    bool none = false;
    {
      std::lock_guard lock(mu_);
      if (recovered.ok()) {
        if (out_[index]) {
          out_[index] = false;
          --out_count_;
          none_can_serve_.store(false, std::memory_order_release);
        }
        return true;
      }
      if (!out_[index]) {
        out_[index] = true;
        ++out_count_;
      }
      reason_ = recovered.message();
      none = out_count_ == out_.size();
      if (none) none_can_serve_.store(true, std::memory_order_release);
    }
    if (none) {
      log::Error("no instance can serve: " + recovered.message());
      none_can_serve(Unavailable("no instance can serve: " + recovered.message()));
    } else {
      log::Warn(recovered.message() + "; the other instances serve");
    }
    std::unique_lock lock(mu_);
    while (!stopping_ && clock_->Now() < until) clock_->WaitUntil(lock, cv_, until);
    pause = std::min<Clock::duration>(pause * 2, kLongestPause);
  }
}

size_t InstanceHealth::OutOfService() const {
  std::lock_guard lock(mu_);
  return out_count_;
}

Status InstanceHealth::Check() const {
  if (!none_can_serve_.load(std::memory_order_acquire)) return Status::Ok();
  std::lock_guard lock(mu_);
  return Unavailable("no instance can serve: " + reason_);
}

void InstanceHealth::Stop() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  cv_.notify_all();
}

}  // namespace fastpath::scheduler
