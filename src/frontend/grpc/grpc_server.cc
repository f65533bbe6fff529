#include "fastpath/frontend/grpc_server.h"

#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <string>
#include <utility>

#include "async_call.h"
#include "inference_service.h"

namespace fastpath::frontend {

StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(server::InferenceServer& server,
                                                        const GrpcOptions& options) {
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgument("gRPC port " + std::to_string(options.port) + " is out of range");
  }
  if (options.threads < 1 || options.threads > 256) {
    return InvalidArgument("gRPC threads must be 1 to 256, got " + std::to_string(options.threads));
  }
  if (options.max_message_bytes <= 0) {
    return InvalidArgument("gRPC max_message_bytes must be positive, got " +
                           std::to_string(options.max_message_bytes));
  }
  // Debian builds Abseil with its mutexes' lock-order tracking on, a debugging aid that
  // cost 2% of the server's instructions per gRPC call (callgrind: GraphCycles::GetId on
  // every lock). gRPC's own release builds run without it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::unique_ptr<GrpcServer> out(new GrpcServer());
  out->service_ = std::make_unique<GrpcInferenceServiceImpl>(server, options.max_message_bytes);

  // An IPv6 literal needs brackets in a gRPC URI.
  const bool v6 = options.address.find(':') != std::string::npos && options.address[0] != '[';
  const std::string uri = (v6 ? "[" + options.address + "]" : options.address) + ":" +
                          std::to_string(options.port);

  grpc::ServerBuilder builder;
  builder.AddListeningPort(uri, grpc::InsecureServerCredentials(), &out->port_);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  // gRPC sets SO_REUSEPORT by default, which would let a second server (or a stale one)
  // bind the same port silently and split the traffic; a taken port must be an error.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(out->service_->service());
  out->queues_ = std::make_unique<grpc_internal::Queues>(builder, options.threads);
  out->server_ = builder.BuildAndStart();
  if (out->server_ == nullptr || out->port_ == 0) {
    if (out->server_ != nullptr) out->server_->Shutdown();
    out->queues_->Close();
    return Unavailable("cannot listen for gRPC on " + uri +
                       " (address in use or not available on this host)");
  }
  out->service_->RequestCalls(out->queues_.get());
  out->queues_->Start();
  return out;
}

GrpcServer::~GrpcServer() { Shutdown(std::chrono::milliseconds(0)); }

void GrpcServer::Shutdown(std::chrono::milliseconds grace) {
  std::lock_guard lock(shutdown_mu_);
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  // Streams first: gRPC's Shutdown waits for every open call, and an idle stream never
  // ends by itself. A stream opened between these two lines is drained as it opens.
  service_->DrainStreams();
  // Refuses new calls at once; calls in flight run until the deadline, then gRPC
  // cancels them. The queues' threads go on running their tags meanwhile.
  server_->Shutdown(std::chrono::system_clock::now() + std::max(grace, kMinShutdownGrace));
  // Waits for every call that arrived to end, which the facade guarantees (each accepted
  // request is answered), then stops the threads.
  queues_->Close();
  server_->Wait();
}

}  // namespace fastpath::frontend
