// inference.GRPCInferenceService on gRPC's async API (see async_call.h). Each handler
// turns its call into facade calls; none blocks a queue's thread on inference, though a
// short model may run on it (InferRequest::caller_may_run_model). Private to the front end.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "async_call.h"
#include "fastpath/server/server.h"
#include "grpc_service.grpc.pb.h"
#include "inference_async_service.h"
#include "stream_infer_call.h"

namespace fastpath::frontend {

class GrpcInferenceServiceImpl final {
 public:
  using Service = grpc_internal::InferenceAsyncService;

  // `server` is borrowed and must outlive this service and the grpc::Server it is
  // registered with. `max_message_bytes` bounds the element count a tensor may declare;
  // `request_bytes` bounds the request messages held at once (GrpcOptions::request_bytes).
  GrpcInferenceServiceImpl(server::InferenceServer& server, int64_t max_message_bytes,
                           std::shared_ptr<RequestBytes> request_bytes);

  // What to register with the grpc::ServerBuilder.
  grpc::Service* service() { return &service_; }

  // Requests the first calls of every RPC on each of `queues`' queues; each call requests
  // its successor as it arrives. `queues` must not outlive this.
  void RequestCalls(grpc_internal::Queues* queues);

  // Tells every open ModelStreamInfer call, and every one opened later, to drain: no
  // new requests, the ones already read are answered, then the call ends (see
  // stream_infer_call.h). Unary calls need nothing: they end with their answer.
  // Called by GrpcServer::Shutdown before grpc::Server::Shutdown, which would otherwise
  // wait out its deadline for streams that never end by themselves.
  void DrainStreams() { streams_.DrainAll(); }

 private:
  template <typename Request, typename Response>
  using Call = grpc_internal::UnaryCall<Service, Request, Response>;

  // Adds the spec of the unary RPC named `method`; `handle` must lead to exactly one Finish.
  template <typename Request, typename Response, typename Handle>
  void AddUnary(const std::string& method, int calls_per_queue, bool watch_cancel, Handle handle);

  // Shared memory, trace and log settings: Triton's RPCs, answered with what fastpath lacks.
  void AddExtensionsItLacks();
  void ModelInfer(Call<inference::ModelInferRequest, inference::ModelInferResponse>& call);
  // RepositoryModelLoad (load) and RepositoryModelUnload.
  template <typename Request, typename Response>
  void RepositoryControl(Call<Request, Response>& call, bool load);

  server::InferenceServer& server_;
  const int64_t max_message_bytes_;
  const std::shared_ptr<RequestBytes> request_bytes_;
  Service service_;
  grpc_internal::StreamRegistry streams_;
  grpc_internal::StreamInferCall::Shared stream_shared_;  // points into the above
  // One per unary RPC: requests its first calls on a queue.
  std::vector<std::function<void(grpc_internal::Queues*, grpc::ServerCompletionQueue*)>>
      first_calls_;
  // The specs the calls point to; they live as long as this.
  std::vector<std::shared_ptr<void>> specs_;
};

}  // namespace fastpath::frontend
