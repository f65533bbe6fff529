// One ModelStreamInfer call, on gRPC's async API (see async_call.h). Requests are read
// one after another and each is handed to the facade as soon as it arrives, so several
// run at once; responses are made on the call's queue thread (Queues::RunOn) and written in
// the order the requests came, as Triton's are for a model that is not decoupled (a client
// may pair them by position): one that completes early waits for those read before it,
// then goes through a queue (gRPC allows one write in flight). A failed request is answered
// with error_message, in its place, and the stream goes on. The call ends with OK once the client
// has half-closed and every response has been written.
//
// Backpressure: at most kMaxOutstanding requests are in the facade or waiting to be
// written; past that the call stops reading until a response has gone out, so a client
// that never reads its responses cannot make the server buffer without bound.
//
// Draining (server shutdown): an idle bidi stream never ends by itself, and gRPC's
// Server::Shutdown waits for every open call, so the server tells each live stream to
// drain first. A draining stream runs no new request: one read after the drain began is
// answered at once with error_message "the server is shutting down". The requests
// already running finish and their answers are written; then the call ends with
// UNAVAILABLE "the server is shutting down" (retryable elsewhere: what a draining pod
// wants its clients to do), or with OK if the client had half-closed. It does not wait
// for the client: Finish is called with the read still outstanding, which gRPC allows
// (the read then completes with ok=false); a request that arrives after Finish is
// dropped, and its client learns from the UNAVAILABLE status. An idle stream therefore
// ends as soon as it is told.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "async_call.h"
#include "fastpath/server/server.h"
#include "grpc_service.grpc.pb.h"
#include "grpc_service.pb.h"
#include "infer_codec.h"
#include "inference_async_service.h"

namespace fastpath::frontend::grpc_internal {

class StreamInferCall;

// The live stream calls of one service, so that shutdown can reach them. Owned by the
// service, which outlives the completion queues and hence every call.
class StreamRegistry {
 public:
  // Adds a new call; false when draining has begun (the call must drain at once; it is
  // not added).
  [[nodiscard]] bool Add(StreamInferCall* call);
  // Called by a call when its Finish has completed. No-op for one never added.
  void Remove(StreamInferCall* call);
  // Tells every live call, and every later one, to drain. Returns once each has been
  // told (not once each has finished: gRPC's Server::Shutdown waits for that).
  // Idempotent.
  void DrainAll();

 private:
  std::mutex mu_;
  std::unordered_set<StreamInferCall*> live_;  // guarded by mu_
  bool draining_ = false;                      // guarded by mu_
};

class StreamInferCall {
 public:
  static constexpr int kMaxOutstanding = 64;
  using Service = InferenceAsyncService;

  // What every stream call of a service uses. Owned by the service; everything here must
  // outlive the queues.
  struct Shared {
    Service* service;
    server::InferenceServer* server;
    int64_t max_message_bytes;  // bounds the element count a tensor may declare
    StreamRegistry* registry;
    // Charged with each request's bytes from its read until its answer is made; a request
    // past it is answered with error_message and the stream goes on.
    RequestBytes* request_bytes;
  };

  // Requests one ModelStreamInfer call on queue `cq` of `queues`; the call requests the
  // next one when it arrives.
  static void RequestOn(const Shared* shared, Queues* queues, grpc::ServerCompletionQueue* cq);

  // Refuses new requests and ends the call once the ones already running are answered
  // (see the top of this file). Thread-safe; a no-op once the call has finished. The caller
  // must hold a reference (StreamRegistry::DrainAll does).
  void Drain();

 private:
  friend class StreamRegistry;

  // What to do after the lock is released; gRPC operations are never started under mu_
  // because their reactions may run on other threads right away.
  struct Actions {
    bool start_read = false;
    const inference::ModelStreamInferResponse* write = nullptr;
    bool finish = false;
    bool finish_ok = true;  // OK, or UNAVAILABLE for a stream ended by the drain
  };

  StreamInferCall(const Shared* shared, Queues* queues, grpc::ServerCompletionQueue* cq);
  ~StreamInferCall() = default;

  // The tags' reactions, each on the queue's thread.
  void Arrived(bool ok);
  void ReadDone(bool ok);
  void WriteDone(bool ok);
  void Finished(bool ok);
  // gRPC's "done": a cancelled call's queued requests never reach the model.
  void DoneNotified(bool ok);

  // A reference per operation gRPC has not completed, and one per DrainAll holding the
  // call; the last one deletes it.
  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref();

  void Dispatch(uint64_t sequence, inference::ModelInferRequest request, RequestBytes::Hold hold);
  // Queues the answer to the request read `sequence`-th (from 0), counted in in_flight_, and
  // uncounts it.
  void Complete(uint64_t sequence, std::unique_ptr<inference::ModelStreamInferResponse> response);
  // Decides the follow-up operations; requires mu_.
  Actions NextActionsLocked();
  // Starts them; the last thing a reaction does, since once Finish is started the queue's
  // thread may delete the call.
  void Run(Actions actions);

  const Shared& shared_;
  Queues* const queues_;
  grpc::ServerCompletionQueue* const cq_;
  grpc::ServerContext context_;
  grpc::ServerAsyncReaderWriter<inference::ModelStreamInferResponse, grpc::ByteBuffer> stream_{
      &context_};
  std::atomic<int> refs_{1};  // the request for the call
  // Set when gRPC reports the call cancelled; every request of the stream carries it.
  const std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
  Event<StreamInferCall, &StreamInferCall::Arrived, /*kBringsWork=*/true> arrived_{this};
  Event<StreamInferCall, &StreamInferCall::ReadDone, /*kBringsWork=*/true> read_done_{this};
  Event<StreamInferCall, &StreamInferCall::WriteDone> write_done_{this};
  Event<StreamInferCall, &StreamInferCall::Finished> finished_event_{this};
  Event<StreamInferCall, &StreamInferCall::DoneNotified> done_{this};

  // Touched only between a Read and its ReadDone, which gRPC serializes.
  grpc::ByteBuffer read_buf_;  // a request as it came, parsed in ReadDone

  std::mutex mu_;
  // Responses waiting to be written; the front one is being written when writing_.
  std::deque<std::unique_ptr<inference::ModelStreamInferResponse>> writes_;  // guarded by mu_
  // Answers that came before an answer to a request read earlier, by their request's place
  // in the stream; next_write_ is the place whose answer goes next. Guarded by mu_.
  std::map<uint64_t, std::unique_ptr<inference::ModelStreamInferResponse>> held_;
  uint64_t next_read_ = 0;   // guarded by mu_
  uint64_t next_write_ = 0;  // guarded by mu_
  bool writing_ = false;     // guarded by mu_
  // Requests read and not yet queued as answers: in the facade, or between ReadDone
  // and the facade. Counted under the same lock that checks draining_, so a drain never
  // finishes the call under a request about to be dispatched. Guarded by mu_.
  int in_flight_ = 0;
  bool reading_ = false;  // a read is outstanding, or ReadDone still runs; mu_
  // A read was decided and Read has not returned yet: Finish must wait, since gRPC does
  // not allow a Read after Finish. Guarded by mu_.
  bool read_starting_ = false;
  bool reads_done_ = false;    // the client half-closed or the call broke; mu_
  bool draining_ = false;      // the server is shutting down; mu_
  bool broken_ = false;        // a write failed: the client is gone, drop answers; mu_
  bool finished_ = false;      // guarded by mu_
};

}  // namespace fastpath::frontend::grpc_internal
