// Which of a scheduler's instances are out of service after running out of memory, and
// the loop that brings one back (backend::ModelInstance::RecoverFromOutOfMemory). Shared
// by the instance pool and the dynamic batcher; private to the scheduler module.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "fastpath/backend/backend.h"
#include "fastpath/common/clock.h"
#include "fastpath/common/status.h"

namespace fastpath::scheduler {

class InstanceHealth {
 public:
  static constexpr std::chrono::seconds kFirstPause{1};
  static constexpr std::chrono::seconds kLongestPause{30};

  // `clock` must outlive this.
  InstanceHealth(size_t instances, Clock* clock);

  // On instance `index`'s own thread, while its scheduler keeps it out of rotation:
  // calls instance->RecoverFromOutOfMemory() until it returns Ok, pausing on the clock
  // between tries (kFirstPause, doubling up to kLongestPause). While it fails the
  // instance counts as out of service; each time a failure leaves no instance that can
  // serve, `none_can_serve` is called (no lock held) with Check()'s status, so that the
  // scheduler answers what waits in its queue instead of holding it through the pauses.
  // True once recovered; false when Stop() came first (the instance stays out).
  bool Recover(size_t index, backend::ModelInstance* instance,
               const std::function<void(const Status&)>& none_can_serve);
  // Unavailable with the latest reason when no instance can serve; Ok otherwise. One
  // atomic load while all is well (it is on the request path). A scheduler asks it under
  // its own lock, which it may hold while this takes InstanceHealth's (never the reverse).
  Status Check() const;
  // How many instances are out of service now.
  size_t OutOfService() const;
  // Ends the pauses: a stopping scheduler recovers nothing more.
  void Stop();

 private:
  Clock* const clock_;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // Stop()
  std::vector<bool> out_;       // guarded by mu_: per instance
  size_t out_count_ = 0;        // guarded by mu_
  std::string reason_;          // guarded by mu_: the latest failure to recover
  bool stopping_ = false;       // guarded by mu_
  std::atomic<bool> none_can_serve_{false};
};

}  // namespace fastpath::scheduler
