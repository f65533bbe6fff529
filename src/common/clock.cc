#include "fastpath/common/clock.h"

namespace fastpath {
namespace {

class SteadyClockImpl final : public Clock {
 public:
  time_point Now() const override { return std::chrono::steady_clock::now(); }
  void WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 time_point until) override {
    if (until == time_point::max()) {
      cv.wait(lock);
    } else {
      cv.wait_until(lock, until);
    }
  }
};

}  // namespace

Clock* SteadyClock() {
  static SteadyClockImpl* clock = new SteadyClockImpl();  // never destroyed
  return clock;
}

}  // namespace fastpath
