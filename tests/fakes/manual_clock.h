// A Clock that only moves when a test advances it. Advancing wakes every thread waiting on
// the clock, so a batcher sleeping until a window's end looks again; the test then calls
// the scheduler's SyncForTesting to know it has. With a tick set, every reading also moves
// it by the tick (a run that reads the clock k times between two readings "takes" k ticks).
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "fastpath/common/clock.h"

namespace fastpath::testing {

class ManualClock final : public Clock {
 public:
  // Starts far from the steady clock's epoch so that "now - duration" stays valid.
  explicit ManualClock(duration tick = duration::zero())
      : now_(time_point(std::chrono::hours(24))), tick_(tick) {}

  time_point Now() const override {
    std::lock_guard lock(mu_);
    const time_point now = now_;
    now_ += tick_;
    return now;
  }

  void WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 time_point until) override {
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
  void Advance(duration d) {
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
  mutable time_point now_;
  const duration tick_;
  std::map<std::thread::id, std::pair<std::mutex*, std::condition_variable*>> waiting_;
};

}  // namespace fastpath::testing
