// JSON bodies of the non-inference endpoints, in the shapes Triton's HTTP server
// produces (tritonclient and perf_analyzer read them by key).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fastpath/common/status.h"
#include "fastpath/server/server.h"

namespace fastpath::frontend::http {

// GET /v2: {"name", "version", "extensions": [...]}
std::string ServerMetadataJson(const server::ServerMetadata& metadata);

// GET /v2/models/{m}[/versions/{v}]:
// {"name", "versions": [...], "platform", "inputs": [{"name", "datatype", "shape"}], "outputs": [...]}
std::string ModelMetadataJson(const server::ModelMetadata& metadata);

// GET .../stats and /v2/models/stats: {"model_stats": [{"name", "version", "last_inference",
// "inference_count", "execution_count", "inference_stats": {...}, "batch_stats": [...]}]}
std::string ModelStatisticsJson(const std::vector<ModelStatistics>& stats);

// POST /v2/repository/index: [{"name", "version", "state", "reason"}]
std::string RepositoryIndexJson(const std::vector<server::RepositoryEntry>& entries);

// GET /v2/models/{m}/rollout: the rollout gate's decisions, oldest first:
// {"name", "decisions": [{"candidate_version", "baseline_version" (null without one),
// "outcome", "unix_ms", "detail", "verdict": null | {"passed", "p95_ratio",
// "throughput_ratio", "p95_ratio_low", "p95_ratio_high", "throughput_ratio_low",
// "throughput_ratio_high" (90% intervals), "throughput_batch_size", "candidate_p50_ms", "candidate_p95_ms",
// "baseline_p50_ms", "baseline_p95_ms", "failures": [...]}}]}
std::string RolloutHistoryJson(const std::string& model,
                               const std::vector<server::RolloutDecision>& decisions);

// GET .../config: the protobuf JSON mapping with proto field names, as Triton prints it:
// every field present (defaults included) and 64-bit integers as JSON numbers, not the
// strings protobuf's mapping uses (perf_analyzer reads dims as integers).
[[nodiscard]] StatusOr<std::string> ModelConfigJson(const inference::ModelConfig& config);

}  // namespace fastpath::frontend::http
