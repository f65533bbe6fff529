// The facade that the front ends (HTTP and gRPC) talk to.
// A front end never reaches into the repository, scheduler or backend directly: it
// parses its protocol into an InferRequest, calls this interface, and renders the
// result. The concrete implementation is server::Server (server_impl.h); front-end
// unit tests use a fake.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fastpath/admission/admission_report.h"
#include "fastpath/admission/rollout_gate.h"
#include "fastpath/common/load_override.h"
#include "fastpath/common/statistics.h"
#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"
#include "model_config.pb.h"  // inference::ModelConfig, Triton's field names and numbers

namespace fastpath::server {

struct ServerMetadata {
  std::string name = "fastpath";
  std::string version;
  std::vector<std::string> extensions;
};

struct TensorMetadata {
  std::string name;
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> shape;  // as the protocol shows it: -1 for a dynamic or batch dim
};

struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;  // the versions that are available (ready)
  std::string platform;               // "onnxruntime_onnx"
  std::vector<TensorMetadata> inputs;
  std::vector<TensorMetadata> outputs;
};

// State of one model version in the repository (Triton's vocabulary).
enum class ModelState { kUnknown, kLoading, kReady, kUnloading, kUnavailable };
// Triton's words for the states (also what tritonclient prints).
inline const char* ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kUnknown: return "UNKNOWN";
    case ModelState::kLoading: return "LOADING";
    case ModelState::kReady: return "READY";
    case ModelState::kUnloading: return "UNLOADING";
    case ModelState::kUnavailable: return "UNAVAILABLE";
  }
  return "UNKNOWN";
}

struct RepositoryEntry {
  std::string name;
  std::string version;  // empty when the model has no loadable version
  ModelState state = ModelState::kUnknown;
  std::string reason;   // why it is not READY; empty when READY
};
// The reason of a model UNAVAILABLE by choice: not loaded in explicit mode, or unloaded.
inline constexpr char kUnloadedReason[] = "unloaded";

// One decision of the rollout gate (admission/rollout_gate.h): a candidate version of a
// model that declares fastpath.rollout.gate, compared with the version it would take
// traffic from before it was published. The decision is the gate's: a candidate it lets
// through is then published, unless the load is dropped for another reason (its folder
// changed while it was read), which the repository index and the log say.
struct RolloutDecision {
  enum class Outcome {
    kPassed,       // let through: no slower than the serving version, beyond the noise
    kRefused,      // the candidate was slower (or answered differently): the old one serves on
    kNoBaseline,   // nothing served that could be timed (a first load): let through
    kNotMeasured,  // the comparison could not run (the reason is in `detail`): refused
    // The canary phase (fastpath.rollout.canary_percent), after the gate let it through:
    kCanary,      // it began: the candidate gets its share of requests, the old load the rest
    kPromoted,    // it ended without a regression: every request goes to the candidate
    kRolledBack,  // the candidate regressed (errors or p95): the old load serves again
    kEnded,       // a later load or an unload ended it first: no verdict
  };
  std::string model;
  int64_t candidate_version = 0;
  int64_t baseline_version = 0;  // 0 with kNoBaseline
  Outcome outcome = Outcome::kNoBaseline;
  int64_t unix_ms = 0;  // when it was decided (wall clock)
  std::string detail;   // the verdict's summary, or why it could not be measured
  std::optional<admission::GateVerdict> verdict;  // with kPassed and kRefused
  std::optional<admission::CanaryVerdict> canary;  // with kPromoted and kRolledBack
};
inline const char* RolloutOutcomeName(RolloutDecision::Outcome outcome) {
  switch (outcome) {
    case RolloutDecision::Outcome::kPassed: return "passed";
    case RolloutDecision::Outcome::kRefused: return "refused";
    case RolloutDecision::Outcome::kNoBaseline: return "no_baseline";
    case RolloutDecision::Outcome::kNotMeasured: return "not_measured";
    case RolloutDecision::Outcome::kCanary: return "canary";
    case RolloutDecision::Outcome::kPromoted: return "promoted";
    case RolloutDecision::Outcome::kRolledBack: return "rolled_back";
    case RolloutDecision::Outcome::kEnded:
      return "ended";
  }
  return "unknown";
}

using InferCallback = std::function<void(StatusOr<InferResponse>)>;
using ControlCallback = std::function<void(Status)>;

class InferenceServer {
 public:
  virtual ~InferenceServer() = default;

  virtual bool IsLive() const = 0;
  // True when every model that should be loaded is READY and the server is not
  // shutting down.
  virtual bool IsReady() const = 0;
  virtual ServerMetadata Metadata() const = 0;
  // Why the server is or is not ready (issue 4 §6): the profile, each model's admission
  // state (READY / DEGRADED / UNAVAILABLE) with reasons and self-test figures, and the
  // capability snapshot. GET /v2/health/admission renders it.
  virtual admission::AdmissionReport Admission() const { return {}; }

  // `version` empty: the model as a whole (any ready version / the policy's default).
  // Unknown model or version: NotFound.
  virtual StatusOr<ModelMetadata> GetModelMetadata(const std::string& name,
                                                   const std::string& version) const = 0;
  virtual StatusOr<bool> IsModelReady(const std::string& name,
                                      const std::string& version) const = 0;
  // The completed config (what the model file filled in included).
  virtual StatusOr<inference::ModelConfig> GetModelConfig(const std::string& name,
                                                          const std::string& version) const = 0;
  // `name` empty: every model; `version` empty: every version of `name`.
  virtual StatusOr<std::vector<ModelStatistics>> GetModelStatistics(
      const std::string& name, const std::string& version) const = 0;

  virtual std::vector<RepositoryEntry> RepositoryIndex(bool ready_only) const = 0;
  // The rollout gate's decisions for `name`, oldest first (the last 32). NotFound for a
  // model the repository does not know; empty for one without the gate.
  virtual StatusOr<std::vector<RolloutDecision>> RolloutHistory(const std::string& name) const {
    return NotFound("model '" + name + "' is not in the repository");
  }
  // Explicit model-control mode only; otherwise FailedPrecondition. `done` is called
  // exactly once: when the model is READY (OK) or failed to load (the reason), or gone.
  // The operation runs on the server's one bounded pool (control_pool.h), never on the
  // caller's thread; a full pool or a server shutting down answers Unavailable at once.
  // `load`: the request's config and files in place of the repository's (ModelRepository::Load).
  virtual void LoadModelAsync(const std::string& name, LoadOverride load, ControlCallback done) = 0;
  // `unload_dependents`: ModelRepository::Unload's.
  virtual void UnloadModelAsync(const std::string& name, bool unload_dependents,
                                ControlCallback done) = 0;

  // Validates and runs one request. `done` is called exactly once, possibly on another
  // thread, possibly before InferAsync returns. A request accepted here is always
  // answered, also during shutdown.
  virtual void InferAsync(InferRequest request, InferCallback done) = 0;
};

}  // namespace fastpath::server
