// /v2/rollout/verdict (issue 12 §3): the query, one measurement at a time off the event loops,
// and the HTTP statuses of its verdicts (docs/rollouts.md, "The verdict endpoint").
//
//   GET|POST /v2/rollout/verdict?model=M&baseline=URL|FILE[&max_p95_ratio=X]
//       [&min_throughput_ratio=X][&output_tolerance=X][&rounds=N]
//       [&require_same_hardware=true][&strict=true]
//
// The query fields are `fastpath gate`'s flags with underscores (and the config's
// fastpath.rollout.* names), in the same ranges. POST is Flagger's webhook call: its JSON body
// (the canary's name and metadata) is not read, the query says everything.
//
// Statuses: 200 for a verdict (passed, refused, or not measured, as the body's "outcome"
// says), for Argo's web provider, which reads the body. With strict=true, for Flagger's
// webhooks, which read only the status: 200 passed, 409 refused, 503 not measured. Either
// way: 400 a bad query (the message names the field), 403 a baseline the server was not
// allowed to measure against, 404 the endpoint is off, 429 a measurement is running already.
#pragma once

#include <atomic>
#include <string>
#include <string_view>

#include "endpoint_router.h"
#include "fastpath/frontend/http_server.h"
#include "fastpath/server/control_pool.h"

namespace fastpath::frontend::http {

struct ParsedVerdictQuery {
  RolloutVerdictQuery query;
  bool strict = false;
};
// The query string (what follows '?'): InvalidArgument naming the field that is missing,
// unknown, repeated or out of range.
StatusOr<ParsedVerdictQuery> ParseVerdictQuery(std::string_view query);

class RolloutVerdictEndpoint {
 public:
  // `verdict` unset: every request is answered 404, saying how to turn the endpoint on.
  explicit RolloutVerdictEndpoint(RolloutVerdictFn verdict);
  ~RolloutVerdictEndpoint();  // Stop()

  // This server's HTTP address, for the queries' candidate: set once, before serving.
  void SetCandidate(std::string url) { candidate_ = std::move(url); }

  // Answers one request of the endpoint; the measurement runs on this endpoint's thread and
  // `reply` is called from there.
  void Handle(const Request& request, const ReplyFn& reply);

  // Refuses new measurements (503) and waits for the running one to answer. A measurement
  // whose baseline stops answering mid-request holds this: the bench sessions it times
  // requests with have no deadline.
  void Stop();

 private:
  RolloutVerdictFn verdict_;
  std::string candidate_;
  std::atomic<bool> busy_{false};
  server::ControlPool pool_{1, 1};  // one thread; busy_ keeps it to one operation
};

}  // namespace fastpath::frontend::http
