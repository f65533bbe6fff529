// GET /v2/rollout/verdict's measurement (issue 12 §3): `fastpath serve` hands the HTTP front
// end this hook (frontend::HttpOptions::rollout_verdict), which runs `fastpath gate` with the
// server itself as the candidate (gate_run.h) and answers `fastpath gate --json`'s JSON.
//
// The endpoint makes the server send requests to an address from the query, and read a file
// the query names: so it serves only the baselines the operator allowed. A server baseline
// must be one of --rollout-verdict-baseline's (host and port as given there, no other), and a
// recorded one must be a file under --rollout-verdict-records, after symbolic links are
// followed. Anything else is answered 403, and the endpoint is off (404) unless one of the two
// flags is given.
#pragma once

#include <string>
#include <vector>

#include "fastpath/bench/client.h"
#include "fastpath/common/status.h"
#include "fastpath/frontend/http_server.h"

namespace fastpath::cli {

struct RolloutVerdictOptions {
  std::vector<bench::ServerAddress> baselines;  // --rollout-verdict-baseline, as parsed
  std::string records;                          // --rollout-verdict-records DIR; empty: none
  bool enabled() const { return !baselines.empty() || !records.empty(); }
};

// --rollout-verdict-baseline URL: a plain-HTTP server address; the message names the flag.
StatusOr<bench::ServerAddress> ParseVerdictBaseline(const std::string& text);

frontend::RolloutVerdictFn MakeRolloutVerdict(RolloutVerdictOptions options);

}  // namespace fastpath::cli
