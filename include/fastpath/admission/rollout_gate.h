// The rollout perf gate (issue 12 §2, §3): a candidate model version is compared with the
// version it would take traffic from, on the same machine, before traffic moves. Both run
// the same seeded requests in alternation (A B, B A, A B, ...), so that thermal, clock and
// load changes during the comparison fall on both alike; each run is timed by itself (the
// model's execution only, never batched with other requests, no queueing), so user traffic
// on the serving version does not make the candidate look faster than it is.
//
// Here is the judgement, pure over the measured times: what the server (server_gate.cc)
// and `fastpath gate` measure, they judge here.
//
// The gate lives in config.pbtxt `parameters` (on the candidate's config):
//   fastpath.rollout.gate                  "true" turns it on ("false": off, the default)
//   fastpath.rollout.max_p95_ratio         candidate p95 / serving p95, at most (default 1.10)
//   fastpath.rollout.min_throughput_ratio  candidate / serving inferences per second, at
//                                          least (default 0.90)
//   fastpath.rollout.output_tolerance      outputs of the same input: "0" byte for byte, a
//                                          number the largest relative difference allowed
//                                          per element; unset, they are reported and not
//                                          judged (a retrained model answers differently)
//   fastpath.rollout.rounds                alternations timed, at least (default 30, 5..1000);
//                                          the server times more, up to 10x, until a
//                                          second has passed per batch size, after two
//                                          untimed rounds that warm both sides up
//   fastpath.rollout.canary_percent        after the gate passes, the share of requests (1 to
//                                          50, whole) the candidate gets at first, while the
//                                          serving load takes the rest (unset: traffic moves
//                                          at once)
//   fastpath.rollout.canary_duration_s     how long that phase lasts (10 to 86400, default
//                                          300); the server watches both sides' errors and
//                                          p95 and rolls the candidate back on a regression,
//                                          or promotes it at the end (server_rollout_canary.cc)
//   fastpath.rollout.canary_max_p95_ratio  the candidate's p95 over the old load's during the
//                                          phase, at most (default 1.5, 1 to 100)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fastpath/common/status.h"
#include "model_config.pb.h"

