#include "inference_service.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "call_util.h"
#include "fastpath/common/utf8.h"
#include "fastpath/protocol/request_policy.h"
#include "infer_codec.h"
#include "stream_infer_call.h"

namespace fastpath::frontend {
namespace {

using grpc_internal::Guarded;
using grpc_internal::RequestEcho;
using grpc_internal::ToGrpcStatus;

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

}  // namespace

template <typename Request, typename Response, typename Handle>
void GrpcInferenceServiceImpl::AddUnary(const std::string& method, int calls_per_queue,
                                        bool watch_cancel, Handle handle) {
  auto spec = std::make_shared<typename Call<Request, Response>::Spec>();
  spec->service = &service_;
  spec->method = Service::MethodIndex(method);
  spec->watch_cancel = watch_cancel;
  spec->request_bytes = request_bytes_.get();
  spec->handle = std::move(handle);
  const auto* raw = spec.get();
  specs_.push_back(std::move(spec));
  first_calls_.push_back(
      [raw, calls_per_queue](grpc_internal::Queues* queues, grpc::ServerCompletionQueue* cq) {
        for (int i = 0; i < calls_per_queue; ++i)
          Call<Request, Response>::RequestOn(raw, queues, cq);
      });
}

GrpcInferenceServiceImpl::GrpcInferenceServiceImpl(server::InferenceServer& server,
                                                   int64_t max_message_bytes,
                                                   std::shared_ptr<RequestBytes> request_bytes)
    : server_(server),
      max_message_bytes_(max_message_bytes),
      request_bytes_(std::move(request_bytes)),
      stream_shared_{&service_, &server_, max_message_bytes_, &streams_, request_bytes_.get()} {
  using namespace inference;  // NOLINT(google-build-using-namespace): the message names
  // Calls whose answer is at hand: the handler's safety net, then Finish.
  auto now = [](auto fn) {
    return [fn = std::move(fn)](auto& call) {
      call.Finish(Guarded([&] { return fn(call.request(), call.response()); }));
    };
  };
  AddUnary<ServerLiveRequest, ServerLiveResponse>(
      "ServerLive", 1, false, now([this](const ServerLiveRequest&, ServerLiveResponse* response) {
        response->set_live(server_.IsLive());
        return grpc::Status::OK;
      }));
  AddUnary<ServerReadyRequest, ServerReadyResponse>(
      "ServerReady", 1, false,
      now([this](const ServerReadyRequest&, ServerReadyResponse* response) {
        response->set_ready(server_.IsReady());
        return grpc::Status::OK;
      }));
  AddUnary<ModelReadyRequest, ModelReadyResponse>(
      "ModelReady", 1, false,
      now([this](const ModelReadyRequest& request, ModelReadyResponse* response) {
        auto ready = server_.IsModelReady(request.name(), request.version());
        // Triton answers ready=false, not an error, for a model or version it does not
        // know; tritonclient's is_model_ready relies on that to return False.
        if (!ready.ok() && ready.status().code() == StatusCode::kNotFound) {
          response->set_ready(false);
          return grpc::Status::OK;
        }
        if (!ready.ok()) return ToGrpcStatus(ready.status());
        response->set_ready(*ready);
        return grpc::Status::OK;
      }));
  AddUnary<ServerMetadataRequest, ServerMetadataResponse>(
      "ServerMetadata", 1, false,
      now([this](const ServerMetadataRequest&, ServerMetadataResponse* response) {
        server::ServerMetadata md = server_.Metadata();
        response->set_name(std::move(md.name));
        response->set_version(std::move(md.version));
        for (auto& e : md.extensions) response->add_extensions(std::move(e));
        return grpc::Status::OK;
      }));
  AddUnary<ModelMetadataRequest, ModelMetadataResponse>(
      "ModelMetadata", 1, false,
      now([this](const ModelMetadataRequest& request, ModelMetadataResponse* response) {
        auto md = server_.GetModelMetadata(request.name(), request.version());
        if (!md.ok()) return ToGrpcStatus(md.status());
        response->set_name(md->name);
        for (const auto& v : md->versions) response->add_versions(v);
        response->set_platform(md->platform);
        for (const auto& t : md->inputs) FillTensorMetadata(t, response->add_inputs());
        for (const auto& t : md->outputs) FillTensorMetadata(t, response->add_outputs());
        return grpc::Status::OK;
      }));
  AddUnary<ModelConfigRequest, ModelConfigResponse>(
      "ModelConfig", 1, false,
      now([this](const ModelConfigRequest& request, ModelConfigResponse* response) {
        auto config = server_.GetModelConfig(request.name(), request.version());
        if (!config.ok()) return ToGrpcStatus(config.status());
        *response->mutable_config() = std::move(config).value();
        return grpc::Status::OK;
      }));
  AddUnary<ModelStatisticsRequest, ModelStatisticsResponse>(
      "ModelStatistics", 1, false,
      now([this](const ModelStatisticsRequest& request, ModelStatisticsResponse* response) {
        auto stats = server_.GetModelStatistics(request.name(), request.version());
        if (!stats.ok()) return ToGrpcStatus(stats.status());
        for (const auto& s : *stats) FillStatistics(s, response->add_model_stats());
        return grpc::Status::OK;
      }));
  AddUnary<RepositoryIndexRequest, RepositoryIndexResponse>(
      "RepositoryIndex", 1, false,
      now([this](const RepositoryIndexRequest& request, RepositoryIndexResponse* response) {
        // repository_name: Triton answers for all of its repositories whatever the name,
        // and so does fastpath (its repositories are served as one).
        // A folder's name can be any bytes, and a reason can quote it; protobuf's strings
        // must be UTF-8, or the client cannot read the whole answer.
        for (const auto& e : server_.RepositoryIndex(request.ready())) {
          auto* m = response->add_models();
          m->set_name(ToValidUtf8(e.name));
          m->set_version(e.version);
          m->set_state(server::ModelStateName(e.state));
          m->set_reason(ToValidUtf8(e.reason));
        }
        return grpc::Status::OK;
      }));
  // A few ModelInfer calls wait on each queue, so that a burst finds them requested.
  AddUnary<ModelInferRequest, ModelInferResponse>("ModelInfer", 8, true,
                                                  [this](auto& call) { ModelInfer(call); });
  AddUnary<RepositoryModelLoadRequest, RepositoryModelLoadResponse>(
      "RepositoryModelLoad", 1, false,
      [this](auto& call) { RepositoryControl(call, /*load=*/true); });
  AddUnary<RepositoryModelUnloadRequest, RepositoryModelUnloadResponse>(
      "RepositoryModelUnload", 1, false,
      [this](auto& call) { RepositoryControl(call, /*load=*/false); });
  AddExtensionsItLacks();
}

// The RPCs of Triton's extensions that fastpath does not implement, answered as
// protocol/request_policy.h says (and as the HTTP front end answers).
void GrpcInferenceServiceImpl::AddExtensionsItLacks() {
  using namespace inference;  // NOLINT(google-build-using-namespace): the message names
  using protocol::SharedMemory;
  // No region is ever registered: a status lists none, or names the region it lacks.
  auto status = [](SharedMemory kind) {
    return [kind](auto& call) {
      call.Finish(Guarded([&] {
        const std::string& name = call.request().name();
        return name.empty()
                   ? grpc::Status::OK
                   : ToGrpcStatus(protocol::SharedMemoryRegionNotFound(kind, ToValidUtf8(name)));
      }));
    };
  };
  auto unregister = [](auto& call) { call.Finish(grpc::Status::OK); };
  auto refuse = [](Status refusal) {
    return [refusal = std::move(refusal)](auto& call) {
      call.Finish(Guarded([&] { return ToGrpcStatus(refusal); }));
    };
  };
  AddUnary<SystemSharedMemoryStatusRequest, SystemSharedMemoryStatusResponse>(
      "SystemSharedMemoryStatus", 1, false, status(SharedMemory::kSystem));
  AddUnary<SystemSharedMemoryRegisterRequest, SystemSharedMemoryRegisterResponse>(
      "SystemSharedMemoryRegister", 1, false,
      refuse(protocol::SharedMemoryRegisterRefused(SharedMemory::kSystem)));
  AddUnary<SystemSharedMemoryUnregisterRequest, SystemSharedMemoryUnregisterResponse>(
      "SystemSharedMemoryUnregister", 1, false, unregister);
  AddUnary<CudaSharedMemoryStatusRequest, CudaSharedMemoryStatusResponse>(
      "CudaSharedMemoryStatus", 1, false, status(SharedMemory::kCuda));
  AddUnary<CudaSharedMemoryRegisterRequest, CudaSharedMemoryRegisterResponse>(
      "CudaSharedMemoryRegister", 1, false,
      refuse(protocol::SharedMemoryRegisterRefused(SharedMemory::kCuda)));
  AddUnary<CudaSharedMemoryUnregisterRequest, CudaSharedMemoryUnregisterResponse>(
      "CudaSharedMemoryUnregister", 1, false, unregister);
  AddUnary<TraceSettingRequest, TraceSettingResponse>(
      "TraceSetting", 1, false, refuse(protocol::SettingsRefused(protocol::Settings::kTrace)));
  AddUnary<LogSettingsRequest, LogSettingsResponse>(
      "LogSettings", 1, false, refuse(protocol::SettingsRefused(protocol::Settings::kLog)));
}

void GrpcInferenceServiceImpl::RequestCalls(grpc_internal::Queues* queues) {
  for (size_t q = 0; q < queues->size(); ++q) {
    for (const auto& first : first_calls_) first(queues, queues->at(q));
    for (int i = 0; i < 2; ++i) {
      grpc_internal::StreamInferCall::RequestOn(&stream_shared_, queues, queues->at(q));
    }
  }
}

void GrpcInferenceServiceImpl::ModelInfer(
    Call<inference::ModelInferRequest, inference::ModelInferResponse>& call) {
  inference::ModelInferRequest& request = call.request();
  StatusOr<InferRequest> parsed = Internal("request not parsed");
  RequestEcho echo;
  const grpc::Status net = Guarded([&] {
    echo = {request.model_name(), request.model_version(), request.id()};
    // The call owns its request and nothing reads it after this handler: moving the raw
    // input bytes out of it saves a copy of every input.
    parsed = grpc_internal::ParseModelInferRequest(request, max_message_bytes_);
    return grpc::Status::OK;
  });
  if (!net.ok()) {
    call.Finish(net);
    return;
  }
  if (!parsed.ok()) {
    call.Finish(ToGrpcStatus(parsed.status()));
    return;
  }
  parsed->deadline = grpc_internal::SteadyDeadline(call.context().deadline());
  parsed->cancelled = call.cancelled();
  // A queue's thread: the scheduler may run a short model on it when an instance is
  // idle, which spares the call two thread hand-offs (streams keep reading instead). Not
  // while other calls wait on this thread: they would wait for the run, and queued behind
  // the instance's run instead they are batched.
  parsed->caller_may_run_model = !grpc_internal::WorkWaiting();
  // The call stays valid until its Finish has completed, so the callback may use it from
  // any thread, even before InferAsync returns. The answer is made and sent on the call's
  // queue thread: an instance's worker that answers a batch hands each answer over and goes
  // back to its model, rather than filling the responses and sending them itself (gRPC's
  // batch and the socket write, which on loopback also runs the client's receive).
  server_.InferAsync(std::move(parsed).value(), [&call, echo = std::move(echo)](
                                                    StatusOr<InferResponse> result) mutable {
    call.RunOnItsThread([&call, echo = std::move(echo), result = std::move(result)]() mutable {
      call.Finish(Guarded([&] {
        if (!result.ok()) return ToGrpcStatus(result.status());
        return ToGrpcStatus(grpc_internal::FillModelInferResponse(std::move(result).value(), echo,
                                                                  call.response()));
      }));
    });
  });
}

template <typename Request, typename Response>
void GrpcInferenceServiceImpl::RepositoryControl(Call<Request, Response>& call, bool load) {
  const Request& request = call.request();
  if (request.model_name().empty()) {
    call.Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "model_name is empty"));
    return;
  }
  // What a load or unload may ask is decided below both front ends (tritonclient always
  // sends unload_dependents, which an unload accepts).
  const Parameters parameters = RepositoryParameters(request.parameters());
  bool unload_dependents = false;
  LoadOverride override;
  if (Status s =
          load ? protocol::CheckLoadParameters(parameters, protocol::FileEncoding::kRaw, &override)
               : protocol::CheckUnloadParameters(parameters, &unload_dependents);
      !s.ok()) {
    call.Finish(ToGrpcStatus(s));
    return;
  }
  // The facade's control pool runs it, off this thread.
  auto answer = [&call](Status s) { call.Finish(ToGrpcStatus(s)); };
  if (load) {
    server_.LoadModelAsync(request.model_name(), std::move(override), std::move(answer));
  } else {
    server_.UnloadModelAsync(request.model_name(), unload_dependents, std::move(answer));
  }
}

}  // namespace fastpath::frontend
