// The front end on gRPC's async API: completion queues, each polled by one thread that
// runs what arrives on it inline, and unary calls that request their successor as they
// arrive. Private to the gRPC front end.
//
// Why not the callback API (what this front end was first built on): on gRPC 1.51 a
// server with any callback method polls with gRPC's own executor threads, and each call
// crosses threads several times. bench/grpc_ab measures the two side by side with no
// model behind them (docs/benchmarks.md, issue 11 §2).
#pragma once

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/async_unary_call.h>
#include <grpcpp/support/byte_buffer.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fastpath/common/status.h"
#include "fastpath/frontend/request_bytes.h"

namespace fastpath::frontend::grpc_internal {

// What a completion queue hands back: every operation's tag is one of these.
class Tag {
 public:
  virtual void Done(bool ok) = 0;
  // Whether its completion may bring a request to serve: a call's arrival, a stream's read.
  virtual bool BringsWork() const = 0;

 protected:
  ~Tag() = default;
};

// A tag that calls (owner->*Fn)(ok).
template <typename Owner, void (Owner::*Fn)(bool), bool kBringsWork = false>
class Event final : public Tag {
 public:
  explicit Event(Owner* owner) : owner_(owner) {}
  void Done(bool ok) override { (owner_->*Fn)(ok); }
  bool BringsWork() const override { return kBringsWork; }

 private:
  Owner* owner_;
};

// Whether an event that brings work (Tag::BringsWork) has completed on the completion queue
// of this thread, behind the tag it is running now. Takes in, without running them, the
// events already completed on that queue; the thread runs them next, in order, before it
// polls again. False off a queue's thread.
//
// Why: a call that arrives while others wait behind it must not run its model on this thread
// (InferRequest::caller_may_run_model). The others would wait for that run, and each would
// then find the instance idle and run alone in turn: with one queue thread, concurrent
// calls were served one by one at batch 1 instead of batched.
bool WorkWaiting();

// Whether this thread is the one that polls `cq` (Queues::Start).
bool OnThreadOf(const grpc::ServerCompletionQueue* cq);

// Work handed to a queue's thread from another thread: a move-only callable.
class Handoff {
 public:
  virtual ~Handoff() = default;
  virtual void Run() = 0;
};

template <typename Fn>
class HandoffOf final : public Handoff {
 public:
  explicit HandoffOf(Fn fn) : fn_(std::move(fn)) {}
  void Run() override { fn_(); }

 private:
  Fn fn_;
};

// What other threads hand to one queue's thread. The first Post after a drain sets a gRPC
// alarm that expires at once, which wakes the thread through its queue; the posts that
// follow before the thread takes them cost no wake-up of their own, so an instance's worker
// that answers a batch of calls wakes the thread about once per batch.
class Inbox final : public Tag {
 public:
  explicit Inbox(grpc::ServerCompletionQueue* cq) : cq_(cq) {}
  // Any thread, while the queue is not shut down.
  void Post(std::unique_ptr<Handoff> work);
  // On the queue's thread: runs what was posted, in order.
  void Done(bool ok) override;
  bool BringsWork() const override { return false; }

 private:
  grpc::ServerCompletionQueue* const cq_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Handoff>> posted_;  // guarded by mu_; not empty: alarm_ set
  std::unique_ptr<grpc::Alarm> alarm_;            // guarded by mu_; a fresh one per wake-up
};

// The server's completion queues and their threads: one thread per queue, so that
// every tag of a call runs on the one thread that polls its queue, one after another.
class Queues {
 public:
  // Adds `count` completion queues to `builder` (before BuildAndStart).
  Queues(grpc::ServerBuilder& builder, int count);
  ~Queues() { Close(); }
  Queues(const Queues&) = delete;
  Queues& operator=(const Queues&) = delete;

  size_t size() const { return queues_.size(); }
  grpc::ServerCompletionQueue* at(size_t i) const { return queues_[i].get(); }

