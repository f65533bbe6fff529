#include "inference_service.h"

#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "call_util.h"
#include "infer_codec.h"
#include "fastpath/protocol/request_policy.h"
#include "stream_infer_reactor.h"

namespace fastpath::frontend {
namespace {

using grpc_internal::Guarded;
using grpc_internal::RequestEcho;
using grpc_internal::ToGrpcStatus;

// Runs `fn` inside the handler's safety net and finishes the call with its status.
// For the RPCs whose answer is at hand (no inference, no loading).
template <typename Fn>
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context, Fn&& fn) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(Guarded(std::forward<Fn>(fn)));
  return reactor;
}

void FillDuration(const StatDuration& in, inference::StatisticDuration* out) {
  out->set_count(in.count);
  out->set_ns(in.ns);
}

void FillStatistics(const ModelStatistics& in, inference::ModelStatistics* out) {
  out->set_name(in.name);
  out->set_version(in.version);
  out->set_last_inference(in.last_inference_ms);
  out->set_inference_count(in.inference_count);
  out->set_execution_count(in.execution_count);
  auto* s = out->mutable_inference_stats();
  FillDuration(in.inference_stats.success, s->mutable_success());
  FillDuration(in.inference_stats.fail, s->mutable_fail());
  FillDuration(in.inference_stats.queue, s->mutable_queue());
  FillDuration(in.inference_stats.compute_input, s->mutable_compute_input());
  FillDuration(in.inference_stats.compute_infer, s->mutable_compute_infer());
  FillDuration(in.inference_stats.compute_output, s->mutable_compute_output());
  // Triton always sends cache_hit/cache_miss; fastpath has no response cache, so zero.
  s->mutable_cache_hit();
  s->mutable_cache_miss();
  for (const auto& b : in.batch_stats) {
    auto* bs = out->add_batch_stats();
    bs->set_batch_size(b.batch_size);
    FillDuration(b.compute_input, bs->mutable_compute_input());
    FillDuration(b.compute_infer, bs->mutable_compute_infer());
    FillDuration(b.compute_output, bs->mutable_compute_output());
  }
}

void FillTensorMetadata(const server::TensorMetadata& in,
                        inference::ModelMetadataResponse::TensorMetadata* out) {
  out->set_name(in.name);
  out->set_datatype(std::string(DataTypeName(in.dtype)));
  out->mutable_shape()->Add(in.shape.begin(), in.shape.end());
}

// A repository call's parameters in the protocol-neutral form (bytes as a string).
Parameters RepositoryParameters(
    const google::protobuf::Map<std::string, inference::ModelRepositoryParameter>& map) {
  Parameters out;
  for (const auto& [key, value] : map) {
    switch (value.parameter_choice_case()) {
      case inference::ModelRepositoryParameter::kBoolParam:
        out[key] = value.bool_param();
        break;
      case inference::ModelRepositoryParameter::kInt64Param:
        out[key] = value.int64_param();
        break;
      case inference::ModelRepositoryParameter::kStringParam:
        out[key] = value.string_param();
        break;
      default:
        out[key] = value.bytes_param();
        break;
    }
  }
  return out;
}

// A ModelInfer call: remembers whether the client went away (cancelled, or its
// deadline passed) in a flag the request carries, so that a request still queued when
// that happens never reaches the model. gRPC owns it; it deletes itself in OnDone,
// which comes only after Finish, and Finish is called exactly once (by the facade's
// callback, or at once for a request that never reached the facade).
class InferCallReactor final : public grpc::ServerUnaryReactor {
 public:
  const std::shared_ptr<std::atomic<bool>>& cancelled() const { return cancelled_; }
  void OnCancel() override { cancelled_->store(true, std::memory_order_relaxed); }
  void OnDone() override { delete this; }

