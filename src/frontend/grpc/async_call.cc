#include "async_call.h"

#include <cstdlib>
#include <deque>
#include <string>
#include <tuple>
#include <utility>

#include "fastpath/common/thread_name.h"
#include "fastpath/common/thread_start.h"

namespace fastpath::frontend::grpc_internal {
namespace {

// The events a queue's thread has taken off its queue (WorkWaiting) and not yet run.
struct Backlog {
  // Bounds what one look takes in: enough to see that work waits, not the whole queue.
  static constexpr size_t kMaxEvents = 64;

  explicit Backlog(grpc::ServerCompletionQueue* queue) : cq(queue) {}

  grpc::ServerCompletionQueue* const cq;
  std::deque<std::pair<Tag*, bool>> events;
  size_t work = 0;  // events that bring work (Tag::BringsWork)
  bool shut_down = false;
};

// This thread's backlog; null off a queue's thread.
thread_local Backlog* backlog = nullptr;

// Runs every event of `cq`, those the backlog took in first, until the queue is shut down
// and drained.
void Poll(grpc::ServerCompletionQueue* cq) {
  Backlog mine(cq);
  backlog = &mine;
  for (;;) {
    Tag* tag = nullptr;
    bool ok = false;
    if (!mine.events.empty()) {
      std::tie(tag, ok) = mine.events.front();
      mine.events.pop_front();
      if (tag->BringsWork()) --mine.work;
    } else {
      void* next = nullptr;
      if (!cq->Next(&next, &ok)) break;
      tag = static_cast<Tag*>(next);
    }
    tag->Done(ok);
  }
  backlog = nullptr;
}

}  // namespace

bool WorkWaiting() {
  Backlog* b = backlog;
  if (b == nullptr) return false;
  while (b->work == 0 && !b->shut_down && b->events.size() < Backlog::kMaxEvents) {
    void* tag = nullptr;
    bool ok = false;
    const auto got = b->cq->AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC));
    if (got == grpc::CompletionQueue::TIMEOUT) break;
    if (got == grpc::CompletionQueue::SHUTDOWN) {
      b->shut_down = true;
      break;
    }
    b->events.emplace_back(static_cast<Tag*>(tag), ok);
    if (static_cast<Tag*>(tag)->BringsWork()) ++b->work;
  }
  return b->work > 0;
}

bool OnThreadOf(const grpc::ServerCompletionQueue* cq) {
  return backlog != nullptr && backlog->cq == cq;
}

void Inbox::Post(std::unique_ptr<Handoff> work) {
  std::lock_guard lock(mu_);
  // Work already waiting means an alarm is set and has not run yet (Done empties the list).
  const bool wake = posted_.empty();
  posted_.push_back(std::move(work));
  if (!wake) return;
  alarm_ = std::make_unique<grpc::Alarm>();  // the last one has run
  alarm_->Set(cq_, gpr_time_0(GPR_CLOCK_MONOTONIC), static_cast<Tag*>(this));
}

void Inbox::Done(bool) {
  std::vector<std::unique_ptr<Handoff>> posted;
  {
    std::lock_guard lock(mu_);
    posted.swap(posted_);
  }
  for (auto& work : posted) work->Run();
}

Queues::Queues(grpc::ServerBuilder& builder, int count) {
  for (int i = 0; i < count; ++i) {
    queues_.push_back(builder.AddCompletionQueue());
    inboxes_.push_back(std::make_unique<Inbox>(queues_.back().get()));
  }
}

Inbox& Queues::InboxOf(const grpc::ServerCompletionQueue* cq) {
  for (size_t i = 0; i < queues_.size(); ++i) {
    if (queues_[i].get() == cq) return *inboxes_[i];
  }
  std::abort();  // every call's queue is one of these
}

Status Queues::Start() {
  return StartThreads(
      [this] {
        for (auto& queue : queues_) {
          threads_.emplace_back([cq = queue.get(), i = threads_.size()] {
            NameThisThread("fp-grpc/" + std::to_string(i));
            Poll(cq);
          });
        }
      },
      [] {}, "the gRPC front end's threads");
}

void Queues::Close() {
  {
    std::unique_lock lock(mu_);
    if (!open_ && threads_.empty()) return;
    open_ = false;
    idle_.wait(lock, [this] { return live_ == 0; });
  }
  for (auto& queue : queues_) queue->Shutdown();
  for (auto& thread : threads_) thread.join();
  threads_.clear();
  // A queue that was never polled still holds its tags; drain it so it can be destroyed.
  void* tag = nullptr;
  bool ok = false;
  for (auto& queue : queues_) {
    while (queue->Next(&tag, &ok)) static_cast<Tag*>(tag)->Done(ok);
  }
}

}  // namespace fastpath::frontend::grpc_internal
