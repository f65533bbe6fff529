// The gRPC front end: inference.GRPCInferenceService (KServe v2 / Open Inference
// Protocol, as NVIDIA Triton speaks it) on port 8001 by default. It parses each call
// into the facade's vocabulary, calls server::InferenceServer, and renders the result;
// it never reaches past the facade.
//
// Built on gRPC's callback API: no thread is held per call or per stream, and an
// inference completes from the facade's callback on whatever thread runs it.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "fastpath/common/status.h"
#include "fastpath/server/server.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace fastpath::frontend {

struct GrpcOptions {
  std::string address = "0.0.0.0";
  int port = 8001;  // 0: an ephemeral port, read it back with GrpcServer::port()
  // Both directions. Raised from gRPC's 4 MB default because tensors are routinely
  // larger; it also bounds how many elements a request tensor may declare.
  int max_message_bytes = 1 << 30;
};

class GrpcInferenceServiceImpl;

class GrpcServer {
 public:
  // Builds and starts the server; returns once it is listening. `server` is borrowed:
  // it must outlive the returned object.
  [[nodiscard]] static StatusOr<std::unique_ptr<GrpcServer>> Start(server::InferenceServer& server,
                                                                   const GrpcOptions& options);

  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // The port actually bound (the chosen one when options.port was 0).
  int port() const { return port_; }

  // Stops accepting new calls; calls in flight get until `grace` to finish, then are
  // cancelled. Returns once every call has ended. Idempotent; the destructor calls it
  // with a zero grace.
  void Shutdown(std::chrono::milliseconds grace);

 private:
  GrpcServer() = default;

  int port_ = 0;
  std::mutex shutdown_mu_;
  bool shut_down_ = false;  // guarded by shutdown_mu_
  // Declared before server_ so that it is destroyed after it: gRPC may still call into
  // the service while the server object winds down.
  std::unique_ptr<GrpcInferenceServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace fastpath::frontend
