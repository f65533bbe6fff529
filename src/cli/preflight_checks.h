// The checks of `fastpath preflight` (issue 12 §5): the production checklist, each item
// verified on this node against a model repository. Each check is a function of what was
// gathered (the capability snapshot, the repository's configs, the admission report of a
// load, the files named on the command line), so that the command only gathers and prints.
//
// Every item ends PASS, FAIL or NOT CHECKED, with a summary that says why and, unless it
// passed, what to do. Per-model findings say which model; a model an item does not apply
// to (an ensemble has no instances of its own) is listed as such and counts for nothing.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "fastpath/admission/admission_report.h"
#include "fastpath/common/status.h"
#include "fastpath/gpu/capability_snapshot.h"
#include "model_config.pb.h"

namespace fastpath::cli::preflight {

enum class Verdict { kPass, kFail, kNotChecked, kNotApplicable };

// "PASS", "FAIL", "NOT CHECKED", "N/A" (the table) and "pass", "fail", "not_checked",
// "not_applicable" (the JSON).
const char* VerdictLabel(Verdict verdict);
const char* VerdictName(Verdict verdict);

struct ModelFinding {
  std::string model;
  Verdict verdict = Verdict::kNotChecked;
  std::string detail;
};

struct Item {
  std::string id;     // stable, for --json and scripts: "driver", "memory_budget", ...
  std::string title;  // for people: "driver against the runtime"
  Verdict verdict = Verdict::kNotChecked;
  std::string summary;  // why this verdict
  std::string action;   // what to do; empty when it passed
  std::vector<ModelFinding> models;
};

// One model folder of the repository, read as the repository reads it, without loading.
struct RepositoryModel {
  std::string name;
  std::filesystem::path dir;
  // config.pbtxt as written; nullopt when it cannot be read or parsed (config_error says why).
  std::optional<inference::ModelConfig> config;
  std::string config_error;
  // The completed config of a version that loaded (what the model file filled in); nullopt
  // when none loaded.
  std::optional<inference::ModelConfig> completed;
  std::vector<int64_t> version_folders;  // the numeric folders on disk, ascending

  bool ensemble() const;
  // Some instance_group asks for KIND_GPU.
  bool gpu() const;
  // The CUDA ordinals its KIND_GPU groups name (an empty `gpus` is GPU 0, as serve places
  // it), ascending.
  std::vector<int> gpus() const;
  // The completed config when there is one, else the config as written; null when neither.
  const inference::ModelConfig* best_config() const;
};

// Every model folder under `root` (not the hidden ones), by name. NotFound when `root` is
// not a readable directory.
StatusOr<std::vector<RepositoryModel>> ReadRepository(const std::filesystem::path& root);

// 1. The driver against the runtime: the snapshot's findings (gpu::Assess) for the
// repository's GPU models. A repository without a GPU model passes ("no GPU model").
Item CheckDriver(const gpu::CapabilitySnapshot& snapshot,
                 const std::vector<RepositoryModel>& models);

// 2. The memory budget with its margin, from the admission report of a load of the
// repository in which only the models that ask for a budget (fastpath.memory.limit_bytes
// or fastpath.memory.margin) are measured. A model that did not load fails; one that does
// not ask is not checked, by name.
Item CheckMemoryBudget(const admission::AdmissionReport& report,
                       const std::vector<RepositoryModel>& models);

// 3. The arena configuration: each instance's memory arena and its cap
// (fastpath.memory.limit_bytes, or the cuda accelerator's gpu_mem_limit), per model.
Item CheckArena(const std::vector<RepositoryModel>& models);

// 4. A soak of at least kMinSoakSeconds: the bench report `path` (`fastpath bench --soak
// ... --json-file`, or its contents `text`). `path` empty: no report was given (FAIL).
inline constexpr double kMinSoakSeconds = 30 * 60;
// The soak's drift judged as serve's --drift-threshold default judges a model's: the last
// window slower than the first by this share or more is not a clean soak.
inline constexpr double kSoakMaxDrift = 0.15;
Item CheckSoak(const std::string& path, const StatusOr<std::string>& text,
               const std::vector<RepositoryModel>& models);

// 5. Alert rules present: the Prometheus rule file `path` (its contents `text`) parses
// (ParseAlertRules, rules_yaml.h), every rule has an expression, and it holds each alert the
// runbooks name for what this repository runs (RequiredAlerts). `path` empty: none was found
// (`looked_in` says where).
Item CheckAlertRules(const std::string& path, const StatusOr<std::string>& text,
                     const std::vector<std::string>& looked_in,
                     const std::vector<RepositoryModel>& models);
// The alerts a deployment of `models` needs: the server's and the memory alerts always,
// the GPU alerts with a GPU model, the canary alerts with a model that runs a canary.
std::vector<std::string> RequiredAlerts(const std::vector<RepositoryModel>& models);

// 5b. Metrics collected: whether a Prometheus scrapes this server's metrics. `prometheus`
// empty: not asked (NOT CHECKED). Otherwise `answer` is the body of its instant query of
// `fastpath_server_ready` (or why it could not be had).
inline constexpr const char* kMetricsQuery = "fastpath_server_ready";
Item CheckMetricsCollected(const std::string& prometheus, const StatusOr<std::string>& answer);

// 6. The partition (MIG slice, MPS or whole GPUs) against the GPU models' instance_group.
struct PartitionEnvironment {
  std::optional<std::string> mps_pipe_directory;            // CUDA_MPS_PIPE_DIRECTORY
  bool mps_control_present = false;                         // the MPS control daemon's pipe exists
  std::string mps_control_path;                             // where it was looked for
  std::optional<std::string> mps_active_thread_percentage;  // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
};
Item CheckPartition(const gpu::CapabilitySnapshot& snapshot, const PartitionEnvironment& env,
                    const std::vector<RepositoryModel>& models);

// 7. Out-of-memory behaviour defined, for each GPU model and each model with a cap: a cap
// (so that running out is one instance's clean error, not the device's or the process's),
// and the recovery check an instance answers before it serves again after running out
// (a seeded request: concrete dims or a model_warmup).
Item CheckOutOfMemory(const std::vector<RepositoryModel>& models);

// 8. A rollback plan: the rollout gate configured (kRolloutGateKey "true") and a previous
// version kept (the version policy serves two or more, or an older version folder is on
// disk beside the serving one).
Item CheckRollback(const std::vector<RepositoryModel>& models);

// The items of a run, in checklist order, and whether the run passes: no FAIL, and with
// `strict` no NOT CHECKED either.
bool Passed(const std::vector<Item>& items, bool strict);

}  // namespace fastpath::cli::preflight
