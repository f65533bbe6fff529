// The model repository: Triton's layout (<root>/<model>/config.pbtxt and numbered
// version folders holding model.onnx), loaded into runnable model versions.
//
// A model that cannot be loaded (missing file, corrupt ONNX, config that contradicts the
// model, name mismatch, ...) becomes UNAVAILABLE with the exact reason, which shows in the
// log and in the repository index; the other models keep serving.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fastpath/backend/backend.h"
#include "fastpath/common/clock.h"
#include "fastpath/common/load_override.h"
#include "fastpath/common/status.h"
#include "fastpath/config/model_config.h"
#include "fastpath/scheduler/ensemble_scheduler.h"
#include "fastpath/scheduler/instance_pool_scheduler.h"
#include "fastpath/scheduler/recovering_instance.h"
#include "fastpath/scheduler/scheduler.h"
#include "fastpath/server/server.h"
#include "model_config.pb.h"

namespace fastpath::repository {

enum class ControlMode { kNone, kExplicit, kPoll };
StatusOr<ControlMode> ParseControlMode(const std::string& text);  // "none" | "explicit" | "poll"
// Ok when `name` can be a model: a folder of the repository's root (not empty, ".", ".."
// or holding a '/') whose name is UTF-8, since model names go into JSON answers, Prometheus
// labels and protobuf strings. Otherwise InvalidArgument saying why.
Status CheckModelName(std::string_view name);

// A folder the repository wrote a load request's files into (LoadOverride::files); it is
// removed when the last state or version loaded from it goes, since an instance rebuilt
// after running out of memory reads its model file again. Defined in model_repository.cc.
class LoadFolder;

// One loaded, runnable version of a model. Shared by the repository and by the requests
// in flight on it, so that an unload or a reload never pulls it from under a request.
struct ModelVersion {
  ModelVersion() = default;
  ModelVersion(const ModelVersion&) = delete;
  ModelVersion& operator=(const ModelVersion&) = delete;
  // Stops the scheduler (draining accepted requests) before the recorder goes away.
  ~ModelVersion();

  std::string model_name;
  int64_t version = 0;
  inference::ModelConfig config;  // completed from the model file
  // Where each instance's nodes run (backend/placement.h), in instance creation order;
  // empty for an ensemble or a backend that does not audit. Unchanged after loading.
  std::vector<backend::PlacementAudit> placements;
  // The instances whose audits those are, in the same order; owned by `scheduler`, so
  // valid as long as this version. For live figures such as staged_runs().
  std::vector<const backend::ModelInstance*> audited_instances;
  size_t instance_count = 0;  // the model instances its scheduler runs; 0 for an ensemble
  // The GPUs (CUDA ordinals) its KIND_GPU instances compute on, ascending; empty for a model
  // on the CPU, an ensemble (its steps' are theirs), and a GPU instance whose every node fell
  // back to the CPU. What the GPU quarantine and the drift watch go by.
  std::vector<int> gpus;
  scheduler::StatsRecorder stats;
  std::unique_ptr<scheduler::Scheduler> scheduler;  // owns the model instances
  // `scheduler`, for an ensemble; null for any other model. An ensemble that is another's
  // step has its own steps bound with it (scheduler::EnsembleScheduler::BindSteps).
  const scheduler::EnsembleScheduler* ensemble = nullptr;
  // What a request costs one instance in memory, measured by admission (admission/
  // memory_budget.h) before the version is published and unchanged after; set only for
  // instances with a cap. A request estimated over the cap even when split in halves
  // could never fit, and is refused before it runs (HTTP 413).
  struct MemoryEstimate {
    uint64_t at_rest_bytes = 0;
    double bytes_per_input_element = 0;
    uint64_t limit_bytes = 0;
  };
  std::optional<MemoryEstimate> memory_estimate;
  // The canary phase its admission asked for (admission::GatePolicy): when this load is
  // published in place of a serving one, it first gets `percent` of the requests for
  // `duration` (see CanaryPhase). 0 percent: traffic moves at once. Read and cleared by the
  // repository when it publishes the load.
  struct CanaryPlan {
    uint32_t percent = 0;
    std::chrono::seconds duration{0};
  };
  CanaryPlan canary_plan;
  // The load request's files it was loaded from; null when from the repository's folder.
  std::shared_ptr<const LoadFolder> load_folder;
  // What of the model folder this load read (ModelRepository::VersionFingerprint), taken
  // before the read: a reload keeps it while the folder still shows that. Empty for what a
  // reload never keeps: an ensemble, a load request's own files or config.
  std::string files;
  // Its version folder (<model folder>/<version>); empty for an ensemble. Gone from disk,
  // the version is being removed: no rollout gate compares a candidate with it.
  std::filesystem::path folder;
  // Ensemble requests in flight that hold this version for a step of theirs (StepHold):
  // unloaded or replaced, it is not stopped while any does.
  std::atomic<int> ensemble_holds{0};
};

// Holds a version for one ensemble request's step (scheduler::StepBinder) while it lives.
class StepHold {
 public:
  explicit StepHold(std::shared_ptr<ModelVersion> version) : version_(std::move(version)) {
    version_->ensemble_holds.fetch_add(1, std::memory_order_relaxed);
  }
  ~StepHold() {
    // The count goes first, while this reference keeps the version alive. Until the
    // repository stops (StopAll), a retired version is kept until its count is 0 and stopped
    // after, so this is not its last reference. Past StopAll it may be; the version's
    // scheduler is stopped and its workers joined by then, so dropping it here, on whatever
    // thread answered the ensemble's last step, destroys no scheduler from its own worker.
    std::shared_ptr<ModelVersion> version = std::move(version_);
    version->ensemble_holds.fetch_sub(1, std::memory_order_release);
  }
  StepHold(const StepHold&) = delete;
  StepHold& operator=(const StepHold&) = delete;

