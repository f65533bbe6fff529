// Time, injected. Everything whose behaviour depends on time (queue deadlines, batching
// windows, latency statistics, the admission self-test) reads it from a Clock it was
// given, and sleeps through it, so that tests move time by hand
// (tests/fakes/manual_clock.h) instead of racing sleeps. Production passes nullptr, which
// every taker reads as SteadyClock().
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace fastpath {

class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::steady_clock::duration;

  virtual ~Clock() = default;
  virtual time_point Now() const = 0;
  // Blocks on `cv` (whose mutex `lock` holds) until it is notified or this clock reaches
  // `until` (time_point::max(): no limit). May return early; callers re-check.
  virtual void WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                         time_point until) = 0;
};

// The process's steady clock. Never null, never destroyed (threads may outlive statics).
Clock* SteadyClock();

// `clock`, or SteadyClock() when it is null.
inline Clock* OrSteadyClock(Clock* clock) { return clock != nullptr ? clock : SteadyClock(); }

// Nanoseconds in `d`, 0 when negative (a clock never runs backwards, but a fake may).
inline uint64_t Nanoseconds(Clock::duration d) {
  if (d.count() < 0) return 0;
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

}  // namespace fastpath