  // Runs `fn` on the thread of queue `cq`: at once when called there, else handed over
  // (Inbox). Only while a call of that queue is live (Request to Ended): Close shuts the
  // queues down only once every call has ended.
  template <typename Fn>
  void RunOn(grpc::ServerCompletionQueue* cq, Fn&& fn) {
    if (OnThreadOf(cq)) {
      std::forward<Fn>(fn)();
      return;
    }
    InboxOf(cq).Post(std::make_unique<HandoffOf<std::decay_t<Fn>>>(std::forward<Fn>(fn)));
  }

  // Starts the threads, once the server is built and before the first calls are requested.
  // At the thread limit, RESOURCE_EXHAUSTED: the threads started go on polling, and the
  // server's shutdown (then Close) ends them; no call waits on a queue nobody polls.
  Status Start();

  // Runs `request` (which requests a call on one of the queues) unless Close has begun:
  // gRPC does not allow a request on a queue that is shut down. The call counts from
  // here until it calls Ended, whether it arrives or not: gRPC may have matched it with
  // a client's call and queued its arrival when Close begins, and Close must wait for
  // that arrival (grpc::Server::Shutdown fails the requests that were never matched, so
  // they end too).
  template <typename Fn>
  void Request(Fn&& request) {
    std::lock_guard lock(mu_);
    if (!open_) return;
    ++live_;
    ++waiting_;
    request();
  }

  // Called once by every call Request made, when it arrives (a client's call) or fails to
  // (the server shuts down).
  void Arrived() {
    std::lock_guard lock(mu_);
    --waiting_;
  }

  // Called once by every call Request made, when gRPC is done with it.
  void Ended() {
    std::lock_guard lock(mu_);
    --live_;
    if (live_ == waiting_) idle_.notify_all();
  }

  // Waits until no call that arrived is still in progress, or until `deadline`.
  void WaitNoneInProgress(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mu_);
    idle_.wait_until(lock, deadline, [this] { return live_ == waiting_; });
  }

  // Once grpc::Server::Shutdown has returned: requests no more calls, waits for every
  // call requested to end (the facade answers each one it accepted; the threads go on
  // running their tags meanwhile), then shuts the queues down and joins the threads.
  // Idempotent.
  void Close();

 private:
  Inbox& InboxOf(const grpc::ServerCompletionQueue* cq);

  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  // After queues_: destroyed first (an alarm holds a reference to its queue).
  std::vector<std::unique_ptr<Inbox>> inboxes_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable idle_;
  bool open_ = true;  // guarded by mu_
  int live_ = 0;      // guarded by mu_: requested and not ended
  int waiting_ = 0;   // guarded by mu_: requested and not arrived
};

// One unary RPC of Service: requested on a queue, handled on that queue's thread when it
// arrives (which requests the next one first), answered by Finish exactly once from any
// thread, deleted when gRPC has completed every operation of it.
//
// The call takes its request as bytes and parses it itself, as gRPC would
// (grpc::SerializationTraits): a request that does not parse (a string that is not UTF-8,
// a truncated message) is answered INVALID_ARGUMENT naming the message type. Left to gRPC,
// it was answered INTERNAL "Unable to parse request", before any handler saw it. Service
// must offer RequestRaw(method index, ...) for its raw methods.
template <typename Service, typename Request, typename Response>
class UnaryCall {
 public:
  // How one RPC is served. Lives as long as the server.
  struct Spec {
    Service* service = nullptr;
    int method = -1;  // the method's index in the service
    // Runs on the queue's thread; must lead to exactly one Finish, then or later.
    std::function<void(UnaryCall&)> handle;
    // Whether the call learns of a client that cancelled (cancelled()).
    bool watch_cancel = false;
    // Charged with the request's bytes from its arrival until its answer is made.
    RequestBytes* request_bytes = nullptr;
  };

  // Requests one call of `spec` on queue `cq` of `queues`.
  static void RequestOn(const Spec* spec, Queues* queues, grpc::ServerCompletionQueue* cq) {
    queues->Request([&] { new UnaryCall(spec, queues, cq); });
  }

