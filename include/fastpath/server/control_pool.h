// The server's one pool for blocking model-control operations (load and unload, which
// block until a model is READY or gone). Both front ends reach it through
// InferenceServer::LoadModelAsync / UnloadModelAsync, so a control call never holds an
// event-loop or gRPC thread, and the number of threads and waiting operations is bounded
// whatever the clients do.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fastpath/common/status.h"

namespace fastpath::server {

class ControlPool {
 public:
  using Task = std::function<Status()>;
  using Done = std::function<void(Status)>;

  // `threads` workers (at least 1); at most `max_queued` operations wait for one. At the
  // thread limit, throws std::system_error (with no thread left running).
  ControlPool(size_t threads, size_t max_queued);
  ~ControlPool();  // Stop()
  ControlPool(const ControlPool&) = delete;
  ControlPool& operator=(const ControlPool&) = delete;

  // Runs `task` on a worker and calls `done` with what it returned (an exception it throws
  // is Internal naming `what`). When the queue is full or the pool is stopped, `done` is
  // called at once, on the caller's thread, with Unavailable naming `what` and the reason.
  // `done` is called exactly once either way.
  void Submit(const std::string& what, Task task, Done done);

  // Refuses new operations and answers the queued ones with Unavailable; the running ones
  // go on. Idempotent.
  void Close();
  // Close, then waits for the running operations to finish. Idempotent.
  void Stop();

 private:
  struct Op {
    std::string what;
    Task task;
    Done done;
  };
  void WorkerLoop();

  const size_t max_queued_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;   // guarded by mu_
  bool stopping_ = false;  // guarded by mu_
  std::mutex stop_mu_;     // serializes Stop
  std::vector<std::thread> workers_;
};

}  // namespace fastpath::server
