// A pass run every interval on a thread of its own, off the request path, timed by an
// injected clock: what the memory, GPU and drift watches sample with.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "fastpath/common/clock.h"
#include "fastpath/common/status.h"

namespace fastpath::server {

class Periodic {
 public:
  Periodic(Clock* clock, std::chrono::milliseconds interval, std::function<void()> pass)
      : clock_(OrSteadyClock(clock)), interval_(interval), pass_(std::move(pass)) {}
  ~Periodic() { Stop(); }
  Periodic(const Periodic&) = delete;
  Periodic& operator=(const Periodic&) = delete;

  // Starts the thread, whose first pass is one interval from now; an interval of 0 starts
  // none. Once only. At the thread limit, RESOURCE_EXHAUSTED naming `what` ("the memory
  // watch's thread"), and no thread.
  Status Start(const std::string& what);
  // Stops the thread and waits for it (and a pass it is in); idempotent. With `patience`,
  // waits that long at most: a pass still running then keeps the thread, which is detached
  // and left to it (false). It still uses this object: its owner must then never destroy it.
  bool Stop(std::optional<std::chrono::milliseconds> patience = std::nullopt);

 private:
  void StartThread();

  Clock* clock_;
  std::chrono::milliseconds interval_;
  std::function<void()> pass_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable exited_cv_;
  bool stop_ = false;    // guarded
  bool exited_ = false;  // guarded: the thread has left its loop
  std::thread thread_;
};

}  // namespace fastpath::server