namespace fastpath::admission {

inline constexpr const char* kRolloutGate = "fastpath.rollout.gate";
inline constexpr const char* kRolloutMaxP95Ratio = "fastpath.rollout.max_p95_ratio";
inline constexpr const char* kRolloutMinThroughputRatio = "fastpath.rollout.min_throughput_ratio";
inline constexpr const char* kRolloutOutputTolerance = "fastpath.rollout.output_tolerance";
inline constexpr const char* kRolloutRounds = "fastpath.rollout.rounds";
inline constexpr const char* kRolloutCanaryPercent = "fastpath.rollout.canary_percent";
inline constexpr const char* kRolloutCanaryDuration = "fastpath.rollout.canary_duration_s";
inline constexpr const char* kRolloutCanaryMaxP95Ratio = "fastpath.rollout.canary_max_p95_ratio";

// The gate's numeric settings and their ranges: one table for every way of giving them, the
// config's fastpath.rollout.* parameters, `fastpath gate`'s flags (--max-p95-ratio, ...) and
// the verdict endpoint's query (GET /v2/rollout/verdict?max_p95_ratio=...).
enum class GateSetting {
  kMaxP95Ratio,
  kMinThroughputRatio,
  kOutputTolerance,
  kRounds,
  kCanaryPercent,
  kCanaryDuration,
  kCanaryMaxP95Ratio,
};
struct GateSettingRange {
  const char* key;  // the config parameter, kRollout*
  double lo = 0, hi = 0;
  bool whole = false;       // a whole number
  const char* description;  // what a message says the value must be: "a number from 1 to 100"
};
const GateSettingRange& RangeOf(GateSetting setting);
// `text` as a value of `setting`: a finite number in its range, whole where it must be;
// nullopt otherwise.
std::optional<double> GateSettingValue(GateSetting setting, const std::string& text);
// The same, with InvalidArgument "<name> must be <description>, not '<text>'" for a value that
// is not one: `name` is what the user gave it as (a flag, a query field).
StatusOr<double> ParseGateSetting(GateSetting setting, const std::string& name,
                                  const std::string& text);

struct GatePolicy {
  double max_p95_ratio = 1.10;
  double min_throughput_ratio = 0.90;
  std::optional<double> output_tolerance;  // unset: outputs are not judged
  uint32_t rounds = 30;
  // The canary phase: 0 percent, none.
  uint32_t canary_percent = 0;
  uint32_t canary_duration_s = 300;
  // The candidate's p95 over the old load's during the phase, at most. Looser than
  // max_p95_ratio: the two loads serve different shares of the traffic, so they queue and
  // batch differently, and equal models measured 1.12 under load (docs/rollouts.md).
  double canary_max_p95_ratio = 1.5;
};

// The gate of `config`: nullopt when fastpath.rollout.gate is not "true". A value out of
// range, or a fastpath.rollout.* key while the gate is off, is an error naming the key.
StatusOr<std::optional<GatePolicy>> RolloutGateFor(const inference::ModelConfig& config);

// What was measured: the compute times of the same requests on each side, in milliseconds,
// one pair per round (baseline_ms[i] and candidate_ms[i] ran next to each other).
struct GateSamples {
  std::vector<double> baseline_ms;  // one request of `rows` rows each
  std::vector<double> candidate_ms;
  uint64_t rows = 1;
  // The same, at the model's largest batch (for throughput); empty when the model does
  // not batch, and then throughput comes from the runs above.
  std::vector<double> baseline_batch_ms;
  std::vector<double> candidate_batch_ms;
  uint64_t batch_rows = 0;
  // The largest relative difference between the two sides' outputs for the same input
  // (0: identical), with a description of where; nullopt when not compared.
  std::optional<double> output_difference;
  std::string output_difference_detail;
};

struct GateVerdict {
  bool passed = false;
  double baseline_p50_ms = 0, baseline_p95_ms = 0;
  double candidate_p50_ms = 0, candidate_p95_ms = 0;
  double p95_ratio = 0;         // candidate / baseline
  double throughput_ratio = 0;  // candidate / baseline inferences per second
  // The 90% intervals of the two ratios (paired bootstrap over rounds, seeded): what noise
  // alone could have made of them.
  double p95_ratio_low = 0, p95_ratio_high = 0;
  double throughput_ratio_low = 0, throughput_ratio_high = 0;
  uint64_t throughput_rows = 1;       // the batch the throughput was measured at
  std::vector<std::string> failures;  // each criterion missed, with both figures
  // One line: the figures side by side and, when refused, why.
  std::string summary;
};

// Judges the samples under the policy. The p95 ratio compares the two sides' 95th
// percentiles; the throughput ratio is the median over rounds of baseline time / candidate
// time (a ratio per round cancels what changed between rounds). A ratio refuses the
// candidate when its whole 90% interval is past the tolerance: on a busy machine the p95 of
// two identical versions differs by more than 10% by chance, and a gate that refuses equal
// versions at random gets turned off. So noise alone never refuses, and a regression the
// measurement cannot tell from noise passes, with its interval in the summary (as canary
// analysis tools judge: significant and larger than the tolerance).
GateVerdict JudgeGate(const GatePolicy& policy, const GateSamples& samples);

// The canary phase (fastpath.rollout.canary_percent): what the server counted on each side
// since the phase began, the serving load's share of user requests and the candidate's.
struct CanaryCounts {
  uint64_t requests = 0;  // answered, failed ones included
  // Failed in the model, or refused by the model's config: shed load (a full queue, a
  // timeout in it) and cancellations say nothing of the model and are not counted.
  uint64_t errors = 0;
  std::vector<double> latency_ms;  // successful requests, end to end in the server (latest)
};

struct CanaryVerdict {
  enum class Call { kContinue, kPromote, kRollBack };
  Call call = Call::kContinue;
  double stable_error_rate = 0, candidate_error_rate = 0;
  // Candidate p95 / serving p95 and its 90% interval; 0 when not judged (before the end, or
  // too few requests on a side).
  double p95_ratio = 0, p95_ratio_low = 0, p95_ratio_high = 0;
  std::string summary;  // the figures side by side, and why it ends when it does
};

// The fewest successful requests on each side for their p95 to be compared.
inline constexpr size_t kCanaryMinLatencies = 50;

// Judges a canary phase. Errors are judged on every call: the candidate is rolled back as
// soon as it failed at least 5 requests and its error rate is above the serving load's by
// more than one percentage point, beyond noise (the excess over that point is three
// standard errors, rates adjusted by Agresti-Caffo, so that the watch's repeated looks and
// small counts do not turn chance into a rollback). With `final` (the phase's time is
// up), the p95 is judged as the gate judges it (a regression past canary_max_p95_ratio over
// its whole 90% interval) and the candidate is otherwise promoted; with fewer than
// kCanaryMinLatencies requests on a side the latency is not judged, and the summary says so.
// Both sides served the same stream of requests, split by count, but the two shares queue
// and batch differently, hence the looser tolerance.
CanaryVerdict JudgeCanary(const GatePolicy& policy, const CanaryCounts& stable,
                          const CanaryCounts& candidate, bool final);

// Whether `verdict` is past a tolerance on its point estimate while its interval still
// reaches back over it: more measurement would tell noise from a regression.
bool GateInconclusive(const GatePolicy& policy, const GateVerdict& verdict);

// The nearest-rank percentile (p in (0, 100]) of `values`; 0 when empty.
double Percentile(std::vector<double> values, double p);

}  // namespace fastpath::admission
