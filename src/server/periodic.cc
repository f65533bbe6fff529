#include "fastpath/server/periodic.h"

namespace fastpath::server {

void Periodic::Start() {
  if (interval_.count() <= 0 || thread_.joinable()) return;
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    Clock::time_point next = clock_->Now() + interval_;
    while (!stop_) {
      clock_->WaitUntil(lock, cv_, next);
      if (stop_) break;
      if (clock_->Now() < next) continue;
      lock.unlock();
      pass_();
      lock.lock();
      next = clock_->Now() + interval_;
    }
  });
}

void Periodic::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace fastpath::server