 private:
  std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace

grpc::ServerUnaryReactor* GrpcInferenceServiceImpl::ServerLive(
    grpc::CallbackServerContext* context, const inference::ServerLiveRequest*,
    inference::ServerLiveResponse* response) {
  return FinishNow(context, [&] {
    response->set_live(server_.IsLive());
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* GrpcInferenceServiceImpl::ServerReady(
    grpc::CallbackServerContext* context, const inference::ServerReadyRequest*,
    inference::ServerReadyResponse* response) {
  return FinishNow(context, [&] {
    response->set_ready(server_.IsReady());
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* GrpcInferenceServiceImpl::ModelReady(
    grpc::CallbackServerContext* context, const inference::ModelReadyRequest* request,
    inference::ModelReadyResponse* response) {
  return FinishNow(context, [&] {
    auto ready = server_.IsModelReady(request->name(), request->version());
    // Triton answers ready=false, not an error, for a model or version it does not know;
    // tritonclient's is_model_ready relies on that to return False instead of raising.
    if (!ready.ok() && ready.status().code() == StatusCode::kNotFound) {
      response->set_ready(false);
      return grpc::Status::OK;
    }
    if (!ready.ok()) return ToGrpcStatus(ready.status());
    response->set_ready(*ready);
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* GrpcInferenceServiceImpl::ServerMetadata(
    grpc::CallbackServerContext* context, const inference::ServerMetadataRequest*,
    inference::ServerMetadataResponse* response) {
  return FinishNow(context, [&] {
    server::ServerMetadata md = server_.Metadata();
    response->set_name(std::move(md.name));
    response->set_version(std::move(md.version));
    for (auto& e : md.extensions) response->add_extensions(std::move(e));
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* GrpcInferenceServiceImpl::ModelMetadata(
    grpc::CallbackServerContext* context, const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  return FinishNow(context, [&] {
    auto md = server_.GetModelMetadata(request->name(), request->version());
    if (!md.ok()) return ToGrpcStatus(md.status());
    response->set_name(md->name);
    for (const auto& v : md->versions) response->add_versions(v);
    response->set_platform(md->platform);
    for (const auto& t : md->inputs) FillTensorMetadata(t, response->add_inputs());
    for (const auto& t : md->outputs) FillTensorMetadata(t, response->add_outputs());
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* GrpcInferenceServiceImpl::ModelInfer(
    grpc::CallbackServerContext* context, const inference::ModelInferRequest* request,
    inference::ModelInferResponse* response) {
  auto* reactor = new InferCallReactor();
  StatusOr<InferRequest> parsed = Internal("request not parsed");
  RequestEcho echo;
  const grpc::Status net = Guarded([&] {
    echo = {request->model_name(), request->model_version(), request->id()};
    // gRPC allocated *request for this call alone and nothing reads it after this
    // handler: moving the raw input bytes out of it saves a copy of every input.
    auto* owned = const_cast<inference::ModelInferRequest*>(request);
    parsed = grpc_internal::ParseModelInferRequest(*owned, max_message_bytes_);
    return grpc::Status::OK;
  });
  if (!net.ok()) {
    reactor->Finish(net);
    return reactor;
  }
  if (!parsed.ok()) {
    reactor->Finish(ToGrpcStatus(parsed.status()));
    return reactor;
  }
  parsed->deadline = grpc_internal::SteadyDeadline(context->deadline());
  parsed->cancelled = reactor->cancelled();
  // A gRPC callback thread: the scheduler may run a short model on it when an instance
  // is idle, which spares the call two thread hand-offs (streams keep reading instead).
  parsed->caller_may_run_model = true;
  // `reactor` and `response` stay valid until Finish has been called and gRPC has run
  // OnDone, so the callback may use them from any thread, even before InferAsync returns.
  server_.InferAsync(std::move(parsed).value(),
                     [reactor, response, echo = std::move(echo)](StatusOr<InferResponse> result) {
                       reactor->Finish(Guarded([&] {
                         if (!result.ok()) return ToGrpcStatus(result.status());
                         return ToGrpcStatus(grpc_internal::FillModelInferResponse(
                             std::move(result).value(), echo, response));
                       }));
                     });
  return reactor;
}

grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
GrpcInferenceServiceImpl::ModelStreamInfer(grpc::CallbackServerContext* context) {
  // Ownership passes to gRPC; the reactor deletes itself once done (see its header).
  return new grpc_internal::StreamInferReactor(context, server_, max_message_bytes_, streams_);
}

grpc::ServerUnaryReactor* GrpcInferenceServiceImpl::ModelConfig(
    grpc::CallbackServerContext* context, const inference::ModelConfigRequest* request,
    inference::ModelConfigResponse* response) {
  return FinishNow(context, [&] {
    auto config = server_.GetModelConfig(request->name(), request->version());
    if (!config.ok()) return ToGrpcStatus(config.status());
    *response->mutable_config() = std::move(config).value();
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* GrpcInferenceServiceImpl::ModelStatistics(
    grpc::CallbackServerContext* context, const inference::ModelStatisticsRequest* request,
    inference::ModelStatisticsResponse* response) {
  return FinishNow(context, [&] {
    auto stats = server_.GetModelStatistics(request->name(), request->version());
    if (!stats.ok()) return ToGrpcStatus(stats.status());
    for (const auto& s : *stats) FillStatistics(s, response->add_model_stats());
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* GrpcInferenceServiceImpl::RepositoryIndex(
    grpc::CallbackServerContext* context, const inference::RepositoryIndexRequest* request,
    inference::RepositoryIndexResponse* response) {
  return FinishNow(context, [&] {
    // repository_name: fastpath serves one repository, and Triton too answers for all of
    // its repositories whatever the name, so it does not narrow anything here.
    for (const auto& e : server_.RepositoryIndex(request->ready())) {
      auto* m = response->add_models();
      m->set_name(e.name);
      m->set_version(e.version);
      m->set_state(server::ModelStateName(e.state));
      m->set_reason(e.reason);
    }
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* GrpcInferenceServiceImpl::RepositoryModelLoad(
    grpc::CallbackServerContext* context, const inference::RepositoryModelLoadRequest* request,
    inference::RepositoryModelLoadResponse*) {
  if (request->model_name().empty()) {
    return FinishNow(context, [] {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "model_name is empty");
    });
  }
  // What a load may ask is decided below both front ends.
  if (Status s = protocol::CheckLoadParameters(RepositoryParameters(request->parameters()));
      !s.ok()) {
    return FinishNow(context, [s] { return ToGrpcStatus(s); });
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  server_.LoadModelAsync(request->model_name(),
                         [reactor](Status s) { reactor->Finish(ToGrpcStatus(s)); });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcInferenceServiceImpl::RepositoryModelUnload(
    grpc::CallbackServerContext* context, const inference::RepositoryModelUnloadRequest* request,
    inference::RepositoryModelUnloadResponse*) {
  if (request->model_name().empty()) {
    return FinishNow(context, [] {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "model_name is empty");
    });
  }
  // tritonclient always sends unload_dependents (accepted); the rest is decided below both
  // front ends.
  if (Status s = protocol::CheckUnloadParameters(RepositoryParameters(request->parameters()));
      !s.ok()) {
    return FinishNow(context, [s] { return ToGrpcStatus(s); });
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  server_.UnloadModelAsync(request->model_name(),
                           [reactor](Status s) { reactor->Finish(ToGrpcStatus(s)); });
  return reactor;
}

}  // namespace fastpath::frontend