  grpc::ServerContext& context() { return context_; }
  Request& request() { return request_; }
  Response* response() { return &response_; }
  // Set when the client cancelled or its deadline passed (watch_cancel calls only).
  const std::shared_ptr<std::atomic<bool>>& cancelled() const { return cancelled_; }

  // Sends the response (status OK) or the status alone. Exactly once; any thread.
  void Finish(const grpc::Status& status) {
    hold_.Reset();  // the request is answered: its room goes back
    if (!status.ok()) {
      writer_.FinishWithError(status, static_cast<Tag*>(&finished_));
      return;
    }
    bool own_buffer = false;
    const grpc::Status serialized =
        grpc::SerializationTraits<Response>::Serialize(response_, &answer_, &own_buffer);
    if (!serialized.ok()) {
      writer_.FinishWithError(serialized, static_cast<Tag*>(&finished_));
      return;
    }
    writer_.Finish(answer_, status, static_cast<Tag*>(&finished_));
  }

  // Runs `fn` (which must lead to Finish) on this call's queue thread: at once when called
  // there. Any thread, before Finish.
  template <typename Fn>
  void RunOnItsThread(Fn&& fn) {
    queues_->RunOn(cq_, std::forward<Fn>(fn));
  }

 private:
  UnaryCall(const Spec* spec, Queues* queues, grpc::ServerCompletionQueue* cq)
      : spec_(spec), queues_(queues), cq_(cq), writer_(&context_) {
    if (spec_->watch_cancel) context_.AsyncNotifyWhenDone(static_cast<Tag*>(&done_));
    spec_->service->RequestRaw(spec_->method, &context_, &payload_, &writer_, cq_, cq_,
                               static_cast<Tag*>(&arrived_));
  }

  void Arrived(bool ok) {
    queues_->Arrived();
    if (!ok) {  // the server is shutting down; the call never began
      Queues* queues = queues_;
      delete this;
      queues->Ended();
      return;
    }
    // Owed: the answer's Finish, and gRPC's "done" for a call that watches cancels.
    pending_ = spec_->watch_cancel ? 2 : 1;
    RequestOn(spec_, queues_, cq_);
    // Charged before it is parsed into a second copy; refused, it is freed at once.
    const size_t bytes = payload_.Length();
    if (std::optional<RequestBytes::Hold> hold = spec_->request_bytes->TryHold(bytes)) {
      hold_ = std::move(*hold);
    } else {
      payload_.Clear();
      Finish(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          spec_->request_bytes->Refusal("this one's " + std::to_string(bytes) + " bytes")));
      return;
    }
    // Deserialize empties payload_: the request is held once while it is served.
    if (!grpc::SerializationTraits<Request>::Deserialize(&payload_, &request_).ok()) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          Service::NotParsed(Request::descriptor()->full_name())));
      return;
    }
    spec_->handle(*this);
  }
  void Finished(bool) { Release(); }
  void DoneNotified(bool) {
    if (context_.IsCancelled()) cancelled_->store(true, std::memory_order_relaxed);
    Release();
  }
  // Only on the queue's thread, which runs every tag of this call.
  void Release() {
    if (--pending_ > 0) return;
    Queues* queues = queues_;
    delete this;
    queues->Ended();
  }

  const Spec* spec_;
  Queues* queues_;
  grpc::ServerCompletionQueue* cq_;
  grpc::ServerContext context_;
  grpc::ByteBuffer payload_;  // the request as it came; parsed into request_ on arrival
  Request request_;
  Response response_;
  grpc::ByteBuffer answer_;  // response_ serialized by Finish
  RequestBytes::Hold hold_;  // the request's bytes, until Finish
  grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> writer_;
  std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
  int pending_ = 0;
  Event<UnaryCall, &UnaryCall::Arrived, /*kBringsWork=*/true> arrived_{this};
  Event<UnaryCall, &UnaryCall::Finished> finished_{this};
  Event<UnaryCall, &UnaryCall::DoneNotified> done_{this};
};

}  // namespace fastpath::frontend::grpc_internal
