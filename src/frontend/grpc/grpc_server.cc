#include "fastpath/frontend/grpc_server.h"

#include <absl/synchronization/mutex.h>
#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "async_call.h"
#include "fastpath/common/log.h"
#include "grpc_listener.h"
#include "inference_service.h"

namespace fastpath::frontend {
namespace {

// gRPC's own lines (its errors, and what GRPC_VERBOSITY asks for) through the process logger,
// so that --log-level and --log-format cover them too: with --log-format json, a line gRPC
// wrote as text would be the one a log collector cannot parse. Called on gRPC's threads.
// A request whose metadata gRPC cannot parse (`grpc-timeout: abc`) writes an error line
// before the call is refused: a client's mistake, one line per request, so a warning.
void LogThroughProcessLogger(gpr_log_func_args* args) {
  try {
    const std::string_view message = args->message != nullptr ? args->message : "";
    const bool clients_metadata = message.starts_with("Error parsing metadata");
    const log::Level level = args->severity == GPR_LOG_SEVERITY_ERROR && !clients_metadata
                                 ? log::Level::kError
                             : args->severity == GPR_LOG_SEVERITY_ERROR ? log::Level::kWarn
                             : args->severity == GPR_LOG_SEVERITY_INFO  ? log::Level::kInfo
                                                                        : log::Level::kDebug;
    if (!log::Enabled(level)) return;
    const std::string_view file = args->file != nullptr ? args->file : "";
    const std::string location =
        std::string(file.substr(file.rfind('/') + 1)) + ":" + std::to_string(args->line);
    log::Write(level, message, {{"source", "grpc"}, {"location", location}});
  } catch (...) {
  }
}

// protobuf's own lines likewise. Parsing a request whose string holds bytes that are not
// UTF-8 writes one ("String field ... contains invalid UTF-8 data") before the call is
// answered INVALID_ARGUMENT: a client's mistake, so a warning. Its other errors (an answer
// over 2 GiB) stay errors.
void LogProtobufThroughProcessLogger(google::protobuf::LogLevel level, const char* filename,
                                     int line, const std::string& message) {
  try {
    const bool clients_text = message.find("invalid UTF-8") != std::string::npos;
    const log::Level ours = level >= google::protobuf::LOGLEVEL_ERROR && !clients_text
                                ? log::Level::kError
                            : level >= google::protobuf::LOGLEVEL_WARNING ? log::Level::kWarn
                                                                          : log::Level::kDebug;
    if (!log::Enabled(ours)) return;
    const std::string_view file = filename != nullptr ? filename : "";
    log::Write(
        ours, message,
        {{"source", "protobuf"},
         {"location", std::string(file.substr(file.rfind('/') + 1)) + ":" + std::to_string(line)}});
  } catch (...) {
  }
}

}  // namespace

StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(server::InferenceServer& server,
                                                        const GrpcOptions& options) {
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgument("gRPC port " + std::to_string(options.port) + " is out of range");
  }
  if (options.threads < 1 || options.threads > 256) {
    return InvalidArgument("gRPC threads must be 1 to 256, got " + std::to_string(options.threads));
  }
  if (options.idle_timeout.count() <= 0) {
    return InvalidArgument("gRPC idle_timeout must be positive, got " +
                           std::to_string(options.idle_timeout.count()) + " ms");
  }
  if (options.max_message_bytes <= 0) {
    return InvalidArgument("gRPC max_message_bytes must be positive, got " +
                           std::to_string(options.max_message_bytes));
  }
  // Debian builds Abseil with its mutexes' lock-order tracking on, a debugging aid that
  // cost 2% of the server's instructions per gRPC call (callgrind: GraphCycles::GetId on
  // every lock). gRPC's own release builds run without it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  gpr_set_log_function(&LogThroughProcessLogger);  // before gRPC's first line (grpc_init's)
  google::protobuf::SetLogHandler(&LogProtobufThroughProcessLogger);
  std::unique_ptr<GrpcServer> out(new GrpcServer());
  out->service_ = std::make_unique<GrpcInferenceServiceImpl>(
      server, options.max_message_bytes,
      options.request_bytes != nullptr
          ? options.request_bytes
          : std::make_shared<RequestBytes>(kDefaultRequestBytesInFlight));

  auto listener = grpc_internal::GrpcListener::Listen(options.address, options.port);
  if (!listener.ok()) return listener.status();
  out->listener_ = std::move(listener).value();
  out->port_ = out->listener_->port();

  // No listening port of its own: the listener hands it every connection.
  grpc::ServerBuilder builder;
  // The limit is on what clients send. An answer is the model's, and one larger than a
  // request may be (BYTES grow, a decoder's output) must not fail its call, nor end a
  // stream with the answers behind it: unlimited, as Triton's.
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(-1);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             static_cast<int>(std::min<int64_t>(options.idle_timeout.count(),
                                                                std::numeric_limits<int>::max())));
  builder.RegisterService(out->service_->service());
  out->queues_ = std::make_unique<grpc_internal::Queues>(builder, options.threads);
  out->server_ = builder.BuildAndStart();
  if (out->server_ == nullptr) {
    out->queues_->Close();
    return Internal("the gRPC server did not start");
  }
  // Threads first: should one not start, no call has been requested that a queue nobody
  // polls would hold, and the shutdown ends those started.
  Status started = out->queues_->Start();
  if (started.ok()) {
    out->service_->RequestCalls(out->queues_.get());
    started = out->listener_->Start(out->server_.get());
  }
  if (!started.ok()) {
    // At the thread limit gRPC may have failed to start threads of its own too, and then
    // its event engine waits for ever, in grpc::Server's destructor, for a timer thread
    // it never started (gRPC 1.51). The server is shut down and left, not destroyed: the
    // process is about to end for want of threads anyway.
    out->Shutdown(std::chrono::milliseconds(0));
    static auto* const parked = new std::vector<std::unique_ptr<grpc::Server>>();
    static std::mutex parked_mu;
    std::lock_guard lock(parked_mu);
    parked->push_back(std::move(out->server_));
    return started;
  }
  return out;
}

GrpcServer::~GrpcServer() { Shutdown(std::chrono::milliseconds(0)); }

void GrpcServer::Shutdown(std::chrono::milliseconds grace) {
  std::lock_guard lock(shutdown_mu_);
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  // One end for the whole shutdown, the settling below included: past the grace a pod is
  // killed.
  const auto end = std::chrono::system_clock::now() + std::max(grace, kMinShutdownGrace);
  listener_->Stop();  // no connection is handed to the server once it shuts down
  // Streams first: gRPC's Shutdown waits for every open call, and an idle stream never
  // ends by itself. A stream opened between these two lines is drained as it opens.
  service_->DrainStreams();
  // The facade has answered every request it accepted (serve drains it first): let the
  // calls in progress end and their answers reach the clients before gRPC's GOAWAY closes
  // the connections, which can reset one and lose what it still had to send (see
  // GrpcListener::WaitDelivered). A call that arrives meanwhile is refused at once.
  const auto settle_by = std::chrono::steady_clock::now() + std::min(grace, kCloseLinger);
  queues_->WaitNoneInProgress(settle_by);
  listener_->WaitDelivered(settle_by);
  // Refuses new calls at once; calls in flight run until the deadline, then gRPC
  // cancels them. The queues' threads go on running their tags meanwhile.
  server_->Shutdown(end);
  // Waits for every call that arrived to end, which the facade guarantees (each accepted
  // request is answered), then stops the threads.
  queues_->Close();
  server_->Wait();
}

}  // namespace fastpath::frontend