  const std::shared_ptr<ModelVersion>& version() const { return version_; }

 private:
  std::shared_ptr<ModelVersion> version_;
};

// A canary phase (issue 12 §2): a new load published in place of the one that served gets
// `percent` of the requests that reached the old one (every (100 / percent)-th, not by
// chance), while the old one, kept running beside it, serves the rest. The server watches
// both and ends the phase (ModelRepository::EndCanary): promoted, the old load drains and
// goes; rolled back, the old one takes every request again and the new one goes.
struct CanaryPhase {
  std::string model;
  std::shared_ptr<ModelVersion> stable;     // what served before: the rest of the requests
  std::shared_ptr<ModelVersion> candidate;  // what is published: `percent` of them
  uint32_t percent = 0;
  Clock::time_point began;
  Clock::time_point ends;
  // Both sides' counts when the phase began, taken as it was published, so that what they
  // count since is the phase's from its first request. From then on each side also keeps its
  // latest latencies (StatsRecorder::KeepLatencies), kCanaryKeptLatencies between them in
  // proportion to the split, so that both cover the same stretch of time.
  ModelStatistics stable_start;
  ModelStatistics candidate_start;
};
inline constexpr size_t kCanaryKeptLatencies = 10000;

struct VersionStatus {
  int64_t version = 0;
  server::ModelState state = server::ModelState::kUnknown;
  std::string reason;
  StatusCode failure = StatusCode::kOk;   // the code of the load's failure, when it failed
  std::shared_ptr<ModelVersion> runtime;  // set only when READY
  // The serving load of a version that a reload found unchanged, taken into it as it is
  // (as Triton): nothing the reload does stops it.
  bool kept = false;
};

struct RepositoryOptions {
  // The repositories served as one, as Triton serves several --model-repository: a model
  // is a folder of any of them. A name with a folder in two is refused (UNAVAILABLE, saying
  // where), as Triton refuses a name that is not unique across its repositories.
  std::vector<std::filesystem::path> roots;
  ControlMode mode = ControlMode::kNone;
  size_t max_queue_size = 1024;  // per model version
  std::chrono::milliseconds poll_interval{15000};
  // Every scheduler's clock (null: SteadyClock()); must outlive the repository.
  Clock* clock = nullptr;
  // Admission (issue 4 §5, §6), run on every loaded version before it is published: an
  // error refuses the version (UNAVAILABLE with that reason), OK admits it (READY). Unset:
  // every loaded version is admitted. `model_dir` is <root>/<model> (warm-up data files).
  std::function<Status(const std::filesystem::path& model_dir, ModelVersion& version)> admit;
  // The dev profile's --allow-cpu-fallback, passed to every instance as
  // backend::InstanceOptions::allow_cpu_fallback_for_gpu. False in production.
  bool allow_cpu_fallback_for_gpu = false;
  // The TensorRT engine cache (onnxruntime/tensorrt/engine_cache.h): root, TensorRT version and
  // rebuild_stale, given to every instance with its model, version and the compute
  // capability of its GPU (compute_capabilities, by CUDA ordinal). Empty root: none.
  backend::EngineCacheOptions trt_engine_cache;
  std::map<int, std::string> compute_capabilities;
  // The cores the process can use (gpu::UsableCores: the affinity mask capped by the cgroup
  // quota); 0: unknown. A model that does not set intra_op_thread_count shares them among
  // its CPU instances (at least one thread each); GPU instances keep one.
  uint32_t usable_cpu_cores = 0;
  // Where a load request's files (LoadOverride::files) are written, each load in a folder
  // of its own; empty: the system's temporary folder ($TMPDIR, else /tmp).
  std::filesystem::path load_files_root;
  // Where the CPU instances of a model that sets no thread count run (serve's
  // --ort-thread-pool, config::ThreadPoolMode): pools of their own, or the backend's
  // process-wide pool, which the backend must then have been created with.
  config::ThreadPoolMode thread_pool = config::ThreadPoolMode::kPerSession;
  // The small request an instance answers after it runs out of memory, before it serves
  // again (scheduler/recovering_instance.h), made once per loaded version from its
  // completed config. Unset, or an error (a shape nothing makes concrete): instances are
  // trusted after an out-of-memory run, and rebuilt never.
  std::function<StatusOr<scheduler::RecoveryProbe>(const std::filesystem::path& model_dir,
                                                   const inference::ModelConfig& config)>
      recovery_probe;
};

class ModelRepository {
 public:
  static constexpr std::chrono::seconds kRetireGrace{1};

