// server::Server, the concrete InferenceServer: a model repository on a backend, with
// request validation, statistics and a drain-on-shutdown lifecycle. Only the CLI
// constructs it; the front ends see the InferenceServer interface.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fastpath/admission/accuracy_guard.h"
#include "fastpath/admission/memory_budget.h"
#include "fastpath/admission/self_test.h"
#include "fastpath/backend/backend.h"
#include "fastpath/repository/model_repository.h"
#include "fastpath/server/control_pool.h"
#include "fastpath/server/drift_watch.h"
#include "fastpath/server/gpu_watch.h"
#include "fastpath/server/memory_watch.h"
#include "fastpath/server/server.h"

namespace fastpath::server {

struct ServerOptions {
  repository::RepositoryOptions repository;
  std::vector<std::string> startup_models;  // explicit mode: models to load at start ("*" = all)
  // Readiness requires every loaded model to be READY (Triton's --strict-readiness).
  bool strict_readiness = true;
  // Largest tensor accepted, in elements; checked before anything is allocated.
  int64_t max_tensor_elements = int64_t{1} << 31;
  // The one clock of the server, its schedulers and the admission self-test (null:
  // SteadyClock(); tests inject one). Must outlive the server.
  Clock* clock = nullptr;
  // Admission (issue 4 §5, §6): the profile every loaded version is admitted under, and
  // what Admission() shows beside the models.
  admission::Policy policy;
  std::string capability_snapshot_json;  // gpu::SnapshotToJson, taken by the caller
  // The memory of each device instances may use, by MemoryStats::device name ("cpu",
  // "gpu0", ...), for the memory budget's device check; a device not listed is unchecked.
  std::map<std::string, uint64_t> device_memory_bytes;
  // Measure the memory budget of every model (fastpath budget). Otherwise only of a model
  // that asks for it with parameters fastpath.memory.limit_bytes or fastpath.memory.margin:
  // the measured request is random data at max_batch_size, which a model whose work depends
  // on its input values (Range, loops) may take long over.
  bool measure_all_memory_budgets = false;
  // The memory watch (memory_watch.h): how often every instance's arena is sampled (0: never,
  // but SampleMemory() still samples), and the leak detector's window and thresholds.
  std::chrono::milliseconds memory_sample_interval{10000};
  admission::LeakDetectorOptions leak_detector;
  // GPU telemetry (gpu_watch.h): where samples come from (null: none, as on a machine
  // without NVML), how often (0: only SampleGpus()), and the XIDs that never quarantine.
  std::shared_ptr<gpu::GpuSource> gpu_source;
  std::chrono::milliseconds gpu_sample_interval{1000};
  std::set<uint64_t> gpu_ignored_xids = gpu::DefaultIgnoredXids();
  // The drift watch (drift_watch.h): its window and threshold, and how often it observes
  // (nullopt: window / 30, from 100 ms to 60 s; 0: never, but SampleDrift() still
  // observes). With `drift_degrades` a version that drifts shows DEGRADED in Admission()
  // (readiness stays up).
  admission::DriftOptions drift;
  std::optional<std::chrono::milliseconds> drift_sample_interval;
  // How often the canary thread looks for canaries that are due (each model's own
  // fastpath.canary.interval_s decides when it runs) and watches the rollouts' canary
  // phases; 0: never, but RunCanaries() and WatchRollouts() still do.
  std::chrono::milliseconds canary_tick{1000};
  bool drift_degrades = false;
  std::string version_lock;              // the lock file the node was admitted under
  std::vector<std::string> version_lock_pinned;
};

class Server final : public InferenceServer {
 public:
  // Open, LoadStartupModels, EndStartup: a bad model is logged and marked UNAVAILABLE; it
  // does not fail Create. Fails for an unusable repository root, or a thread that cannot
  // start. `backend` is shared with the repository and kept alive by the server.
  static StatusOr<std::unique_ptr<Server>> Create(ServerOptions options,
                                                  std::shared_ptr<backend::Backend> backend);
  // `serve` takes the steps one by one, its front ends started before the models load:
  // under a thread limit (a pod's pids limit) the models that do not fit fail, each named,
  // not the server's own threads. Until EndStartup, readiness is false and inference and
  // model control are answered UNAVAILABLE.
  static StatusOr<std::unique_ptr<Server>> Open(ServerOptions options,
                                                std::shared_ptr<backend::Backend> backend);
  Status LoadStartupModels();
  void EndStartup();
  ~Server() override;

