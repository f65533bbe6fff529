#include <algorithm>
#include <cmath>
#include <set>
#include <system_error>

#include "fastpath/admission/memory_budget.h"
#include "fastpath/admission/self_test.h"
#include "fastpath/common/log.h"
#include "fastpath/common/thread_start.h"
#include "fastpath/common/utf8.h"
#include "fastpath/config/ensemble_config.h"
#include "fastpath/config/model_config.h"
#include "fastpath/scheduler/dynamic_batch_scheduler.h"
#include "fastpath/server/server_impl.h"

namespace fastpath::server {

namespace {

constexpr const char* kStarting =
    "the server is starting: its start-up models are still loading (GET /v2/health/ready "
    "answers 200 once they have)";

// A client's version as the repository names it. Triton reads the string as an integer, so
// "01" is version 1; one that is not a non-negative integer is refused as Triton refuses it
// (HTTP's path already takes digits only).
StatusOr<std::string> CanonicalVersion(const std::string& version) {
  if (version.empty()) return version;
  if (version.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument("model version '" + ToValidUtf8(version) +
                           "' is not a version number: a version is an integer, e.g. '1'");
  }
  const size_t first = version.find_first_not_of('0');
  return first == std::string::npos ? std::string("0") : version.substr(first);
}

std::vector<TensorMetadata> Describe(const inference::ModelConfig& config, bool inputs) {
  std::vector<TensorMetadata> out;
  // A scalar shows as the scalar it is ([] or [-1]); requests may still send Triton's [1].
  auto add = [&](const auto& entry) {
    const auto& dims = config::IsScalarReshape(entry) ? entry.reshape().shape() : entry.dims();
    out.push_back({entry.name(), config::FromConfigDataType(entry.data_type()),
                   config::ProtocolShape(config, dims)});
  };
  if (inputs) {
    for (const auto& in : config.input()) add(in);
  } else {
    for (const auto& o : config.output()) add(o);
  }
  return out;
}

// A request that could never fit its instance's memory cap, even split in halves by the
// scheduler's retry, is refused before it runs (issue 13): PayloadTooLarge, HTTP 413.
Status CheckMemoryEstimate(const repository::ModelVersion& version,
                           const std::vector<Tensor>& inputs, uint64_t batch_rows) {
  const repository::ModelVersion::MemoryEstimate& e = *version.memory_estimate;
  const uint64_t elements = admission::InputElements(inputs);
  // A BYTES element's cost is its string's length, which no per-element figure from the
  // warm-up's strings bounds: each byte of them counts besides.
  uint64_t strings = 0;
  for (const Tensor& t : inputs) {
    if (t.dtype == DataType::kBytes) strings += t.data.size();
  }
  // The retry runs rows / 2 and the rest: the larger half holds ceil(rows / 2) of them.
  const uint64_t half_rows = (batch_rows + 1) / 2;
  const double share =
      batch_rows >= 2 ? static_cast<double>(half_rows) / static_cast<double>(batch_rows) : 1.0;
  const auto part = [share](double amount) {
    return static_cast<uint64_t>(std::ceil(amount * share));
  };
  const uint64_t need = e.at_rest_bytes +
                        part(e.bytes_per_input_element * static_cast<double>(elements)) +
                        part(static_cast<double>(strings));
  if (need <= e.limit_bytes) return Status::Ok();
  return PayloadTooLarge(
      "out of memory: model '" + version.model_name + "' version " +
      std::to_string(version.version) + " would need about " + admission::FormatBytes(need) +
      " for " +
      (batch_rows >= 2 ? "the larger half (" + std::to_string(half_rows) + " of " +
                             std::to_string(batch_rows) + " rows) of this request's "
                       : "this request's ") +
      std::to_string(elements) + " input elements (" + admission::FormatBytes(e.at_rest_bytes) +
      " held at rest and " +
      std::to_string(static_cast<uint64_t>(std::ceil(e.bytes_per_input_element))) +
      " bytes per input element, measured at load" +
      (strings > 0 ? ", and " + admission::FormatBytes(strings) + " of BYTES strings" : "") +
      "), more than the instance's memory limit of " +
      admission::FormatBytes(e.limit_bytes) +
      " (parameters: fastpath.memory.limit_bytes); it can never fit: send fewer or smaller "
      "inputs");
}

// The model sees `reshape` where the protocol shows `dims`.
Status ReshapeInputs(const inference::ModelConfig& config, std::vector<Tensor>* inputs) {
  for (auto& tensor : *inputs) {
    const inference::ModelInput* in = config::FindInput(config, tensor.name);
    if (in == nullptr || !in->has_reshape()) continue;
    FASTPATH_ASSIGN_OR_RETURN(tensor.shape, config::ReshapeForModel(config, *in, tensor.shape));
  }
  return Status::Ok();
}

// Triton's request parameters "priority" (level; 0 = the model's default) and "timeout"
// (microseconds in the queue; 0 = none), which the dynamic batcher honours.
Status ReadSchedulingParameters(const Parameters& parameters, scheduler::Job* job) {
  auto read = [&](const char* key, uint64_t* out) -> Status {
    auto it = parameters.find(key);
    if (it == parameters.end()) return Status::Ok();
    const int64_t* value = std::get_if<int64_t>(&it->second);
    if (value == nullptr || *value < 0) {
      return InvalidArgument(std::string("request parameter '") + key +
                             "' must be a non-negative integer");
    }
    *out = static_cast<uint64_t>(*value);
    return Status::Ok();
  };
  uint64_t timeout_us = 0;
  FASTPATH_RETURN_IF_ERROR(read("priority", &job->priority));
  FASTPATH_RETURN_IF_ERROR(read("timeout", &timeout_us));
  job->timeout = scheduler::WaitOf(timeout_us);
  return Status::Ok();
}

}  // namespace

Server::Server(ServerOptions options, std::shared_ptr<backend::Backend> backend)
    : options_(std::move(options)),
      clock_(OrSteadyClock(options_.clock)),
      backend_(std::move(backend)) {}

StatusOr<std::unique_ptr<Server>> Server::Create(ServerOptions options,
                                                 std::shared_ptr<backend::Backend> backend) {
  FASTPATH_ASSIGN_OR_RETURN(std::unique_ptr<Server> server,
                            Open(std::move(options), std::move(backend)));
  FASTPATH_RETURN_IF_ERROR(server->LoadStartupModels());
  server->EndStartup();
  return server;
}

StatusOr<std::unique_ptr<Server>> Server::Open(ServerOptions options,
                                               std::shared_ptr<backend::Backend> backend) {
  std::error_code ec;
  if (options.repository.roots.empty()) return InvalidArgument("no model repository");
  for (const auto& root : options.repository.roots) {
    if (!std::filesystem::is_directory(root, ec)) {
      return NotFound("model repository " + root.string() + " is not a directory");
    }
    // One the server may not list (a volume's owner or mode) would serve, READY, nothing.
    if (std::filesystem::directory_iterator(root, ec); ec) {
      return FailedPrecondition("model repository " + root.string() +
                                " cannot be listed: " + ec.message());
    }
  }
  if (!backend) return InvalidArgument("no backend");
  std::unique_ptr<Server> server;
  try {
    server.reset(new Server(std::move(options), std::move(backend)));
  } catch (const std::system_error& e) {
    return ThreadLimitReached(e, "the model-control thread");
  }
  // Every loaded version passes admission (the start-up self-test) before it is READY.
  server->options_.repository.admit = [raw = server.get()](const std::filesystem::path& dir,
                                                           repository::ModelVersion& version) {
    return raw->Admit(dir, version);
  };
  // After an out-of-memory run an instance answers one seeded request of one row, shaped
  // as the scheduler gives requests to it, before it serves again.
  server->options_.repository.recovery_probe =
      [max_elements = server->options_.max_tensor_elements](
          const std::filesystem::path& model_dir,
          const inference::ModelConfig& config) -> StatusOr<scheduler::RecoveryProbe> {
    FASTPATH_ASSIGN_OR_RETURN(InferRequest request,
                              admission::MakeSeededRequest(config, model_dir, 1, /*seed=*/0));
    FASTPATH_RETURN_IF_ERROR(config::ValidateInferInputs(config, request.inputs, max_elements));
    FASTPATH_RETURN_IF_ERROR(ReshapeInputs(config, &request.inputs));
    scheduler::RecoveryProbe probe;
    probe.inputs = std::move(request.inputs);
    for (const auto& out : config.output()) probe.output_names.push_back(out.name());
    return probe;
  };
  const admission::Policy& policy = server->options_.policy;
  server->options_.repository.clock = server->clock_;
  server->options_.repository.allow_cpu_fallback_for_gpu =
      policy.profile == admission::Profile::kDev && policy.allow_cpu_fallback;
  // Production refuses TensorRT engines built under another key; dev rebuilds them.
  server->options_.repository.trt_engine_cache.rebuild_stale =
      policy.profile == admission::Profile::kDev;
  // Ensemble steps take the same path as a client's request (lookup, validation, the
  // step model's scheduler), minus the admission: they belong to an admitted request. The
  // lookup is made once per ensemble request, when it is accepted (BindStep).
  server->repository_ = std::make_unique<repository::ModelRepository>(
      server->options_.repository, server->backend_.get(),
      [raw = server.get()](const std::string& model, const std::string& version) {
        return raw->BindStep(model, version);
      });
  // The server's own threads start before any model: under a thread limit (a pod's pids
  // limit) the models that do not fit fail, each named, and the server serves the others.
  Server* raw = server.get();
  server->memory_watch_ = std::make_unique<MemoryWatch>(
      [raw] { return raw->ServingVersions(); }, server->clock_,
      server->options_.memory_sample_interval, server->options_.leak_detector);
  FASTPATH_RETURN_IF_ERROR(server->memory_watch_->Start());
  if (server->options_.gpu_source) {
    server->gpu_watch_ = std::make_unique<GpuWatch>(
        server->options_.gpu_source, server->clock_, server->options_.gpu_sample_interval,
        server->options_.gpu_ignored_xids);
    FASTPATH_RETURN_IF_ERROR(server->gpu_watch_->Start());
  }
  server->drift_watch_ = std::make_unique<DriftWatch>(
      [raw] {
        std::vector<DriftWatch::Watched> watched;
        for (auto& version : raw->ServingVersions()) {
          std::vector<int> gpus = raw->GpusOf(*version);
          watched.push_back({std::move(version), std::move(gpus)});
        }
        return watched;
      },
      [raw] {
        return raw->gpu_watch_ ? raw->gpu_watch_->Statuses() : std::vector<gpu::GpuStatus>();
      },
      server->clock_, server->options_.drift,
      server->options_.drift_sample_interval.value_or(
          DriftWatch::IntervalFor(server->options_.drift.window)));
  FASTPATH_RETURN_IF_ERROR(server->drift_watch_->Start());
  server->canary_thread_ =
      std::make_unique<Periodic>(server->clock_, server->options_.canary_tick, [raw] {
        raw->RunCanaries();
        raw->WatchRollouts();
      });
  FASTPATH_RETURN_IF_ERROR(server->canary_thread_->Start("the canary thread"));
  return server;
}

Status Server::LoadStartupModels() {
  FASTPATH_RETURN_IF_ERROR(repository_->LoadStartupModels(options_.startup_models));
  // The first observation is each version's start: its baseline counts from here.
  drift_watch_->SampleNow();
  return Status::Ok();
}

void Server::EndStartup() {
  std::lock_guard lock(inflight_mu_);
  starting_ = false;
}

Server::~Server() {
  Shutdown(std::chrono::milliseconds(0));
  if (gpu_watch_abandoned_) {
    // Its thread may still return from the read and use it: kept for the process's life.
    static auto* const parked = new std::vector<std::unique_ptr<GpuWatch>>();
    static std::mutex parked_mu;
    std::lock_guard lock(parked_mu);
    parked->push_back(std::move(gpu_watch_));
  }
}

std::vector<std::shared_ptr<repository::ModelVersion>> Server::ServingVersions() const {
  std::vector<std::shared_ptr<repository::ModelVersion>> versions;
  for (const RepositoryEntry& entry : repository_->Index(/*ready_only=*/true)) {
    auto runtime = repository_->FindReady(entry.name, entry.version);
    if (runtime.ok()) versions.push_back(std::move(runtime).value());
  }
  return versions;
}

std::vector<int> Server::GpusOf(const repository::ModelVersion& version) const {
  std::set<int> gpus(version.gpus.begin(), version.gpus.end());
  // Ensembles nest (a step may be an ensemble); the repository refuses cycles, and the
  // depth bound keeps a walk finite whatever it meets.
  std::vector<std::pair<const inference::ModelConfig*, int>> pending;
  std::vector<std::shared_ptr<repository::ModelVersion>> held;  // keeps the configs alive
  if (config::IsEnsemble(version.config)) pending.emplace_back(&version.config, 0);
  while (!pending.empty()) {
    const auto [config, depth] = pending.back();
    pending.pop_back();
    if (depth >= 16) continue;
    for (const auto& step : config->ensemble_scheduling().step()) {
      auto found = repository_->FindReady(
          step.model_name(), step.model_version() < 0 ? "" : std::to_string(step.model_version()));
      if (!found.ok()) continue;  // a missing step makes the ensemble unavailable anyway
      gpus.insert((*found)->gpus.begin(), (*found)->gpus.end());
      if (config::IsEnsemble((*found)->config)) pending.emplace_back(&(*found)->config, depth + 1);
      held.push_back(std::move(found).value());
    }
  }
  return {gpus.begin(), gpus.end()};
}

Status Server::CheckGpusHealthy(const repository::ModelVersion& version) const {
  if (!gpu_watch_ || !gpu_watch_->AnyQuarantined()) return Status::Ok();
  const int gpu = gpu_watch_->FirstQuarantined(GpusOf(version));
  if (gpu < 0) return Status::Ok();
  return Unavailable("model '" + version.model_name + "' version " +
                     std::to_string(version.version) + " runs on GPU " + std::to_string(gpu) +
                     ", which is quarantined: " + gpu_watch_->Quarantined(gpu) +
                     "; send this request to another server");
}

bool Server::IsLive() const { return true; }

bool Server::IsReady() const {
  if (shutting_down_ || starting_) return false;
  // A GPU in quarantine announces hardware that is failing: no request should be sent here.
  if (gpu_watch_ && gpu_watch_->AnyQuarantined()) return false;
  return !options_.strict_readiness || repository_->AllReady();
}

ServerMetadata Server::Metadata() const {
  return {"fastpath",
          FASTPATH_VERSION,
          // Only what is implemented: clients decide what to call from this list. Triton's
          // names: schedule_policy is the priority and timeout parameters, and
          // model_repository(unload_dependents) the unload parameter.
          {"binary_tensor_data", "model_repository", "model_repository(unload_dependents)",
           "model_configuration", "schedule_policy", "statistics", "parameters"}};
}

StatusOr<ModelMetadata> Server::GetModelMetadata(const std::string& name,
                                                 const std::string& asked) const {
  FASTPATH_ASSIGN_OR_RETURN(const std::string version, CanonicalVersion(asked));
  FASTPATH_ASSIGN_OR_RETURN(auto runtime, repository_->FindReady(name, version));
  ModelMetadata meta;
  meta.name = name;
  for (const auto& v : repository_->ReadyVersions(name)) {
    meta.versions.push_back(std::to_string(v->version));
  }
  meta.platform = runtime->config.platform();
  meta.inputs = Describe(runtime->config, true);
  meta.outputs = Describe(runtime->config, false);
  return meta;
}

StatusOr<bool> Server::IsModelReady(const std::string& name, const std::string& asked) const {
  FASTPATH_ASSIGN_OR_RETURN(const std::string version, CanonicalVersion(asked));
  if (shutting_down_ || starting_) return false;
  if (gpu_watch_ && gpu_watch_->AnyQuarantined()) {
    auto runtime = repository_->FindReady(name, version);
    if (runtime.ok() && !CheckGpusHealthy(**runtime).ok()) return false;
  }
  return repository_->IsReady(name, version);
}

StatusOr<inference::ModelConfig> Server::GetModelConfig(const std::string& name,
                                                        const std::string& asked) const {
  FASTPATH_ASSIGN_OR_RETURN(const std::string version, CanonicalVersion(asked));
  FASTPATH_ASSIGN_OR_RETURN(auto runtime, repository_->FindReady(name, version));
  return runtime->config;
}

StatusOr<std::vector<ModelStatistics>> Server::GetModelStatistics(const std::string& name,
                                                                  const std::string& asked) const {
  FASTPATH_ASSIGN_OR_RETURN(const std::string version, CanonicalVersion(asked));
  if (!name.empty()) {
    // Distinguish an unknown model or version (404) from one that is not ready.
    FASTPATH_ASSIGN_OR_RETURN(auto found, repository_->FindReady(name, version));
    (void)found;
  }
  std::vector<ModelStatistics> out;
  std::set<const repository::ModelVersion*> counted;
  for (const auto& v : repository_->ReadyVersions(name)) {
    counted.insert(v.get());
    const std::string v_str = std::to_string(v->version);
    if (!version.empty() && v_str != version) continue;
    ModelStatistics stats = v->stats.Snapshot(v->model_name, v_str);
    if (v->scheduler) stats.pending_request_count = v->scheduler->Pending();
    out.push_back(std::move(stats));
  }
  // A canary phase's old load still serves most requests: they count under its version,
  // once (a version kept unchanged beside the new one is published as well).
  for (const repository::CanaryPhase& phase : repository_->Canaries()) {
    if (counted.count(phase.stable.get()) > 0) continue;
    const std::string v_str = std::to_string(phase.stable->version);
    if ((!name.empty() && phase.model != name) || (!version.empty() && v_str != version)) continue;
    ModelStatistics stats = phase.stable->stats.Snapshot(phase.model, v_str);
    stats.pending_request_count = phase.stable->scheduler->Pending();
    auto same = std::find_if(out.begin(), out.end(), [&](const ModelStatistics& s) {
      return s.name == phase.model && s.version == v_str;
    });
    if (same == out.end()) {
      out.push_back(std::move(stats));
    } else {
      Accumulate(*same, stats);
    }
  }
  return out;
}

std::vector<RepositoryEntry> Server::RepositoryIndex(bool ready_only) const {
  std::vector<RepositoryEntry> index = repository_->Index(ready_only);
  if (!gpu_watch_ || !gpu_watch_->AnyQuarantined()) return index;
  // Loaded, but refusing every request: as /v2/models/M/ready says, not READY.
  std::vector<RepositoryEntry> out;
  for (RepositoryEntry& entry : index) {
    if (entry.state == ModelState::kReady) {
      auto runtime = repository_->FindReady(entry.name, entry.version);
      if (runtime.ok()) {
        if (Status healthy = CheckGpusHealthy(**runtime); !healthy.ok()) {
          if (ready_only) continue;
          entry.state = ModelState::kUnavailable;
          entry.reason = healthy.message();
        }
      }
    }
    out.push_back(std::move(entry));
  }
  return out;
}

namespace {

// Loads and unloads are the explicit mode's; in the others the repository's folders decide.
Status CheckExplicitControl(repository::ControlMode mode) {
  if (mode == repository::ControlMode::kExplicit) return Status::Ok();
  return FailedPrecondition(
      std::string("explicit model load/unload is not allowed: the server runs with "
                  "--model-control-mode ") +
      (mode == repository::ControlMode::kPoll
           ? "poll, where the repository's folders decide what is loaded"
           : "none, where what was loaded at start stays loaded") +
      "; start it with --model-control-mode explicit");
}

}  // namespace

Status Server::LoadModel(const std::string& name, const LoadOverride& load) {
  FASTPATH_RETURN_IF_ERROR(CheckExplicitControl(repository_->options().mode));
  if (starting_) return Unavailable(kStarting);
  return repository_->Load(name, load);
}

Status Server::UnloadModel(const std::string& name, bool unload_dependents) {
  FASTPATH_RETURN_IF_ERROR(CheckExplicitControl(repository_->options().mode));
  if (starting_) return Unavailable(kStarting);
  return repository_->Unload(name, unload_dependents);
}

void Server::LoadModelAsync(const std::string& name, LoadOverride load, ControlCallback done) {
  control_.Submit(
      "loading model '" + name + "'",
      [this, name, load = std::make_shared<const LoadOverride>(std::move(load))] {
        return LoadModel(name, *load);
      },
      std::move(done));
}

void Server::UnloadModelAsync(const std::string& name, bool unload_dependents,
                              ControlCallback done) {
  control_.Submit(
      "unloading model '" + name + "'",
      [this, name, unload_dependents] { return UnloadModel(name, unload_dependents); },
      std::move(done));
}

void Server::Finish() {
  std::lock_guard lock(inflight_mu_);
  if (--inflight_ == 0) inflight_cv_.notify_all();
}

void Server::InferAsync(InferRequest request, InferCallback done) {
  {
    std::lock_guard lock(inflight_mu_);
    if (shutting_down_) {
      done(Unavailable("the server is shutting down"));
      return;
    }
    if (starting_) {
      done(Unavailable(kStarting));
      return;
    }
    ++inflight_;
  }
  RunOnModel(std::move(request), [this, done = std::move(done)](StatusOr<InferResponse> result) {
    done(std::move(result));
    Finish();
  });
}

void Server::RunOnModel(InferRequest request, InferCallback done, bool canary) {
  StatusOr<std::string> version = CanonicalVersion(request.model_version);
  if (!version.ok()) return done(version.status());
  request.model_version = std::move(version).value();
  // A canary probe checks what is published; a request may meet a canary phase's split.
  auto found = canary ? repository_->FindReady(request.model_name, request.model_version)
                      : repository_->Route(request.model_name, request.model_version);
  if (!found.ok()) return done(found.status());
  RunOnVersion(*found, std::move(request), std::move(done), canary);
}

StatusOr<scheduler::StepRunner> Server::BindStep(const std::string& model,
                                                 const std::string& version) {
  FASTPATH_ASSIGN_OR_RETURN(std::shared_ptr<repository::ModelVersion> runtime,
                            repository_->Route(model, version));
  std::shared_ptr<const scheduler::BoundSteps> steps;
  if (runtime->ensemble != nullptr) {
    FASTPATH_ASSIGN_OR_RETURN(steps, runtime->ensemble->BindSteps());
  }
  auto hold = std::make_shared<const repository::StepHold>(std::move(runtime));
  return scheduler::StepRunner([this, hold, steps](InferRequest request, InferCallback done) {
    // Within an ensemble a step's scalar output is its config's dims, as Triton passes it
    // on ([batch] becomes [batch, 1] for dims [1]): what the ensemble's load checked the
    // next step's input against. (Clients of the model itself get the scalar as it is.)
    auto as_dims = [hold, done = std::move(done)](StatusOr<InferResponse> answer) {
      if (answer.ok()) {
        const inference::ModelConfig& config = hold->version()->config;
        for (Tensor& tensor : answer->outputs) {
          const inference::ModelOutput* out = config::FindOutput(config, tensor.name);
          if (out == nullptr || !config::IsScalarReshape(*out)) continue;
          tensor.shape.insert(tensor.shape.end(), out->dims().begin(), out->dims().end());
        }
      }
      done(std::move(answer));
    };
    RunOnVersion(hold->version(), std::move(request), std::move(as_dims), /*canary=*/false, steps);
  });
}

void Server::RunOnVersion(const std::shared_ptr<repository::ModelVersion>& runtime,
                          InferRequest request, InferCallback done, bool canary,
                          std::shared_ptr<const scheduler::BoundSteps> bound_steps) {
  auto fail = [&](const Status& status) { done(status); };
  const inference::ModelConfig& config = runtime->config;
  // A request the model's config refuses counts as a failure of that model.
  auto reject = [&](const Status& status, FailureReason reason = FailureReason::kOther) {
    if (!canary) runtime->stats.RecordFailure(0, reason);
    fail(status);
  };
  // Refused before it reaches the model, as a full queue refuses it.
  if (Status s = CheckGpusHealthy(*runtime); !s.ok()) return reject(s, FailureReason::kRejected);

  if (Status s = config::ValidateInferInputs(config, request.inputs, options_.max_tensor_elements);
      !s.ok()) {
    return reject(s);
  }
  scheduler::Job job;
  if (request.outputs.empty()) {
    for (const auto& out : config.output()) job.output_names.push_back(out.name());
  } else {
    for (const auto& out : request.outputs) job.output_names.push_back(out.name);
    if (Status s = config::ValidateRequestedOutputs(config, job.output_names); !s.ok()) {
      return reject(s);
    }
  }
  if (Status s = ReshapeInputs(config, &request.inputs); !s.ok()) return reject(s);
  if (Status s = ReadSchedulingParameters(request.parameters, &job); !s.ok()) return reject(s);
  request.model_version = std::to_string(runtime->version);
  job.arrival = clock_->Now();
  // Validated above: every input of a batching model shares a batch dim >= 1.
  if (config.max_batch_size() > 0 && !request.inputs.empty() && !request.inputs[0].shape.empty()) {
    job.batch_size = static_cast<uint64_t>(request.inputs[0].shape[0]);
  }
  if (runtime->memory_estimate) {
    if (Status s = CheckMemoryEstimate(*runtime, request.inputs, job.batch_size); !s.ok()) {
      return reject(s);
    }
  }
  job.request = std::move(request);
  job.canary = canary;
  job.bound_steps = std::move(bound_steps);
  // The callback holds the version alive; it never runs its last release on a worker
  // while the repository still holds it (see ModelVersion's lifecycle in the repository).
  job.done = [runtime, done = std::move(done)](StatusOr<InferResponse> result) {
    done(std::move(result));
  };
  runtime->scheduler->Enqueue(std::move(job));
}

Server::DrainResult Server::Shutdown(std::chrono::milliseconds grace) {
  DrainResult result;
  {
    std::lock_guard lock(inflight_mu_);
    shutting_down_ = true;
  }
  if (memory_watch_) memory_watch_->Stop();
  if (canary_thread_) canary_thread_->Stop();
  if (drift_watch_) drift_watch_->Stop();
  // A read NVML never returns from keeps the watch's thread, but not the drain below.
  if (gpu_watch_ && !gpu_watch_abandoned_ && !gpu_watch_->Stop(std::chrono::seconds(2))) {
    gpu_watch_abandoned_ = true;
    log::Warn(
        "GPU telemetry: a read has not returned for 2 s at shutdown; its thread is left "
        "to it and the shutdown goes on");
  }
  // No load or unload starts from now on: queued ones are answered Unavailable at once, so
  // a draining server does not begin building a model it is about to drop.
  control_.Close();
  {
    std::unique_lock lock(inflight_mu_);
    inflight_cv_.wait_for(lock, grace, [&] { return inflight_ == 0; });
    result.outlived = inflight_;
  }
  if (result.outlived > 0) {
    // An ensemble request whose first step has started is in progress: its next steps still
    // run (StopAll stops the ensembles first, which drain them on their steps' models).
    result.refused = repository_->FailQueued(
        Unavailable("the server is shutting down, and the request had not started when the "
                    "grace period ended (--grace-period-secs); it never ran"));
  }
  // A load or unload already running finishes (its caller is answered).
  control_.Stop();
  // Stopping the schedulers drains what they still hold (the runs in progress), so every
  // request accepted gets an answer before the process exits.
  repository_->StopAll();
  return result;
}

}  // namespace fastpath::server
