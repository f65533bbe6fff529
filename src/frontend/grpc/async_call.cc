#include "async_call.h"

#include <string>

#include "fastpath/common/thread_name.h"

namespace fastpath::frontend::grpc_internal {

Queues::Queues(grpc::ServerBuilder& builder, int count) {
  for (int i = 0; i < count; ++i) queues_.push_back(builder.AddCompletionQueue());
}

void Queues::Start() {
  for (auto& queue : queues_) {
    threads_.emplace_back([cq = queue.get(), i = threads_.size()] {
      NameThisThread("fp-grpc/" + std::to_string(i));
      void* tag = nullptr;
      bool ok = false;
      while (cq->Next(&tag, &ok)) static_cast<Tag*>(tag)->Done(ok);
    });
  }
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