  // One pass of the memory watch now (tests move a manual clock, then call it).
  void SampleMemory() { memory_watch_->SampleNow(); }
  // Sends every canary that is due now (server_canary.cc); tests move a manual clock first.
  void RunCanaries();
  // Watches the rollouts' canary phases (server_rollout_canary.cc): records each one that
  // began, and ends each one that regressed or whose time is up. On the canary thread;
  // tests move a manual clock first.
  void WatchRollouts();
  // One pass of the drift watch now.
  void SampleDrift() { drift_watch_->SampleNow(); }
  // One pass of the GPU watch now; nothing without a GPU source.
  void SampleGpus() {
    if (gpu_watch_) gpu_watch_->SampleNow();
  }
  // The GPU watch's check for a pass of reads that hangs, now.
  void CheckGpusHung() {
    if (gpu_watch_) gpu_watch_->CheckHungNow();
  }

  bool IsLive() const override;
  bool IsReady() const override;
  admission::AdmissionReport Admission() const override;
  ServerMetadata Metadata() const override;
  StatusOr<ModelMetadata> GetModelMetadata(const std::string& name,
                                           const std::string& version) const override;
  StatusOr<bool> IsModelReady(const std::string& name, const std::string& version) const override;
  StatusOr<inference::ModelConfig> GetModelConfig(const std::string& name,
                                                  const std::string& version) const override;
  StatusOr<std::vector<ModelStatistics>> GetModelStatistics(
      const std::string& name, const std::string& version) const override;
  std::vector<RepositoryEntry> RepositoryIndex(bool ready_only) const override;
  StatusOr<std::vector<RolloutDecision>> RolloutHistory(const std::string& name) const override;
  void LoadModelAsync(const std::string& name, LoadOverride load, ControlCallback done) override;
  void UnloadModelAsync(const std::string& name, bool unload_dependents,
                        ControlCallback done) override;
  // The same, blocking the caller (what the pool runs).
  Status LoadModel(const std::string& name, const LoadOverride& load = {});
  Status UnloadModel(const std::string& name, bool unload_dependents = false);
  void InferAsync(InferRequest request, InferCallback done) override;

  // What a shutdown's drain left when its grace period ended.
  struct DrainResult {
    size_t outlived = 0;  // requests still in flight (0 when everything drained)
    // Jobs queued then, answered UNAVAILABLE: requests not started, and the steps that
    // ensembles in flight had queued (so it may differ from `outlived`).
    size_t refused = 0;
  };
  // Refuses new requests from now on (readiness turns false), waits up to `grace` for the
  // requests in flight, refuses queued model-control operations and waits for the running
  // ones. Requests that have not started when the grace period ends are answered
  // UNAVAILABLE (retryable elsewhere), so that the process ends within about the grace
  // period plus the runs in progress, and not minutes later under a deep queue (killed by
  // Kubernetes, with every answer lost). Then stops every model, the runs in progress
  // answered first.
  DrainResult Shutdown(std::chrono::milliseconds grace);

