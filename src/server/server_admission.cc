// Admission in the server (issue 4 §5, §6): the repository's hook that runs each loaded
// version's start-up self-test through the version's own scheduler before it is published,
// and the report behind GET /v2/health/admission.
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <system_error>

#include "fastpath/common/log.h"
#include "fastpath/common/thread_start.h"
#include "fastpath/common/utf8.h"
#include "fastpath/config/model_config.h"
#include "fastpath/server/server_impl.h"

namespace fastpath::server {
namespace {

std::string Join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

// The placement audits of a version's instances (issue 4 §3) for the admission report,
// with each instance's live count of staged (IO-bound) runs and its memory (issue 13): the
// arena now and, with `watch`, the leak and fragmentation verdicts.
std::string PlacementJson(const repository::ModelVersion& version, const MemoryWatch* watch) {
  const std::vector<backend::PlacementAudit>& audits = version.placements;
  if (audits.empty()) return "";
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  // Valid UTF-8 whatever the text quotes (a directory's name, a runtime's message).
  auto str = [&](const std::string& text) {
    const std::string valid = ToValidUtf8(text);
    w.String(valid.c_str(), static_cast<rapidjson::SizeType>(valid.size()), true);
  };
  w.StartObject();
  w.Key("instances");
  w.StartArray();
  for (size_t i = 0; i < audits.size(); ++i) {
    const backend::PlacementAudit& audit = audits[i];
    w.StartObject();
    const std::optional<uint64_t> staged_runs = i < version.audited_instances.size()
                                                    ? version.audited_instances[i]->staged_runs()
                                                    : std::nullopt;
    w.Key("staged");
    w.Bool(staged_runs.has_value());
    w.Key("staged_runs");
    w.Uint64(staged_runs.value_or(0));
    // The instance's memory arena now (issue 13): null when the backend cannot tell.
    const std::optional<backend::MemoryStats> memory =
        i < version.audited_instances.size() ? version.audited_instances[i]->memory_stats()
                                             : std::nullopt;
    w.Key("memory");
    if (!memory) {
      w.Null();
    } else {
      w.StartObject();
      w.Key("in_use_bytes");
      w.Uint64(memory->in_use_bytes);
      w.Key("reserved_bytes");
      w.Uint64(memory->reserved_bytes);
      w.Key("peak_bytes");
      w.Uint64(memory->peak_bytes);
      w.Key("limit_bytes");
      if (memory->limit_bytes) {
        w.Uint64(*memory->limit_bytes);
      } else {
        w.Null();
      }
      w.Key("arena_extensions");
      w.Uint64(memory->arena_extensions);
      w.Key("arena_shrinkages");
      w.Uint64(memory->arena_shrinkages);
      w.Key("out_of_memory_runs");
      w.Uint64(memory->out_of_memory_runs);
      // What the arena holds beyond its live tensors, as a share of all it holds.
      w.Key("fragmentation_ratio");
      w.Double(admission::FragmentationRatio(*memory));
      const std::optional<admission::LeakVerdict> leak =
          watch != nullptr ? watch->Verdict(version.model_name, version.version, i)
                           : std::nullopt;
      w.Key("leak");
      if (!leak) {
        w.Null();
      } else {
        w.StartObject();
        w.Key("suspected");
        w.Bool(leak->suspected);
        w.Key("slope_bytes_per_second");
        w.Double(leak->slope_bytes_per_second);
        w.Key("growth_bytes");
        w.Uint64(leak->growth_bytes);
        w.Key("reason");
        str(leak->reason);
        w.EndObject();
      }
      const std::optional<admission::FragmentationVerdict> fragmentation =
          watch != nullptr ? watch->Fragmentation(version.model_name, version.version, i)
                           : std::nullopt;
      w.Key("fragmentation");
      if (!fragmentation) {
        w.Null();
      } else {
        w.StartObject();
        w.Key("suspected");
        w.Bool(fragmentation->suspected);
        w.Key("free_bytes");
        w.Uint64(fragmentation->free_bytes);
        w.Key("largest_run_bytes");
        w.Uint64(fragmentation->largest_run_bytes);
        w.Key("extensions_in_window");
        w.Uint64(fragmentation->extensions_in_window);
        w.Key("reason");
        str(fragmentation->reason);
        w.EndObject();
      }
      w.EndObject();
    }
    w.Key("summary");
    str(backend::PlacementSummary(audit));
    w.Key("total_nodes");
    w.Int(audit.total_nodes);
    w.Key("providers");
    w.StartArray();
    for (const backend::ProviderPlacement& p : audit.providers) {
      w.StartObject();
      w.Key("provider");
      str(p.provider);
      w.Key("nodes");
      w.Int(p.nodes);
      w.Key("compute_nodes");
      w.Int(p.compute_nodes);
      w.Key("op_types");
      w.StartObject();
      for (const auto& [op, count] : p.op_types) {
        w.Key(op.c_str(), static_cast<rapidjson::SizeType>(op.size()));
        w.Int(count);
      }
      w.EndObject();
      w.EndObject();
    }
    w.EndArray();
    w.Key("allowed_cpu_ops");
    w.StartArray();
    for (const std::string& op : audit.allowed_cpu_ops) str(op);
    w.EndArray();
    w.Key("degraded_reason");
    str(audit.degraded_reason);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace

StatusOr<scheduler::Job> Server::PrepareJob(const repository::ModelVersion& version,
                                            InferRequest request) const {
  // The same steps as a client's request after the lookup (RunOnModel): validation against
  // the config, then reshape, so the self-test times the path requests take and not a
  // shortcut around it.
  const inference::ModelConfig& config = version.config;
  FASTPATH_RETURN_IF_ERROR(
      config::ValidateInferInputs(config, request.inputs, options_.max_tensor_elements));
  scheduler::Job job;
  for (const auto& out : config.output()) job.output_names.push_back(out.name());
  for (auto& tensor : request.inputs) {
    const inference::ModelInput* in = config::FindInput(config, tensor.name);
    if (in == nullptr || !in->has_reshape()) continue;
    FASTPATH_ASSIGN_OR_RETURN(tensor.shape, config::ReshapeForModel(config, *in, tensor.shape));
  }
  request.model_version = std::to_string(version.version);
  if (config.max_batch_size() > 0 && !request.inputs.empty() && !request.inputs[0].shape.empty()) {
    job.batch_size = static_cast<uint64_t>(request.inputs[0].shape[0]);
  }
  job.request = std::move(request);
  return job;
}

Status Server::RunJob(repository::ModelVersion& version, scheduler::Job job,
                      std::vector<Tensor>* outputs) {
  job.arrival = clock_->Now();
  std::promise<Status> answered;
  std::future<Status> result = answered.get_future();
  job.done = [&answered, outputs](StatusOr<InferResponse> response) {
    if (outputs != nullptr && response.ok()) *outputs = std::move(response->outputs);
    answered.set_value(response.status());
  };
  version.scheduler->Enqueue(std::move(job));
  return result.get();
}

Status Server::RunBlocking(repository::ModelVersion& version, InferRequest request,
                           std::vector<Tensor>* outputs) {
  FASTPATH_ASSIGN_OR_RETURN(scheduler::Job job, PrepareJob(version, std::move(request)));
  return RunJob(version, std::move(job), outputs);
}

Status Server::HoldInstance(repository::ModelVersion& version, Clock::time_point deadline,
                            std::function<Status(backend::ModelInstance&)> hold) {
  scheduler::Job job;
  job.request.model_name = version.model_name;
  job.request.model_version = std::to_string(version.version);
  job.request.deadline = deadline;
  job.hold = std::move(hold);
  // Not user traffic, and at the highest priority level: user traffic at a higher level
  // than the default must not starve a comparison that holds the repository's load lock.
  job.canary = true;
  job.priority = 1;
  return RunJob(version, std::move(job), nullptr);
}

Status Server::WarmEachInstance(repository::ModelVersion& version,
                                const std::vector<admission::WarmupStep>& warmups, uint32_t* runs) {
  // Validated and reshaped once, as a client's requests are.
  std::vector<std::pair<const admission::WarmupStep*, scheduler::Job>> jobs;
  for (const admission::WarmupStep& step : warmups) {
    FASTPATH_ASSIGN_OR_RETURN(scheduler::Job job, PrepareJob(version, step.request));
    jobs.emplace_back(&step, std::move(job));
  }
  // One hold per instance. Each waits until all are held, so that each holds an instance
  // of its own; past kMeet (an instance out of service, never free) the ones held go on,
  // and the rest take whichever instance comes free after them.
  constexpr auto kMeet = std::chrono::seconds(10);
  const size_t n = std::max<size_t>(version.instance_count, 1);
  std::mutex mu;
  std::condition_variable all_held;
  size_t held = 0;
  std::atomic<uint32_t> ran{0};
  auto warm = [&](backend::ModelInstance& instance) -> Status {
    {
      std::unique_lock lock(mu);
      ++held;
      all_held.notify_all();
      all_held.wait_for(lock, kMeet, [&] { return held >= n; });
    }
    for (const auto& [step, job] : jobs) {
      for (uint32_t i = 0; i < step->count; ++i) {
        auto outputs = instance.Run(job.request.inputs, job.output_names);
        // The checks a client's answer goes through (the scheduler's): as many outputs as
        // asked, each fitting the config's reshape. Without them a model whose outputs never
        // fit was admitted with several instances and failed every request.
        Status checked = outputs.status();
        if (checked.ok() && outputs->size() != job.output_names.size()) {
          checked =
              Internal("the model gave " + std::to_string(outputs->size()) + " outputs for the " +
                       std::to_string(job.output_names.size()) + " asked");
        }
        if (checked.ok()) checked = config::ReshapeOutputsForClient(version.config, &*outputs);
        if (!checked.ok()) {
          return Status(checked.code(), "warm-up '" + step->name + "' run " +
                                            std::to_string(i + 1) + " of " +
                                            std::to_string(step->count) +
                                            " failed on an instance: " + checked.message());
        }
        ++ran;
      }
    }
    return Status::Ok();
  };
  std::vector<std::future<Status>> holds;
  Status first = Status::Ok();
  try {
    for (size_t i = 0; i < n; ++i) {
      holds.push_back(std::async(std::launch::async, [&] {
        return HoldInstance(version, Clock::time_point::max(), warm);
      }));
    }
  } catch (const std::system_error& e) {
    first = ThreadLimitReached(e);  // the holds started go on once kMeet has passed
  }
  for (auto& hold : holds) {
    Status s = hold.get();
    if (first.ok() && !s.ok()) first = std::move(s);
  }
  *runs += ran.load();
  return first;
}

StatusOr<std::string> Server::CheckAccuracy(const std::filesystem::path& model_dir,
                                            repository::ModelVersion& version,
                                            const admission::AccuracyGuard& guard,
                                            const admission::SelfTestPlan& plan) {
  std::vector<std::pair<std::string, const InferRequest*>> requests;
  for (const admission::WarmupStep& step : plan.warmups) {
    requests.emplace_back(step.name, &step.request);
  }
  if (plan.timed) requests.emplace_back("self-test", &*plan.timed);
  if (requests.empty()) {
    return FailedPrecondition(
        "it compares outputs on the self-test's warm-up inputs, and this model has none: "
        "declare a model_warmup or a fastpath.slo budget");
  }
  // The reference of record runs on ORT's CPU provider (one thread), whatever the model's
  // own providers: it checks the reduced-precision path, not the GPU.
  const std::filesystem::path file =
      model_dir / std::to_string(version.version) / guard.reference_model;
  auto reference = backend_->CreateInstance(file, backend::InstanceOptions{});
  if (!reference.ok()) {
    return reference.status().WithContext("the FP32 reference '" + guard.reference_model + "'");
  }
  const inference::ModelConfig& config = version.config;
  std::vector<std::string> names;
  for (const auto& out : config.output()) names.push_back(out.name());
  admission::OutputDeviation worst;
  std::string worst_step;
  for (const auto& [step, request] : requests) {
    std::vector<Tensor> outputs;
    FASTPATH_RETURN_IF_ERROR(RunBlocking(version, *request, &outputs));
    std::vector<Tensor> inputs = request->inputs;  // the model's shapes, as RunBlocking has them
    for (auto& tensor : inputs) {
      const inference::ModelInput* in = config::FindInput(config, tensor.name);
      if (in == nullptr || !in->has_reshape()) continue;
      FASTPATH_ASSIGN_OR_RETURN(tensor.shape, config::ReshapeForModel(config, *in, tensor.shape));
    }
    auto expected = (*reference)->Run(inputs, names);
    if (!expected.ok()) {
      return expected.status().WithContext("the FP32 reference '" + guard.reference_model + "'");
    }
    if (expected->size() != outputs.size()) {
      return Internal("the model gave " + std::to_string(outputs.size()) +
                      " outputs and its reference " + std::to_string(expected->size()));
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      FASTPATH_ASSIGN_OR_RETURN(auto deviation,
                                admission::WorstDeviation(outputs[i], (*expected)[i]));
      if (worst.index < 0 || deviation.difference > worst.difference) {
        worst = deviation;
        worst_step = step;
      }
    }
  }
  if (worst.difference <= guard.tolerance) return std::string();
  return admission::DescribeMiss(worst, guard) + " (warm-up '" + worst_step + "')";
}

StatusOr<std::string> Server::MeasureMemory(const std::filesystem::path& model_dir,
                                            repository::ModelVersion& version,
                                            AdmissionRecord* record) {
  FASTPATH_ASSIGN_OR_RETURN(const double margin, admission::MemoryMarginFor(version.config));
  const auto& parameters = version.config.parameters();
  if (!options_.measure_all_memory_budgets &&
      parameters.count(std::string(config::kMemoryLimitBytes)) == 0 &&
      parameters.count(admission::kMemoryMargin) == 0) {
    record->memory_budget_note =
        "not asked for: the model sets no parameters fastpath.memory.limit_bytes (`fastpath "
        "budget` measures every model)";
    return std::string();
  }
  std::vector<backend::MemoryStats> before;
  for (const backend::ModelInstance* instance : version.audited_instances) {
    const auto stats = instance->memory_stats();
    if (!stats) {
      record->memory_budget_note = "the backend does not report its instances' memory";
      return std::string();
    }
    before.push_back(*stats);
  }
  if (before.empty() || !version.scheduler) {
    record->memory_budget_note =
        "no instance of its own (an ensemble: its steps are measured as the models they are)";
    return std::string();
  }
  FASTPATH_ASSIGN_OR_RETURN(auto request, admission::MakeMemoryBudgetRequest(
                                              version.config, model_dir,
                                              &record->memory_budget_note));
  if (!request) return std::string();
  const uint64_t rows = version.config.max_batch_size() > 0
                            ? static_cast<uint64_t>(version.config.max_batch_size())
                            : 1;
  const Status ran = RunBlocking(version, *request);
  // The instance that ran it is the one whose peak (or count of runs out of memory) moved.
  size_t ran_on = 0;
  bool out_of_memory = ran.code() == StatusCode::kResourceExhausted;
  std::vector<backend::MemoryStats> after;
  for (size_t i = 0; i < version.audited_instances.size(); ++i) {
    after.push_back(version.audited_instances[i]->memory_stats().value_or(before[i]));
    if (after[i].out_of_memory_runs > before[i].out_of_memory_runs) out_of_memory = true;
    if (after[i].peak_bytes - before[i].peak_bytes >
        after[ran_on].peak_bytes - before[ran_on].peak_bytes) {
      ran_on = i;
    }
  }
  const std::optional<uint64_t> limit = after[ran_on].limit_bytes;
  if (!out_of_memory && !ran.ok()) {
    // Random data the model cannot take (an axis, a count): nothing measured, nothing judged.
    record->memory_budget_note = "the seeded request failed, so nothing was measured (declare a "
                                 "model_warmup with valid inputs): " + ran.message();
    return std::string();
  }
  // The accuracy guard's FP32 reference sits beside the model; no instance loads it.
  const auto guard = admission::ParseAccuracyGuard(version.config);
  const std::string reference = guard.ok() && guard->has_value() ? (*guard)->reference_model : "";
  admission::MemoryBudget budget = admission::ComputeMemoryBudget(
      before[ran_on], after[ran_on], *request, rows, margin,
      admission::FilesBytes(model_dir / std::to_string(version.version), reference));
  budget.ran_out_of_memory = out_of_memory;
  budget.instances = static_cast<uint32_t>(
      std::count_if(after.begin(), after.end(), [&](const backend::MemoryStats& stats) {
        return stats.device == budget.device;
      }));
  if (const auto total = options_.device_memory_bytes.find(budget.device);
      total != options_.device_memory_bytes.end()) {
    budget.device_total_bytes = total->second;
  }
  record->memory_budget = budget;
  if (out_of_memory) {
    // The scheduler's split retry may have saved the run; the batch itself does not fit.
    return "memory budget: the measured request at batch " + std::to_string(rows) +
           " ran out of memory" +
           (limit ? " under the instance's limit of " + admission::FormatBytes(*limit) : "") +
           (ran.ok() ? "" : ": " + ran.message()) +
           "; lower max_batch_size or raise parameters fastpath.memory.limit_bytes";
  }
  if (limit) {
    version.memory_estimate = repository::ModelVersion::MemoryEstimate{
        budget.at_rest_bytes, budget.bytes_per_input_element, *limit};
  }
  if (!budget.fits_limit()) {
    return "memory budget over the instance's limit: " + admission::DescribeBudget(budget) +
           "; lower max_batch_size or raise parameters fastpath.memory.limit_bytes";
  }
  if (!budget.fits_device()) {
    return "memory budget: the instances together do not fit the device: " +
           admission::DescribeBudget(budget) +
           "; lower the instance count or max_batch_size, or give the container more memory";
  }
  return std::string();
}

Status Server::Admit(const std::filesystem::path& model_dir, repository::ModelVersion& version) {
  const std::string what =
      "model '" + version.model_name + "' version " + std::to_string(version.version);
  AdmissionRecord record;
  record.runtime = &version;
  record.placement_json = PlacementJson(version, nullptr);
  // A GPU instance the placement policy would refuse serves only under --allow-cpu-fallback
  // (dev), and TensorRT engines built under another key are rebuilt only in dev; either is
  // labelled DEGRADED like a missed budget.
  // Said once for the instances that share it (a GPU group of several on one node).
  for (const backend::PlacementAudit& audit : version.placements) {
    if (audit.degraded_reason.empty()) continue;
    const std::string reason = "GPU fast path degraded (dev profile): " + audit.degraded_reason;
    if (std::find(record.degradations.begin(), record.degradations.end(), reason) !=
        record.degradations.end()) {
      continue;
    }
    record.degradations.push_back(reason);
    log::Warn("!!! " + what + " is DEGRADED: " + reason);
  }
  // A refused load is kept apart from the admitted one: a reload of the same version that
  // is refused leaves the previous load serving, with its figures and canary.
  // The admitted load it replaces is kept aside too: a canary phase's rollback brings it back.
  auto remember = [&](AdmissionRecord r) {
    std::lock_guard lock(admission_mu_);
    const std::pair<std::string, int64_t> key = {version.model_name, version.version};
    if (!r.refused.empty()) {
      refused_records_[key] = std::move(r);
      return;
    }
    if (auto it = admission_records_.find(key); it != admission_records_.end()) {
      replaced_records_[key] = std::move(it->second);
    }
    admission_records_[key] = std::move(r);
  };
  // A refusal is the model's (FailedPrecondition: the same files are refused again), unless
  // it may pass when tried again: a run out of memory, once memory frees (RESOURCE_EXHAUSTED),
  // or a busy serving version or the server shutting down (UNAVAILABLE).
  auto refuse = [&](const std::string& reason, StatusCode code = StatusCode::kFailedPrecondition) {
    record.refused = reason;
    record.runtime = nullptr;
    remember(record);
    const bool again = code == StatusCode::kResourceExhausted || code == StatusCode::kUnavailable;
    return Status(again ? code : StatusCode::kFailedPrecondition, reason);
  };
  // The rollout gate's settings are checked first: a typo must not cost a whole admission.
  auto gate = admission::RolloutGateFor(version.config);
  if (!gate.ok()) return refuse("rollout gate: " + gate.status().message());
  // Admitted: the rollout gate compares it with what serves, and then the canary's
  // reference is taken last, on a warm version.
  auto admitted = [&]() -> Status {
    if (gate->has_value() && version.scheduler) {
      if (Status gated = GateRollout(model_dir, version, **gate); !gated.ok()) {
        return refuse(gated.message(), gated.code());
      }
      // Let through: the repository gives it a share of the traffic first, when asked.
      version.canary_plan = {(*gate)->canary_percent,
                             std::chrono::seconds((*gate)->canary_duration_s)};
    }
    SetUpCanary(model_dir, version, &record);
    remember(record);
    return Status::Ok();
  };

  // Memory first: the measured request at max_batch_size sets the arenas' peak before any
  // other run does.
  auto memory = MeasureMemory(model_dir, version, &record);
  if (!memory.ok()) return refuse(memory.status().message());
  if (!memory->empty()) {
    if (options_.policy.profile == admission::Profile::kProduction) return refuse(*memory);
    record.degradations.push_back(*memory);
    log::Warn("!!! " + what + " is DEGRADED (dev profile serves it anyway): " + *memory);
  } else if (record.memory_budget) {
    log::Info(what + " memory: " + admission::DescribeBudget(*record.memory_budget));
  }

  auto budget = admission::ParseBudget(version.config);
  if (!budget.ok()) return refuse("self-test budget: " + budget.status().message());
  auto plan = admission::MakeSelfTestPlan(version.config, model_dir, *budget);
  if (!plan.ok()) return refuse("self-test: " + plan.status().message());
  // The FP16 accuracy guard, on the plan's seeded warm-up inputs, before they are timed.
  auto guard = admission::ParseAccuracyGuard(version.config);
  if (!guard.ok()) return refuse("accuracy guard: " + guard.status().message());
  if (guard->has_value() && version.scheduler) {
    auto miss = CheckAccuracy(model_dir, version, **guard, *plan);
    if (!miss.ok()) return refuse("accuracy guard: " + miss.status().message());
    if (!miss->empty()) {
      const std::string reason = "accuracy guard: outputs differ from the FP32 reference: " + *miss;
      if (options_.policy.profile == admission::Profile::kProduction) return refuse(reason);
      record.degradations.push_back(reason);
      log::Warn("!!! " + what + " is DEGRADED (dev profile serves it anyway): " + reason);
    } else {
      log::Info(what + " agrees with its FP32 reference '" + (*guard)->reference_model +
                "' within " + admission::FormatNumber((*guard)->tolerance));
    }
  }
  if (plan->empty() || !version.scheduler) return admitted();
  // With several instances the warm-up runs on each; the self-test then times the rest.
  admission::SelfTestPlan rest = *plan;
  uint32_t warmed = 0;
  if (version.instance_count > 1 && !plan->warmups.empty()) {
    if (Status s = WarmEachInstance(version, plan->warmups, &warmed); !s.ok()) {
      return refuse("self-test failed: " + s.message(), s.code());
    }
    rest.warmups.clear();
  }
  auto report = admission::RunSelfTest(
      rest, [&](const InferRequest& request) { return RunBlocking(version, request); }, *clock_);
  if (!report.ok()) {
    return refuse("self-test failed: " + report.status().message(), report.status().code());
  }
  report->warmup_runs += warmed;
  record.self_test = *report;
  if (report->passed()) {
    log::Info(what + " passed its start-up self-test: " + report->Summary());
    return admitted();
  }
  const std::string miss = "self-test missed its budget: " + Join(report->misses, "; ") +
                           " at batch " + std::to_string(report->figures->batch_size) + " over " +
                           std::to_string(report->figures->iterations) + " timed runs";
  if (options_.policy.profile == admission::Profile::kProduction) return refuse(miss);
  record.degradations.push_back(miss);
  log::Warn("!!! " + what + " is DEGRADED (dev profile serves it anyway): " + miss);
  return admitted();
}

admission::AdmissionReport Server::Admission() const {
  admission::AdmissionReport report;
  report.policy = options_.policy;
  report.live = IsLive();
  report.ready = IsReady();
  report.version_lock = options_.version_lock;
  report.pinned = options_.version_lock_pinned;
  report.snapshot_json = options_.capability_snapshot_json;
  // Each reason, and whether it makes the server not ready.
  const auto add_reason = [&](std::string reason, bool blocks_readiness) {
    if (blocks_readiness) report.unready_because.push_back(reason);
    report.reasons.push_back(std::move(reason));
  };
  if (shutting_down_) add_reason("the server is shutting down", true);
  if (gpu_watch_) {
    report.gpu_telemetry = gpu_watch_->source();
    report.gpus = gpu_watch_->Statuses();
    for (const gpu::GpuStatus& gpu : report.gpus) {
      if (gpu.quarantined.empty()) continue;
      add_reason("GPU " + std::to_string(gpu.gpu) +
                     (gpu.last.uuid.empty() ? "" : " (" + gpu.last.uuid + ")") +
                     " is quarantined: " + gpu.quarantined +
                     "; drain this node and reset or replace the GPU",
                 true);
    }
  }
  std::map<std::pair<std::string, int64_t>, AdmissionRecord> records, refused;
  {
    std::lock_guard lock(admission_mu_);
    records = admission_records_;
    refused = refused_records_;
  }
  for (const RepositoryEntry& entry : repository_->Index(/*ready_only=*/false)) {
    admission::ModelAdmission m;
    m.name = entry.name;
    m.version = entry.version;
    const AdmissionRecord* record = nullptr;
    int64_t version = -1;
    if (!entry.version.empty()) {
      version = std::stoll(entry.version);
      const auto& kept = entry.state == ModelState::kReady ? records : refused;
      auto it = kept.find({entry.name, version});
      if (it != kept.end()) record = &it->second;
    }
    std::shared_ptr<repository::ModelVersion> live;  // held while its counts are read
    if (entry.state == ModelState::kReady) {
      auto runtime = repository_->FindReady(entry.name, entry.version);
      if (record != nullptr && (!runtime.ok() || record->runtime != runtime->get()))
        record = nullptr;
      if (record != nullptr) live = *runtime;
      m.state = admission::AdmissionState::kReady;
      if (record != nullptr && !record->degradations.empty()) {
        m.state = admission::AdmissionState::kDegraded;
        m.reasons = record->degradations;
      }
      // Loaded, but refusing every request: it runs on a quarantined GPU.
      if (runtime.ok()) {
        if (Status healthy = CheckGpusHealthy(**runtime); !healthy.ok()) {
          m.state = admission::AdmissionState::kUnavailable;
          m.reasons.insert(m.reasons.begin(), healthy.message());
        }
      }
      // A refused reload (the rollout gate, a broken file) leaves this load serving.
      if (!entry.reason.empty()) m.reasons.push_back(entry.reason);
    } else {
      if (record != nullptr && record->refused != entry.reason) record = nullptr;
      m.state = admission::AdmissionState::kUnavailable;
      m.reasons.push_back(entry.reason.empty() ? ModelStateName(entry.state) : entry.reason);
      m.unloaded = entry.reason == kUnloadedReason;
      if (!m.unloaded) {
        add_reason("model '" + entry.name + "'" +
                       (entry.version.empty() ? "" : " version " + entry.version) +
                       " is not READY: " + m.reasons.front(),
                   options_.strict_readiness);
      }
    }
    if (record != nullptr) {
      m.self_test = record->self_test;
      m.memory_budget = record->memory_budget;
      m.memory_budget_note = record->memory_budget_note;
      // Built again for a READY version: its staged-run counts are live.
      m.placement_json = live ? PlacementJson(*live, memory_watch_.get()) : record->placement_json;
    }
    if (live) {
      for (size_t i = 0; i < live->audited_instances.size(); ++i) {
        m.instance_memory.push_back(live->audited_instances[i]->memory_stats());
        m.instance_leaks.push_back(memory_watch_ ? memory_watch_->Verdict(live->model_name,
                                                                          live->version, i)
                                                 : std::nullopt);
        m.instance_fragmentation.push_back(
            memory_watch_ ? memory_watch_->Fragmentation(live->model_name, live->version, i)
                          : std::nullopt);
      }
    }
    if (entry.state == ModelState::kReady && version >= 0) m.canary = CanaryOf(entry.name, version);
    if (entry.state == ModelState::kReady && drift_watch_ && version >= 0) {
      if (auto runtime = repository_->FindReady(entry.name, entry.version); runtime.ok()) {
        m.drift = drift_watch_->Verdict(**runtime);
      }
      if (options_.drift_degrades && m.drift && m.drift->alert) {
        m.state = admission::AdmissionState::kDegraded;
        m.reasons.push_back("throughput drift: " + m.drift->detail);
      }
    }
    report.models.push_back(std::move(m));
  }
  {
    std::lock_guard lock(rollout_mu_);
    for (const auto& [key, count] : rollout_counts_) {
      report.rollout_decisions.push_back({key.first, key.second, count});
    }
  }
  return report;
}

}  // namespace fastpath::server
