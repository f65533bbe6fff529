// One ModelStreamInfer call. Requests are read one after another and each is handed to
// the facade as soon as it arrives, so several run at once; responses are written in
// the order they complete, through a queue (gRPC allows one write in flight). A failed
// request is answered with error_message and the stream goes on. The call ends with OK
// once the client has half-closed and every response has been written.
//
// Backpressure: at most kMaxOutstanding requests are in the facade or waiting to be
// written; past that the reactor stops reading until a response has gone out, so a
// client that never reads its responses cannot make the server buffer without bound.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "fastpath/server/server.h"
#include "grpc_service.pb.h"
#include "infer_codec.h"

namespace fastpath::frontend::grpc_internal {

class StreamInferReactor final
    : public grpc::ServerBidiReactor<inference::ModelInferRequest,
                                     inference::ModelStreamInferResponse> {
 public:
  static constexpr int kMaxOutstanding = 64;

  // Owned by gRPC from the moment the handler returns it: it deletes itself in OnDone,
  // which gRPC calls only after Finish and after every read and write has completed.
  // Finish is called only when no facade callback is pending, so no callback can reach
  // a deleted reactor.
  StreamInferReactor(grpc::CallbackServerContext* context, server::InferenceServer& server,
                     int64_t max_message_bytes);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  // What to do after the lock is released; gRPC operations are never started under mu_
  // because their reactions may run on other threads right away.
  struct Actions {
    bool start_read = false;
    const inference::ModelStreamInferResponse* write = nullptr;
    bool finish = false;
  };

  void Dispatch(inference::ModelInferRequest request);
  // Queues the answer to one request. `from_facade`: it was counted in in_flight_.
  void Complete(std::unique_ptr<inference::ModelStreamInferResponse> response, bool from_facade);
  // Decides the follow-up operations; requires mu_.
  Actions NextActionsLocked();
  // Starts them; the last thing a reaction does, since Finish may let OnDone run.
  void Run(const Actions& actions);

  grpc::CallbackServerContext* const context_;
  server::InferenceServer& server_;
  const int64_t max_message_bytes_;

  // Touched only between a StartRead and its OnReadDone, which gRPC serializes.
  inference::ModelInferRequest read_buf_;

  std::mutex mu_;
  // Responses waiting to be written; the front one is being written when writing_.
  std::deque<std::unique_ptr<inference::ModelStreamInferResponse>> writes_;  // guarded by mu_
  bool writing_ = false;       // guarded by mu_
  int in_flight_ = 0;          // requests in the facade; guarded by mu_
  bool reading_ = true;        // a read is outstanding (the constructor starts one); mu_
  bool reads_done_ = false;    // the client half-closed or the call broke; mu_
  bool broken_ = false;        // a write failed: the client is gone, drop answers; mu_
  bool finished_ = false;      // guarded by mu_
};

}  // namespace fastpath::frontend::grpc_internal
