// The gRPC target: inference.GRPCInferenceService, one channel (and so one connection) per
// session. Control calls go through the generated stub; ModelInfer sends requests serialized
// once (Prepare), as the HTTP target sends bodies encoded once, through the generic stub on a
// completion queue the session keeps. The synchronous stub serialized the request, made a
// completion queue and parsed the response on every call: it added about 18 us to the p50 at
// concurrency 1 over h2load's on the same server, this about 5 (docs/benchmarks.md section 12).
// At a fixed concurrency, one thread drives every call on one queue (GrpcClosedLoop) instead
// of a thread per session.
#include <absl/synchronization/mutex.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <optional>

#include "client_internal.h"
#include "fastpath/bench/client.h"
#include "grpc_service.grpc.pb.h"

namespace fastpath::bench {
namespace {

using internal::Truncate;

const char* GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target, int index) {
  // As in the server (src/frontend/grpc/grpc_server.cc): Debian's Abseil tracks lock order
  // on every mutex, a debugging aid: GraphCycles::GetId took 1.7% of the load generator's
  // samples at concurrency 1 (perf), CPU that on a shared machine the server goes without.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // A distinct argument per worker gives each its own connection (subchannel), as each
  // HTTP worker has its own keep-alive connection.
  args.SetInt("fastpath.bench.worker", index);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

constexpr const char* kModelInferMethod = "/inference.GRPCInferenceService/ModelInfer";

class GrpcSession : public InferSession {
 public:
  GrpcSession(std::shared_ptr<grpc::Channel> channel,
              std::shared_ptr<const std::vector<grpc::ByteBuffer>> requests)
      : stub_(std::move(channel)), requests_(std::move(requests)) {}
  ~GrpcSession() override {
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  InferOutcome Infer(size_t index) override {
    grpc::ClientContext context;
    // As HTTP's: a server that stops answering fails the call, never holds bench.
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    grpc::ByteBuffer response;
    grpc::Status status;
    // The buffer's slices are shared, not copied.
    auto call = stub_.PrepareUnaryCall(&context, kModelInferMethod,
                                       (*requests_)[index % requests_->size()], &cq_);
    call->StartCall();
    call->Finish(&response, &status, this);
    void* tag = nullptr;
    bool ok = false;
    // The only operation on this queue: it comes back with this call's status.
    if (!cq_.Next(&tag, &ok) || !ok) return {false, "grpc_INTERNAL", "the completion queue failed"};
    if (!status.ok()) {
      return {false, std::string("grpc_") + GrpcCodeName(status.error_code()),
              Truncate(status.error_message())};
    }
    return {};
  }

 private:
  grpc::GenericStub stub_;
  grpc::CompletionQueue cq_;
  std::shared_ptr<const std::vector<grpc::ByteBuffer>> requests_;
};

// Every call of a closed loop on one completion queue, driven by the thread that runs it;
// one channel (connection) per call in flight, as each HTTP worker has its own.
class GrpcClosedLoop : public ClosedLoop {
 public:
  GrpcClosedLoop(std::vector<std::shared_ptr<grpc::Channel>> channels,
                 std::shared_ptr<const std::vector<grpc::ByteBuffer>> requests)
      : requests_(std::move(requests)) {
    for (auto& channel : channels) calls_.emplace_back(std::move(channel));
  }
  ~GrpcClosedLoop() override {
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  void Run(const std::atomic<bool>& stop, const OnAnswer& on_answer) override {
    using Clock = std::chrono::steady_clock;
    constexpr auto kReconnectPause = std::chrono::milliseconds(20);
    size_t in_flight = 0;
    size_t next = 0;
    auto start = [&](size_t slot) {
      Call& c = calls_[slot];
      c.context = std::make_unique<grpc::ClientContext>();
      c.response.Clear();
      c.status = grpc::Status();
      c.sent = Clock::now();
      // The buffer's slices are shared, not copied.
      c.reader = c.stub.PrepareUnaryCall(c.context.get(), kModelInferMethod,
                                         (*requests_)[next++ % requests_->size()], &cq_);
      c.reader->StartCall();
      c.reader->Finish(&c.response, &c.status, reinterpret_cast<void*>(slot));
      ++in_flight;
    };
    for (size_t slot = 0; slot < calls_.size(); ++slot) start(slot);
    Clock::time_point last_answer = Clock::now();
    Clock::duration slowest{0};
    std::optional<Clock::time_point> stopped;  // when this loop first saw `stop`
    bool cancelled = false;
    // Slots whose call found no server (UNAVAILABLE) start again after a pause, as HTTP's
    // reconnect does: at once, a lost server is asked tens of thousands of times a second.
    std::vector<std::pair<Clock::time_point, size_t>> paused;
    while (in_flight > 0 || (!paused.empty() && !stop.load())) {
      auto wait = Clock::now() + std::chrono::milliseconds(100);
      for (auto it = paused.begin(); it != paused.end();) {
        if (stop.load()) {
          it = paused.erase(it);
        } else if (it->first <= Clock::now()) {
          start(it->second);
          it = paused.erase(it);
        } else {
          wait = std::min(wait, it->first);
          ++it;
        }
      }
      if (in_flight == 0 && paused.empty()) break;
      void* tag = nullptr;
      bool ok = false;
      const auto got = cq_.AsyncNext(
          &tag, &ok,
          std::chrono::system_clock::now() +
              std::chrono::duration_cast<std::chrono::system_clock::duration>(wait - Clock::now()));
      if (got == grpc::CompletionQueue::SHUTDOWN) break;
      if (got == grpc::CompletionQueue::TIMEOUT) {
        // Nothing back for this long once stopping: the server is stuck, and what is still
        // in flight is cancelled rather than waited for (and reported, when long stuck).
        const auto now = Clock::now();
        if (stop.load() && !stopped) stopped = now;
        const auto patience = internal::Patience(slowest);
        if (stopped && !cancelled && now - last_answer > patience) {
          for (Call& c : calls_) {
            if (!c.context) continue;
            if (auto outcome = internal::GiveUp(c.sent, *stopped, now, patience)) {
              on_answer(*outcome,
                        std::chrono::duration_cast<std::chrono::nanoseconds>(now - c.sent).count());
            }
            c.context->TryCancel();
          }
          cancelled = true;
        }
        continue;
      }
      const auto answered = Clock::now();
      last_answer = answered;
      --in_flight;
      const auto slot = reinterpret_cast<size_t>(tag);
      Call& c = calls_[slot];
      slowest = std::max(slowest, answered - c.sent);
      InferOutcome outcome;
      if (!ok) {
        outcome = {false, "grpc_INTERNAL", "the completion queue failed"};
      } else if (!c.status.ok()) {
        outcome = {false, std::string("grpc_") + GrpcCodeName(c.status.error_code()),
                   Truncate(c.status.error_message())};
      }
      c.reader.reset();
      c.context.reset();
      if (!cancelled) {  // once cancelled, what is left was given up on
        on_answer(outcome,
                  std::chrono::duration_cast<std::chrono::nanoseconds>(answered - c.sent).count());
      }
      if (stop.load()) continue;
      if (outcome.kind == "grpc_UNAVAILABLE") {
        paused.emplace_back(answered + kReconnectPause, slot);
      } else {
        start(slot);
      }
    }
  }

 private:
  struct Call {
    explicit Call(std::shared_ptr<grpc::Channel> channel) : stub(std::move(channel)) {}
    grpc::GenericStub stub;
    std::unique_ptr<grpc::ClientContext> context;  // a context serves one call
    std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader;
    grpc::ByteBuffer response;
    grpc::Status status;
    std::chrono::steady_clock::time_point sent;
  };
  grpc::CompletionQueue cq_;
  std::deque<Call> calls_;  // by slot, the calls' tag; a deque, as a stub does not move
  std::shared_ptr<const std::vector<grpc::ByteBuffer>> requests_;
};

class GrpcTarget : public Target {
 public:
  GrpcTarget(ServerAddress address, std::string model, std::string version)
      : address_(std::move(address)), model_(std::move(model)), version_(std::move(version)) {
    target_ =
        (address_.host.find(':') != std::string::npos ? "[" + address_.host + "]" : address_.host) +
        ":" + std::to_string(address_.port);
    control_ = inference::GRPCInferenceService::NewStub(MakeChannel(target_, -1));
  }

  StatusOr<ModelMetadata> Metadata() override {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    inference::ModelMetadataRequest request;
    request.set_name(model_);
    request.set_version(version_);
    inference::ModelMetadataResponse response;
    grpc::Status status = control_->ModelMetadata(&context, request, &response);
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
      return NotFound("model '" + model_ + "' is not known to the server at " + Describe() + ": " +
                      status.error_message());
    }
    if (!status.ok()) {
      return Unavailable("server at " + Describe() + ": ModelMetadata failed with " +
                         GrpcCodeName(status.error_code()) + ": " + status.error_message());
    }
    ModelMetadata m;
    m.name = response.name();
    m.versions.assign(response.versions().begin(), response.versions().end());
    auto convert = [](const auto& list, std::vector<backend::TensorSpec>* out) -> Status {
      for (const auto& t : list) {
        backend::TensorSpec spec;
        spec.name = t.name();
        auto dtype = ParseDataType(t.datatype());
        if (!dtype)
          return InvalidArgument("model metadata: tensor '" + t.name() + "' has datatype '" +
                                 t.datatype() + "'");
        spec.dtype = *dtype;
        spec.dims.assign(t.shape().begin(), t.shape().end());
        out->push_back(std::move(spec));
      }
      return Status::Ok();
    };
    FASTPATH_RETURN_IF_ERROR(convert(response.inputs(), &m.inputs));
    FASTPATH_RETURN_IF_ERROR(convert(response.outputs(), &m.outputs));
    // The config extension, where the server has it (Triton's and fastpath's do).
    grpc::ClientContext config_context;
    config_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    inference::ModelConfigRequest config_request;
    config_request.set_name(model_);
    config_request.set_version(version_);
    inference::ModelConfigResponse config;
    if (control_->ModelConfig(&config_context, config_request, &config).ok()) {
      m.max_batch_size = config.config().max_batch_size();
    }
    metadata_ = m;
    return m;
  }

  StatusOr<std::optional<ModelStatsSnapshot>> Stats() override {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    inference::ModelStatisticsRequest request;
    request.set_name(model_);
    request.set_version(version_);
    inference::ModelStatisticsResponse response;
    grpc::Status status = control_->ModelStatistics(&context, request, &response);
    if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED ||
        status.error_code() == grpc::StatusCode::NOT_FOUND) {
      return std::optional<ModelStatsSnapshot>();
    }
    if (!status.ok()) return Unavailable("ModelStatistics failed: " + status.error_message());
    ModelStatsSnapshot s;
    for (const auto& m : response.model_stats()) {
      s.inference_count += m.inference_count();
      s.execution_count += m.execution_count();
      const auto& is = m.inference_stats();
      auto add = [](StatDuration* d, const inference::StatisticDuration& v) {
        d->count += v.count();
        d->ns += v.ns();
      };
      add(&s.success, is.success());
      add(&s.fail, is.fail());
      add(&s.queue, is.queue());
      add(&s.compute_input, is.compute_input());
      add(&s.compute_infer, is.compute_infer());
      add(&s.compute_output, is.compute_output());
      for (const auto& b : m.batch_stats())
        s.batch_executions[b.batch_size()] += b.compute_infer().count();
    }
    return std::optional<ModelStatsSnapshot>(s);
  }

  Status Prepare(const std::vector<std::vector<Tensor>>& requests) override {
    auto prepared = std::make_shared<std::vector<grpc::ByteBuffer>>();
    for (size_t i = 0; i < requests.size(); ++i) {
      inference::ModelInferRequest r;
      r.set_model_name(model_);
      r.set_model_version(version_);
      r.set_id("bench-" + std::to_string(i));
      for (const Tensor& t : requests[i]) {
        auto* in = r.add_inputs();
        in->set_name(t.name);
        in->set_datatype(std::string(DataTypeName(t.dtype)));
        for (int64_t d : t.shape) in->add_shape(d);
        r.add_raw_input_contents(t.data);
      }
      for (const auto& o : metadata_.outputs) r.add_outputs()->set_name(o.name);
      const std::string bytes = r.SerializeAsString();
      grpc::Slice slice(bytes);
      prepared->emplace_back(&slice, 1);
    }
    if (prepared->empty()) return InvalidArgument("no requests to prepare");
    requests_ = std::move(prepared);
    return Status::Ok();
  }

  StatusOr<std::unique_ptr<InferSession>> NewSession() override {
    if (!requests_) return FailedPrecondition("Prepare was not called");
    return std::unique_ptr<InferSession>(
        std::make_unique<GrpcSession>(MakeChannel(target_, next_++), requests_));
  }

  StatusOr<std::unique_ptr<ClosedLoop>> NewClosedLoop(int64_t concurrency) override {
    if (!requests_) return FailedPrecondition("Prepare was not called");
    std::vector<std::shared_ptr<grpc::Channel>> channels;
    for (int64_t i = 0; i < concurrency; ++i) channels.push_back(MakeChannel(target_, next_++));
    return std::unique_ptr<ClosedLoop>(
        std::make_unique<GrpcClosedLoop>(std::move(channels), requests_));
  }

  std::string Describe() const override { return "grpc://" + target_; }

 private:
  ServerAddress address_;
  std::string model_;
  std::string version_;
  std::string target_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> control_;
  ModelMetadata metadata_;
  std::shared_ptr<const std::vector<grpc::ByteBuffer>> requests_;
  std::atomic<int> next_{0};
};

}  // namespace

StatusOr<std::unique_ptr<Target>> MakeGrpcTarget(const ServerAddress& address,
                                                 const std::string& model,
                                                 const std::string& version) {
  return std::unique_ptr<Target>(std::make_unique<GrpcTarget>(address, model, version));
}

}  // namespace fastpath::bench