  // `backend` must outlive the repository. `step_binder` binds the steps of ensembles
  // (platform "ensemble") through the server facade; without one an ensemble still loads
  // and validates, but its requests fail with FailedPrecondition.
  ModelRepository(RepositoryOptions options, backend::Backend* backend,
                  scheduler::StepBinder step_binder = {});
  ~ModelRepository();  // stops polling and every scheduler (draining)

  const RepositoryOptions& options() const { return options_; }

  // Loads what the mode says at start-up: every model folder for none/poll, only
  // `explicit_models` ("*" = all) for explicit. Starts the poll thread in poll mode, before
  // the loads (its first poll after them). A model that fails to load is logged; the error
  // is the poll thread's (the thread limit).
  Status LoadStartupModels(const std::vector<std::string>& explicit_models);
  // Loads (or reloads) one model from disk. OK when at least one version is READY,
  // otherwise the reason. A reload loads, warms and admits the new versions beside the
  // serving ones, then swaps them in atomically; the old ones drain. What serves is never
  // given up for what failed: a version that fails to reload keeps its previous load
  // serving (and so does the whole model when nothing new is READY, or its config fails),
  // with the failure as the reason in the index and the error returned. A folder that
  // changes while it is read is not published; the next poll reads it again.
  // An ensemble first loads the step models that are not loaded yet (as Triton does in
  // explicit mode). Loading any model re-validates the loaded ensembles that use it.
  // `load`, a load request's parameters (Triton's): its config is used instead of
  // config.pbtxt, and its files, when it has any, instead of the repository's folder, which
  // then need not exist; a later load without them reads the repository again. A config
  // that does not parse, or files that cannot be written, are refused before anything
  // changes (InvalidArgument, Internal); the rest fails as a load from disk does.
  // A load that fails is InvalidArgument, as Triton's, unless it may pass when tried again
  // (LoadFailureCode); a model without a folder is NotFound.
  Status Load(const std::string& name, const LoadOverride& load = {});
  // Stops serving the model; requests already accepted are answered first. Ensembles
  // that use it are re-validated, and so become UNAVAILABLE with the reason. A model with
  // a folder that is not loaded is OK, as Triton answers; one without is NotFound (and a name
  // with a slash InvalidArgument). With
  // `unload_dependents` (Triton's model_repository(unload_dependents)), the step models an
  // ensemble's load brought in go too, unless the user loaded them or a loaded model
  // still uses them.
  Status Unload(const std::string& name, bool unload_dependents = false);
  // Rescans the roots: loads new or changed models, unloads removed ones.
  void Poll();
  // Stops every scheduler, draining what was accepted. Lookups fail afterwards.
  void StopAll();
  // Scheduler::FailQueued on every version's scheduler (retiring ones and a canary's stable
  // load too); returns how many jobs were answered.
  size_t FailQueued(const Status& why);

