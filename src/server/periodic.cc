#include "fastpath/server/periodic.h"

#include "fastpath/common/thread_start.h"

namespace fastpath::server {

Status Periodic::Start(const std::string& what) {
  if (interval_.count() <= 0 || thread_.joinable()) return Status::Ok();
  return StartThreads([&] { StartThread(); }, [] {}, what);
}

void Periodic::StartThread() {
  // Read now, not when the thread first runs: a manual clock moved meanwhile would put the
  // first pass an interval past that move.
  thread_ = std::thread([this, next = clock_->Now() + interval_]() mutable {
    std::unique_lock lock(mu_);
    while (!stop_) {
      clock_->WaitUntil(lock, cv_, next);
      if (stop_) break;
      if (clock_->Now() < next) continue;
      lock.unlock();
      pass_();
      lock.lock();
      if (stop_) break;  // nothing more of the clock: a pass left to a hung read outlives it
      next = clock_->Now() + interval_;
    }
    exited_ = true;
    exited_cv_.notify_all();
  });
}

bool Periodic::Stop(std::optional<std::chrono::milliseconds> patience) {
  std::unique_lock lock(mu_);
  stop_ = true;
  cv_.notify_all();
  if (!thread_.joinable()) return true;
  if (patience && !exited_cv_.wait_for(lock, *patience, [this] { return exited_; })) {
    thread_.detach();
    return false;
  }
  lock.unlock();
  thread_.join();
  return true;
}

}  // namespace fastpath::server
