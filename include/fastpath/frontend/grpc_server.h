// The gRPC front end: inference.GRPCInferenceService (KServe v2 / Open Inference
// Protocol, as NVIDIA Triton speaks it) on port 8001 by default. It parses each call
// into the facade's vocabulary, calls server::InferenceServer, and renders the result;
// it never reaches past the facade.
//
// Built on gRPC's async API: a fixed number of threads, each polling one completion
// queue and running what arrives on it; no thread is held per call or per stream, and an
// inference completes from the facade's callback on whatever thread runs it.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "fastpath/common/status.h"
#include "fastpath/frontend/request_bytes.h"
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
  // Threads polling the completion queues, one queue each. One is the fastest at every
  // concurrency measured on a 2-core machine (bench/grpc_ab, docs/benchmarks.md): each
  // further queue makes calls hop between threads. A short model may run on these threads
  // (InferRequest::caller_may_run_model), but only for a call with none waiting behind it,
  // so concurrent calls still batch with one.
  int threads = 1;
  // A connection with no call open for this long is closed (a GOAWAY; gRPC's
  // max_connection_idle), as the HTTP front end closes an idle keep-alive connection. It is
  // what frees the descriptor of a client that connected and went silent: gRPC's own listener
  // closed a connection that sent nothing for 120 s, a check that connections handed over by
  // fastpath's listener (grpc_listener.h) skip. An open ModelStreamInfer stream is a call.
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(5)};
  // The request messages being served at once, all calls and streams together: a message
  // that would take the total past it is answered RESOURCE_EXHAUSTED and freed unparsed (on a
  // stream it is parsed first, one at a time, for the id its error_message answer echoes;
  // the stream goes on). Each is charged from its arrival
  // until its answer is made. Shared with the HTTP front end where `fastpath serve` starts
  // both; null: a bound of kDefaultRequestBytesInFlight of its own.
  std::shared_ptr<RequestBytes> request_bytes;
};

class GrpcInferenceServiceImpl;
namespace grpc_internal {
class GrpcListener;
class Queues;
}  // namespace grpc_internal

class GrpcServer {
 public:
  static constexpr std::chrono::milliseconds kMinShutdownGrace{1000};
  // Before gRPC closes the connections, how long the calls in progress may take to end and
  // reach their clients (at most the grace): closed earlier, a reset could discard them.
  static constexpr std::chrono::milliseconds kCloseLinger{2000};

  // Builds and starts the server; returns once it is listening. `server` is borrowed:
  // it must outlive the returned object.
  [[nodiscard]] static StatusOr<std::unique_ptr<GrpcServer>> Start(server::InferenceServer& server,
                                                                   const GrpcOptions& options);

  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // The port actually bound (the chosen one when options.port was 0).
  int port() const { return port_; }

  // Stops accepting new calls and lets the ones in flight end cleanly:
  //  - every open ModelStreamInfer stream stops reading, answers the requests it has
  //    already read, then ends with UNAVAILABLE "the server is shutting down" (retry
  //    elsewhere), or OK if the client had half-closed; an idle stream ends at once;
  //  - unary calls end with their answer.
  // Returns as soon as every call has ended, not at the end of the grace period. Past
  // `grace`, gRPC cancels what is still open (typically an answer a client does not
  // read); the facade's answers are still awaited, since every accepted request is
  // answered. A grace under kMinShutdownGrace is raised to it: cancelling at once would
  // cut off answers already on their way out and would not end any sooner.
  // A call whose request message is still arriving when this is called is cancelled by
  // gRPC (it has not reached a handler yet); drain the facade first to keep those few.
  // Idempotent; the destructor calls it with a zero grace.
  void Shutdown(std::chrono::milliseconds grace);

 private:
  GrpcServer() = default;

  int port_ = 0;
  std::mutex shutdown_mu_;
  bool shut_down_ = false;  // guarded by shutdown_mu_
  // Declared in the order they must outlive each other: the calls point into the
  // service, the queues outlive the server, and the server goes first.
  std::unique_ptr<grpc_internal::GrpcListener> listener_;  // stops before the server
  std::unique_ptr<GrpcInferenceServiceImpl> service_;
  std::unique_ptr<grpc_internal::Queues> queues_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace fastpath::frontend