  // `version` empty: the highest READY version. NotFound for an unknown model or
  // version, Unavailable when it exists but is not READY (with the reason).
  StatusOr<std::shared_ptr<ModelVersion>> FindReady(const std::string& name,
                                                    const std::string& version) const;
  // FindReady for a request, which a canary phase may send to the load it replaced: what
  // inference and the steps of ensembles go through. Lookups for metadata, configuration,
  // statistics and the canary probes see only what is published (FindReady).
  StatusOr<std::shared_ptr<ModelVersion>> Route(const std::string& name,
                                                const std::string& version) const;
  // The canary phases in progress (model_repository_canary.cc).
  std::vector<CanaryPhase> Canaries() const;
  // Ends the canary phase of `candidate` (as Canaries() gave it). Promoted: the old load is
  // retired (draining). Rolled back: the old load takes every request again, the new one is
  // retired, and `why` becomes the version's reason in the index (it stays READY when the
  // old load is of the same version number). NotFound when that phase is over already (a
  // later load or an unload ended it).
  Status EndCanary(const std::string& name, const ModelVersion* candidate, bool promote,
                   const std::string& why);
  // Readiness of one version (or of the model: any version READY). NotFound if unknown.
  StatusOr<bool> IsReady(const std::string& name, const std::string& version) const;
  // Every READY version of `name` (all models when empty).
  std::vector<std::shared_ptr<ModelVersion>> ReadyVersions(const std::string& name) const;
  // One entry per version (and one per model that failed before any version),
  // including the model folders that are present but not loaded (explicit mode).
  std::vector<server::RepositoryEntry> Index(bool ready_only) const;
  // True when every model that was asked to load has every selected version READY.
  bool AllReady() const;

 private:
  struct ModelState {
    std::string reason;  // model-level failure (config, versions); empty otherwise
    StatusCode failure = StatusCode::kOk;  // the code of that failure
    std::filesystem::path dir;  // where its files were read: <root>/<model> or `folder`'s
    std::shared_ptr<const LoadFolder> folder;  // a load request's files; null: the repository's
    std::vector<VersionStatus> versions;
    std::string fingerprint;  // what was on disk when it was loaded (poll mode)
    // Why the last reload was not published while this state kept serving; empty when it was.
    std::string reload_failure;
    std::vector<std::string> step_models;  // an ensemble's step models (its dependencies)
    // Loaded only because an ensemble's load needed it (explicit mode), never on its own.
    bool loaded_as_step = false;
    // The config as read and its versions selected; unset when the model failed before
    // (an unreadable config, no version folder). An ensemble is re-validated from it.
    std::optional<inference::ModelConfig> config;
    config::ParseDetails parse_details;
    bool overridden = false;  // its config came with a load request, not from the folder
    // The canary phase in progress; null when none. Its stable load is in no `versions`
    // entry (so neither the index nor the watches see it), only here.
    struct Canary {
      CanaryPhase phase;
      mutable std::atomic<uint64_t> routed{0};  // requests split so far
    };
    std::shared_ptr<Canary> canary;
  };

