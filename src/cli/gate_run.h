// One comparison of `fastpath gate` (issue 12 §3), from what it is asked to the verdict and its
// reports: the command (gate.cc) runs it with its flags, and `fastpath serve
// --rollout-verdict-baseline` runs it for GET /v2/rollout/verdict (gate_verdict.cc), with the
// server itself as the candidate. Both answer the same JSON.
#pragma once

#include <cstdint>
#include <string>

#include "fastpath/admission/rollout_gate.h"
#include "fastpath/bench/client.h"
#include "fastpath/common/status.h"
#include "gate_measure.h"

namespace fastpath::cli::gate {

// What a comparison is asked.
struct GateOptions {
  std::string model;
  std::string baseline;  // a server (http://HOST:PORT), or a record file with baseline_is_file
  bool baseline_is_file = false;
  std::string candidate;  // a server; empty: the baseline is measured alone (to record it)
  bench::Transport transport = bench::Transport::kHttp;
  std::string baseline_grpc;  // with kGrpc; empty: the server's host, port 8001
  std::string candidate_grpc;
  admission::GatePolicy policy;
  // false: with a recorded baseline, as many rounds as were recorded.
  bool rounds_given = true;
  bool require_same_hardware = false;
  // How messages name a setting: "--baseline" (the command's flags) or "baseline" (the
  // endpoint's query fields).
  bool query_names = false;
};

// Everything the reports are written from.
struct GateResult {
  std::string model;
  std::string baseline;  // where the baseline came from
  std::string candidate;
  bool recorded_baseline = false;
  std::string recorded_at;
  bench::Transport transport = bench::Transport::kHttp;
  uint32_t rounds = 0;
  admission::GatePolicy policy;
  admission::GateSamples samples;
  admission::GateVerdict verdict;
  SnapshotComparison snapshots;
  SideMeasurement baseline_side;  // what --record writes
};

// How a comparison ended.
enum class GateEnd {
  kJudged,       // `result.verdict` says passed or refused
  kMeasured,     // no candidate: the baseline was measured alone, nothing judged
  kBadRequest,   // what was asked contradicts what was found (a record of another model or
                 // protocol, an address that is not one): exit 2, HTTP 400; `error` says which
  kNotMeasured,  // nothing could be judged (a server or the model unreachable, a request
                 // failed, a record unreadable or of another request): exit 3; `error` says why
};

struct GateRun {
  GateEnd end = GateEnd::kNotMeasured;
  Status error;
  GateResult result;
};

// Measures and judges. Blocks for the whole measurement: seconds, or minutes for a slow
// model or many rounds.
GateRun RunGate(const GateOptions& options);

// "--baseline" or "baseline", as `options` names settings.
std::string SettingName(const GateOptions& options, const std::string& flag);

// The reports. The JSON's "outcome" is "passed" or "refused"; NotMeasuredJson's, for a
// comparison that ended kNotMeasured, is "not_measured", with "passed": false and "error".
std::string TextReport(const GateResult& result);
std::string JsonReport(const GateResult& result);
std::string NotMeasuredJson(const std::string& model, const std::string& error);

}  // namespace fastpath::cli::gate