 private:
  Server(ServerOptions options, std::shared_ptr<backend::Backend> backend);
  void Finish();  // one request left the server
  // The READY versions, each held: what the memory and drift watches observe.
  std::vector<std::shared_ptr<repository::ModelVersion>> ServingVersions() const;
  // The GPUs `version` computes on, ascending: its own (ModelVersion::gpus) or, for an
  // ensemble, its steps' as they are now (steps are looked up per request), nested
  // ensembles included.
  std::vector<int> GpusOf(const repository::ModelVersion& version) const;
  // Unavailable, naming the GPU and why, when `version` computes on a quarantined GPU.
  Status CheckGpusHealthy(const repository::ModelVersion& version) const;
  // Admission (server_admission.cc): the repository's hook. Runs the version's start-up
  // self-test through its scheduler and judges it under the profile.
  Status Admit(const std::filesystem::path& model_dir, repository::ModelVersion& version);
  struct AdmissionRecord;
  // The memory budget (admission/memory_budget.h): the measured request through the version,
  // the arenas' statistics before and after. Sets record->memory_budget (or its note) and
  // version.memory_estimate; returns the reason the budget does not fit, empty when it does.
  StatusOr<std::string> MeasureMemory(const std::filesystem::path& model_dir,
                                      repository::ModelVersion& version, AdmissionRecord* record);
  // A request's job on `version`, as a client's request reaches the scheduler: validated
  // against its config and reshaped (done and arrival unset).
  StatusOr<scheduler::Job> PrepareJob(const repository::ModelVersion& version,
                                      InferRequest request) const;
  // Enqueues `job` on the version's scheduler and waits for its answer; `outputs`, when
  // given, receives the response's outputs.
  Status RunJob(repository::ModelVersion& version, scheduler::Job job,
                std::vector<Tensor>* outputs);
  // Validates and runs one request on a version that is not published yet; `outputs`, when
  // given, receives the response's outputs (the config's, in its order).
  Status RunBlocking(repository::ModelVersion& version, InferRequest request,
                     std::vector<Tensor>* outputs = nullptr);
  // Runs `hold` with one of the version's instances held (scheduler::Job::hold), queued at
  // the highest priority and counted apart from user traffic, and returns its status (or
  // the queue's: full, past `deadline`, stopped).
  Status HoldInstance(repository::ModelVersion& version, Clock::time_point deadline,
                      std::function<Status(backend::ModelInstance&)> hold);
  // Runs the config's model_warmup on every instance of the version, as Triton warms each
  // (through the scheduler, only whichever instance was free ran them, and the others paid
  // the first run's cost, a GPU's initialisation included, on a client's request). Adds the
  // runs to `runs`; an error names the sample and run that failed.
  Status WarmEachInstance(repository::ModelVersion& version,
                          const std::vector<admission::WarmupStep>& warmups, uint32_t* runs);
  // The rollout gate (server_gate.cc, admission/rollout_gate.h): `candidate`, admitted
  // otherwise, against the READY version it would take traffic from, on the canaries'
  // seeded requests in alternation. OK publishes it; an error (refused, or the comparison
  // could not run) is the reason it is refused. Every decision goes to the history.
  Status GateRollout(const std::filesystem::path& model_dir, repository::ModelVersion& candidate,
                     const admission::GatePolicy& policy);
  void RecordRollout(RolloutDecision decision);
  // The FP16 accuracy guard (admission/accuracy_guard.h): the plan's warm-up requests through
  // the version and through its FP32 reference on the CPU provider. Empty: they agree within
  // the tolerance; otherwise the miss (worst element, index, both values, tolerance).
  StatusOr<std::string> CheckAccuracy(const std::filesystem::path& model_dir,
                                      repository::ModelVersion& version,
                                      const admission::AccuracyGuard& guard,
                                      const admission::SelfTestPlan& plan);
  // Validates and runs one request on its model, without the admission and in-flight
  // accounting of InferAsync: also the canaries' path (`canary`: counted apart from user
  // traffic in the statistics).
  void RunOnModel(InferRequest request, InferCallback done, bool canary = false);
  // RunOnModel past the lookup: on `runtime`; an ensemble step's with the steps it bound
  // for `runtime` when `runtime` is an ensemble (scheduler::Job::bound_steps).
  void RunOnVersion(const std::shared_ptr<repository::ModelVersion>& runtime, InferRequest request,
                    InferCallback done, bool canary,
                    std::shared_ptr<const scheduler::BoundSteps> bound_steps = nullptr);
  // The step binder of ensembles (scheduler::StepBinder): the step's version as a client's
  // request finds it, held (repository::StepHold) by the runner returned, which runs steps
  // on it as RunOnVersion does. A step that is an ensemble has its own steps bound now too.
  StatusOr<scheduler::StepRunner> BindStep(const std::string& model, const std::string& version);
  // The canary of a version being admitted (fastpath.canary.interval_s): its seeded request
  // run a few times, after the self-test, for the reference outputs and latency. Sets
  // record->canary; a canary that cannot be made (no seeded request, outputs that differ
  // between runs of the same input, an ensemble) is logged and the version serves without.
  void SetUpCanary(const std::filesystem::path& model_dir, repository::ModelVersion& version,
                   AdmissionRecord* record);
  // What the canaries of READY versions have shown (server_canary.cc).
  std::optional<admission::CanaryStatus> CanaryOf(const std::string& model, int64_t version) const;

