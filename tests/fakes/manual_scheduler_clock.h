// A SchedulerClock that only moves when a test advances it. Advancing wakes every thread
// waiting on the clock, so a batcher sleeping until a window's end looks again; the test
// then calls the scheduler's SyncForTesting to know it has.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "fastpath/scheduler/dynamic_batch_scheduler.h"

namespace fastpath::testing {

class ManualSchedulerClock final : public scheduler::SchedulerClock {
 public:
  // Starts far from the steady clock's epoch so that "now - duration" stays valid.
  ManualSchedulerClock() : now_(scheduler::Clock::time_point(std::chrono::hours(24))) {}

  scheduler::Clock::time_point Now() const override {
    std::lock_guard lock(mu_);
    return now_;
  }

  void WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 scheduler::Clock::time_point until) override {
    {
      std::lock_guard guard(mu_);
      if (now_ >= until) return;
      waiting_[std::this_thread::get_id()] = {lock.mutex(), &cv};
    }
    // The caller's lock is held from registration to the wait, and Advance takes that
    // lock before notifying: no wake-up is lost.
    cv.wait(lock);
    std::lock_guard guard(mu_);
    waiting_.erase(std::this_thread::get_id());
  }

  // Not concurrently with the destruction of a scheduler that uses the clock.
  void Advance(std::chrono::microseconds d) {
    std::vector<std::pair<std::mutex*, std::condition_variable*>> to_wake;
    {
      std::lock_guard lock(mu_);
      now_ += d;
      for (const auto& [id, w] : waiting_) to_wake.push_back(w);
    }
    for (auto& [m, cv] : to_wake) {
      std::lock_guard lock(*m);
      cv->notify_all();
    }
  }

 private:
  mutable std::mutex mu_;
  scheduler::Clock::time_point now_;
  std::map<std::thread::id, std::pair<std::mutex*, std::condition_variable*>> waiting_;
};

}  // namespace fastpath::testing
