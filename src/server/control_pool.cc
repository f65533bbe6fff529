#include "fastpath/server/control_pool.h"

#include <algorithm>
#include <exception>
#include <utility>

namespace fastpath::server {

ControlPool::ControlPool(size_t threads, size_t max_queued) : max_queued_(max_queued) {
  const size_t n = std::max<size_t>(threads, 1);
  workers_.reserve(n);
  try {
    for (size_t i = 0; i < n; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  } catch (...) {
    Stop();  // a joinable std::thread destroyed would end the process
    throw;
  }
}

ControlPool::~ControlPool() { Stop(); }

void ControlPool::Submit(const std::string& what, Task task, Done done) {
  Op op{what, std::move(task), std::move(done)};
  std::string refused;
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      refused = what + ": the server is shutting down";
    } else if (queue_.size() >= max_queued_) {
      refused = what + ": " + std::to_string(queue_.size()) +
                " model-control operations are already waiting; retry once they are done";
    } else {
      // Strong guarantee: if this throws, `op` (and its `done`) is untouched.
      queue_.push_back(std::move(op));
    }
  }
  if (refused.empty()) {
    cv_.notify_one();
    return;
  }
  op.done(Unavailable(refused));
}

void ControlPool::Close() {
  std::deque<Op> abandoned;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    abandoned.swap(queue_);
  }
  cv_.notify_all();
  for (Op& op : abandoned) {
    op.done(Unavailable(op.what + ": the server is shutting down; the operation did not start"));
  }
}

void ControlPool::Stop() {
  std::lock_guard stop_lock(stop_mu_);
  Close();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
}

void ControlPool::WorkerLoop() {
  for (;;) {
    Op op;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      op = std::move(queue_.front());
      queue_.pop_front();
    }
    Status status;
    try {
      status = op.task();
    } catch (const std::exception& e) {
      status = Internal(op.what + ": " + e.what());
    } catch (...) {
      status = Internal(op.what + ": unknown exception");
    }
    op.done(std::move(status));
  }
}

}  // namespace fastpath::server