  // The code a failed load answers with. As Triton (INVALID_ARG, HTTP 400): the same
  // files fail the same way again, so a client that retries on UNAVAILABLE must not retry
  // them for ever. A failure that may pass by itself keeps its own code: a folder written
  // while it was read, the server shutting down (UNAVAILABLE), memory (RESOURCE_EXHAUSTED).
  static StatusCode LoadFailureCode(const ModelState& fresh);
  // Whether a step model that is not ready now may be once tried again (LoadFailureCode, or
  // loaded with every instance out of service); false for a broken file.
  bool StepMayRecover(const std::string& model) const;
  // The lookup of FindReady, with mu_ held.
  static StatusOr<std::shared_ptr<ModelVersion>> FindLocked(const std::string& name,
                                                            const ModelState& state,
                                                            const std::string& version);
  // Starts the canary phase of what `fresh` publishes in place of `given_up` (with mu_
  // held), when its highest READY version asks for one and replaces a serving load: that
  // load moves from `given_up` into the phase, so that it is not retired.
  void StartCanary(const std::string& name, ModelState& given_up, ModelState& fresh) const;

  // A load request's config (parsed) and files (written), ready to load from.
  struct Override {
    inference::ModelConfig config;
    config::ParseDetails parse_details;
    std::shared_ptr<const LoadFolder> folder;  // null: the repository's folder
  };
  StatusOr<Override> ReadOverride(const std::string& name, const LoadOverride& load) const;
  // The serving loads a reload may keep, by version.
  using Unchanged = std::map<int64_t, std::shared_ptr<ModelVersion>>;
  // What of `name`'s serving state a reload from its folder may keep (with mu_ held): the
  // READY versions loaded from the folder with its own config (ModelVersion::files), none
  // of whose instances is out of service, when no canary phase is in progress.
  static Unchanged UnchangedCandidates(const ModelState& serving);
  // The part of a model's Fingerprint that one version's load reads: everything but the
  // other numeric version folders (config.pbtxt, labels, files beside the versions too).
  static std::string VersionFingerprint(const std::string& fingerprint,
                                        const std::filesystem::path& dir, int64_t version);
  // Builds the model's state from disk without touching the map; from what `override`
  // gives instead, when set. A version in `unchanged` whose files are as they were is kept.
  ModelState LoadFromDisk(const std::string& name, const Override* override = nullptr,
                          const Unchanged& unchanged = {}) const;
  // Loads and admits the `selected` versions of state.config into state.versions.
  void LoadVersions(const std::string& name, const std::vector<int64_t>& selected,
                    ModelState& state, const Unchanged& unchanged) const;
  StatusOr<std::shared_ptr<ModelVersion>> LoadVersion(
      const std::string& name, const std::filesystem::path& dir, int64_t version,
      const inference::ModelConfig& config, const config::CompletionOptions& completion) const;
  // Ensembles (model_repository_ensemble.cc).
  StatusOr<std::shared_ptr<ModelVersion>> LoadEnsembleVersion(
      const std::string& name, int64_t version, const inference::ModelConfig& config) const;
  // The step models config.pbtxt names, when the folder holds an ensemble.
  std::vector<std::string> StepModelsOnDisk(const std::string& name) const;
  // Load with load_mu_ held. `touched` collects the models (re)loaded by this operation,
  // so that ensembles depending on each other end the recursion.
  Status LoadLocked(const std::string& name, bool load_missing_steps,
                    std::set<std::string>* touched, bool as_step = false,
                    const Override* override = nullptr);
  Status UnloadLocked(const std::string& name, bool unload_dependents);
  // Puts `fresh` in the map (with load_mu_ held), keeping what serves where it failed when
  // `keep_serving`, then re-validates the ensembles that use the model.
  Status Publish(const std::string& name, ModelState fresh, bool keep_serving,
                 std::set<std::string>* touched);
  // Every loaded ensemble that names `name` as a step is re-validated.
  void ReloadDependents(const std::string& name, std::set<std::string>* touched);
  // Builds a loaded ensemble again from the config it was loaded with, against the step
  // models serving now, and publishes it whether or not it validates.
  void Revalidate(const std::string& ensemble, std::set<std::string>* touched);
  // The config's output reshape for the version's scheduler (scheduler::OutputShaper):
  // null when no output has one. `config` is the version's, which outlives its scheduler.
  static scheduler::OutputShaper OutputShaperFor(const inference::ModelConfig& config);
  std::string Fingerprint(const std::string& name) const;
  // Every model folder's name, across the roots, sorted, each once. A root that cannot be
  // listed adds "<root>: <why>" to `unreadable` when given.
  std::vector<std::string> ModelFolders(std::vector<std::string>* unreadable = nullptr) const;
  // <root>/<name> for each root that has that folder, in the roots' order.
  std::vector<std::filesystem::path> FoldersOf(const std::string& name) const;
  // "no model folder 'x' in A" (or "in any of A, B").
  std::string NoFolder(const std::string& name) const;
  // Its canary phase's stable load too; not the versions it kept.
  static void StopVersions(const ModelState& state);
  // Versions replaced or unloaded: they stop (draining) after kRetireGrace, so that a
  // request that found one just before the swap still runs on it instead of meeting a
  // stopped scheduler, and not while an ensemble request holds one for a step (StepHold).
  // StopAll stops them at once, after the ensembles.
  void Retire(const ModelState& state);  // its canary phase's stable load too
  void Retire(std::vector<std::shared_ptr<ModelVersion>> versions);
  void RetireLoop();
  // Keeps what `serving` has READY where `fresh` failed (see Load); returns why, empty when
  // `fresh` is published whole. `fresh` then holds what is published, and `serving` what
  // is given up.
  static std::string KeepServing(ModelState& serving, ModelState& fresh);
  // Whether a failed load may pass when its files are read again as they are: the model or a
  // version failed UNAVAILABLE (the rollout gate found the serving version too busy to time,
  // the folder changed while it was read) or RESOURCE_EXHAUSTED (out of memory, the thread
  // limit).
  static bool ReadAgain(const ModelState& fresh);
  void PollLoop();

