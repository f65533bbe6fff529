// Admission (issue 4 §6): the profile the server runs under, and the report that
// GET /v2/health/admission returns: why the server is or is not ready, each model's state
// with its reasons and self-test figures, and the capability snapshot.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fastpath/admission/drift_detector.h"
#include "fastpath/admission/fragmentation_detector.h"
#include "fastpath/admission/leak_detector.h"
#include "fastpath/admission/memory_budget.h"
#include "fastpath/admission/self_test.h"
#include "fastpath/backend/backend.h"
#include "fastpath/common/status.h"
#include "fastpath/gpu/telemetry.h"

namespace fastpath::admission {

// production: any degradation is fatal (a self-test miss makes the model UNAVAILABLE and
// `serve` exit), and a GPU model never runs on the CPU. dev: a self-test miss serves the
// model DEGRADED, and a GPU model may fall back to the CPU only with --allow-cpu-fallback,
// labelled DEGRADED in the log and the report.
enum class Profile { kProduction, kDev };
StatusOr<Profile> ParseProfile(const std::string& text);  // "production" | "dev"
const char* ProfileName(Profile profile);

// What the server enforces; passed from the command line to the server.
struct Policy {
  Profile profile = Profile::kDev;
  bool allow_cpu_fallback = false;  // dev only
};

enum class AdmissionState { kReady, kDegraded, kUnavailable };
const char* AdmissionStateName(AdmissionState state);  // "READY", "DEGRADED", "UNAVAILABLE"

// A model's canary (issue 14 §6): the self-test's seeded request, run every interval through
// the normal path, compared with what it answered and how long it took at admission.
struct CanaryStatus {
  int64_t interval_s = 0;
  double reference_ms = 0;  // the median of its runs at admission
  uint64_t runs = 0;        // since the version was published
  uint64_t failures = 0;    // runs that got an error instead of outputs
  uint64_t mismatches = 0;  // runs whose outputs differed from admission's
  std::optional<double> latency_ratio;  // the median of the last 5 runs / reference_ms
  std::string last_problem;             // the last mismatch or failure, for people
};

struct ModelAdmission {
  std::string name;
  std::string version;  // empty for a model that failed before any version
  AdmissionState state = AdmissionState::kUnavailable;
  std::vector<std::string> reasons;  // why DEGRADED or UNAVAILABLE
  // UNAVAILABLE by choice, with nothing wrong: not loaded in explicit mode, or unloaded.
  // Readiness, the start-up verdict and the model-state metric leave it out.
  bool unloaded = false;
  std::optional<SelfTestReport> self_test;
  // The placement audit of issue 4 §3 as a JSON object (nodes per execution provider);
  // empty until the backend records one, rendered as null.
  std::string placement_json;
  // A READY version's instances' memory arenas now, in instance order (nullopt for one whose
  // backend cannot tell); empty for a version that is not serving.
  std::vector<std::optional<backend::MemoryStats>> instance_memory;
  // The memory watch's leak verdict per instance, beside instance_memory (nullopt: not
  // sampled yet).
  std::vector<std::optional<LeakVerdict>> instance_leaks;
  // And its fragmentation verdict.
  std::vector<std::optional<FragmentationVerdict>> instance_fragmentation;
  // The drift watch's verdict (drift_detector.h) for a READY version; nullopt before its
  // first observation.
  std::optional<DriftVerdict> drift;
  // The canary of a READY version that declares one.
  std::optional<CanaryStatus> canary;
  // The memory budget measured at load (memory_budget.h), or why there is none.
  std::optional<MemoryBudget> memory_budget;
  std::string memory_budget_note;
};

struct AdmissionReport {
  Policy policy;
  bool live = true;
  bool ready = false;
  std::vector<std::string> reasons;  // server-level: shutting down, models not ready, ...
  // Those of `reasons` that make the server not ready (a model not READY does only under
  // strict readiness); not in the JSON, the failed readiness probe's body.
  std::vector<std::string> unready_because;
  std::vector<ModelAdmission> models;
  std::string version_lock;         // the lock file checked at start-up; empty when none
  std::vector<std::string> pinned;  // the components it pins
  std::string snapshot_json;        // gpu::SnapshotToJson; empty when not taken
  // GPU telemetry (server/gpu_watch.h): where the samples come from ("" when there is no
  // source) and each GPU's status. A quarantined GPU is also among `reasons`.
  std::string gpu_telemetry;
  std::vector<gpu::GpuStatus> gpus;
  // The rollout gate's decisions since start, by model and outcome (server.h's
  // RolloutOutcomeName: passed, refused, no_baseline, not_measured, canary, promoted,
  // rolled_back, ended). Not in the JSON: the
  // decisions themselves are at GET /v2/models/{m}/rollout.
  struct RolloutCount {
    std::string model;
    std::string outcome;
    uint64_t count = 0;
  };
  std::vector<RolloutCount> rollout_decisions;
};

// {"profile", "allow_cpu_fallback", "live", "ready", "reasons", "version_lock":
//  {"file", "pinned"} | null, "models": [{"name", "version", "state", "reasons",
//  "self_test": {...} | null, "placement": {...} | null, "memory_budget": {...} | null,
//  "memory_budget_note" (only when there is no budget and a reason),
//  "drift": {"ratio": r | null, "alert", "cause": c | null, "detail"} | null,
//  "canary": {"interval_s", "reference_ms", "runs", "failures", "mismatches",
//             "latency_ratio": r | null, "last_problem"} | null}],
//  "gpu_telemetry": {"source", "gpus": [gpu::StatusToJson]} | null,
//  "capability_snapshot": {...} | null}
std::string ReportToJson(const AdmissionReport& report);

}  // namespace fastpath::admission
