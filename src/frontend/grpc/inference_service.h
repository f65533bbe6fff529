// inference.GRPCInferenceService on gRPC's callback API. Each handler turns its call
// into facade calls; none blocks a gRPC thread on inference. Private to the front end.
#pragma once

#include <cstdint>

#include "fastpath/server/server.h"
#include "grpc_service.grpc.pb.h"
#include "stream_infer_reactor.h"

namespace fastpath::frontend {

class GrpcInferenceServiceImpl final : public inference::GRPCInferenceService::CallbackService {
 public:
  // `server` is borrowed and must outlive this service and the grpc::Server it is
  // registered with. `max_message_bytes` bounds the element count a tensor may declare.
  GrpcInferenceServiceImpl(server::InferenceServer& server, int64_t max_message_bytes)
      : server_(server), max_message_bytes_(max_message_bytes) {}

  // Tells every open ModelStreamInfer call, and every one opened later, to drain: no
  // new requests, the ones already read are answered, then the call ends (see
  // stream_infer_reactor.h). Unary calls need nothing: they end with their answer.
  // Called by GrpcServer::Shutdown before grpc::Server::Shutdown, which would otherwise
  // wait out its deadline for streams that never end by themselves.
  void DrainStreams() { streams_.DrainAll(); }

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest* request,
                                           inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override;
  grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
  ModelStreamInfer(grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* context,
                                        const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) override;
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* context,
                                            const inference::ModelStatisticsRequest* request,
                                            inference::ModelStatisticsResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* context,
                                            const inference::RepositoryIndexRequest* request,
                                            inference::RepositoryIndexResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryModelLoad(
      grpc::CallbackServerContext* context, const inference::RepositoryModelLoadRequest* request,
      inference::RepositoryModelLoadResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryModelUnload(
      grpc::CallbackServerContext* context, const inference::RepositoryModelUnloadRequest* request,
      inference::RepositoryModelUnloadResponse* response) override;

 private:
  server::InferenceServer& server_;
  const int64_t max_message_bytes_;
  grpc_internal::StreamRegistry streams_;
};

}  // namespace fastpath::frontend