  RepositoryOptions options_;
  backend::Backend* backend_;
  scheduler::StepBinder step_binder_;

  mutable std::mutex mu_;
  std::map<std::string, ModelState> models_;  // guarded by mu_
  // Each step model's dependents: the models whose step_models name it (guarded by mu_), so
  // that a load finds the ensembles to re-validate without a walk over every model.
  std::map<std::string, std::set<std::string>> dependents_;
  // Keeps dependents_ as `name`'s step models change from `before` to `after` (mu_ held).
  void IndexSteps(const std::string& name, const std::vector<std::string>& before,
                  const std::vector<std::string>& after);
  bool stopped_ = false;                      // guarded by mu_
  // Serializes Load/Unload/Poll so that two loads of one model never race.
  std::mutex load_mu_;

  std::mutex retire_mu_;
  std::condition_variable retire_cv_;
  std::deque<std::pair<Clock::time_point, std::shared_ptr<ModelVersion>>>
      retiring_;               // guarded by retire_mu_, oldest first
  bool retire_stop_ = false;  // guarded by retire_mu_
  std::thread retire_thread_;

  // A model whose load is to be read again (ReadAgain): when its next poll may, backing
  // off as tries with the same files fail, 1 poll interval after the first, then 3, 7, 15,
  // 31 at most. A server too busy for the rollout gate is not given a new load and
  // admission at every poll.
  struct PollRetry {
    std::string fingerprint;  // the files tried
    int tries = 0;
    Clock::time_point next;
  };
  std::map<std::string, PollRetry> poll_retries_;  // guarded by mu_

  std::mutex poll_mu_;
  std::condition_variable poll_cv_;
  bool poll_stop_ = false;  // guarded by poll_mu_
  bool startup_loaded_ = false;  // guarded by poll_mu_: LoadStartupModels has loaded
  std::thread poll_thread_;
};

}  // namespace fastpath::repository