  ServerOptions options_;
  Clock* clock_;  // OrSteadyClock(options_.clock)
  std::shared_ptr<backend::Backend> backend_;
  std::unique_ptr<repository::ModelRepository> repository_;
  // Load and unload, for both front ends: one worker (the repository runs one load or
  // unload at a time anyway), at most 16 waiting. Declared after repository_: stopped
  // before it goes.
  ControlPool control_{1, 16};
  // Samples the READY versions' arenas; stopped first in Shutdown.
  std::unique_ptr<MemoryWatch> memory_watch_;
  // Samples the GPUs when there is a source; stopped first in Shutdown.
  std::unique_ptr<GpuWatch> gpu_watch_;
  // Shutdown left the GPU watch's thread in a read that hangs: the watch is never destroyed.
  bool gpu_watch_abandoned_ = false;
  // Observes the READY versions' statistics for drift; stopped first in Shutdown. Declared
  // after the GPU watch, whose statuses it reads.
  std::unique_ptr<DriftWatch> drift_watch_;

  std::atomic<bool> shutting_down_{false};
  std::atomic<bool> starting_{true};  // until LoadStartupModels; written under inflight_mu_
  std::mutex inflight_mu_;
  std::condition_variable inflight_cv_;
  size_t inflight_ = 0;  // guarded by inflight_mu_

  // What Admit decided for each version, keyed by (model, version). `runtime` identifies
  // the admitted version (never dereferenced): a record is shown only for that runtime.
  // Refused ones are kept apart, shown while the repository still shows their reason.
  struct AdmissionRecord {
    const repository::ModelVersion* runtime = nullptr;
    std::optional<admission::SelfTestReport> self_test;
    std::vector<std::string> degradations;  // dev profile: why it serves DEGRADED
    std::string refused;                    // the reason it was refused; empty if admitted
    std::string placement_json;             // the instances' placement audits
    std::optional<admission::MemoryBudget> memory_budget;  // measured at load
    std::string memory_budget_note;  // why it was not measured, when it was not
    // The canary's reference, taken at admission; null without one.
    struct Canary {
      std::chrono::seconds interval{0};
      InferRequest request;          // the seeded request, as a client would send it
      std::vector<Tensor> outputs;   // what it answered at admission
      double reference_ms = 0;
    };
    std::shared_ptr<const Canary> canary;
  };
  StatusOr<std::shared_ptr<const AdmissionRecord::Canary>> MakeCanary(
      const std::filesystem::path& model_dir, repository::ModelVersion& version,
      std::chrono::seconds interval);
  mutable std::mutex admission_mu_;
  std::map<std::pair<std::string, int64_t>, AdmissionRecord> admission_records_;  // guarded
  std::map<std::pair<std::string, int64_t>, AdmissionRecord> refused_records_;    // guarded
  // The record an admitted reload replaced: its load may come back (a canary's rollback).
  std::map<std::pair<std::string, int64_t>, AdmissionRecord> replaced_records_;  // guarded

  // The canaries of READY versions, keyed by (model, version): what they have shown.
  struct CanaryRuns {
    std::weak_ptr<repository::ModelVersion> runtime;  // which load these runs are of
    Clock::time_point next_due;
    bool in_flight = false;
    Clock::time_point sent_at;  // of the run in flight
    int stuck_failures = 0;     // failures counted for the run in flight, one per kStuckAfter
    admission::CanaryStatus status;
    std::deque<double> recent_ms;  // the last 5 runs' latencies
    bool last_clean = true;        // the last run matched and answered
  };
  mutable std::mutex canary_mu_;
  std::map<std::pair<std::string, int64_t>, CanaryRuns> canary_runs_;  // guarded
  std::unique_ptr<Periodic> canary_thread_;  // stopped first in Shutdown

  // The rollout gate's decisions by model, oldest first, at most kRolloutHistory each.
  static constexpr size_t kRolloutHistory = 32;
  mutable std::mutex rollout_mu_;
  std::map<std::string, std::deque<RolloutDecision>> rollouts_;  // guarded by rollout_mu_
  // Every decision since start, by (model, outcome name): never capped, for /metrics.
  std::map<std::pair<std::string, std::string>, uint64_t> rollout_counts_;  // guarded
  // The canary phases being watched, by candidate load (what ends one without a verdict
  // needs to say).
  struct PhaseWatch {
    std::weak_ptr<repository::ModelVersion> candidate;  // which load the key is
    std::string model;
    int64_t candidate_version = 0, baseline_version = 0;
  };
  std::mutex phases_mu_;                                          // held by each WatchRollouts pass
  std::map<const repository::ModelVersion*, PhaseWatch> phases_;  // guarded by phases_mu_
};

}  // namespace fastpath::server
