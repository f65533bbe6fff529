#include "rollout_verdict.h"

#include <map>
#include <memory>
#include <optional>
#include <utility>

namespace fastpath::frontend::http {
namespace {

constexpr const char* kOff =
    "/v2/rollout/verdict is off: it makes the server send requests to the baseline the query "
    "names. Start `fastpath serve` with --rollout-verdict-baseline URL (a baseline server it may "
    "measure against, repeatable) or --rollout-verdict-records DIR (the recorded baselines it "
    "may read); see docs/rollouts.md";
constexpr const char* kKnown =
    "model, baseline, max_p95_ratio, min_throughput_ratio, output_tolerance, rounds, "
    "require_same_hardware, strict";
// A measurement takes seconds; a client told to retry should not spin.
constexpr unsigned kBusyRetryAfterS = 10;

StatusOr<bool> ParseFlag(const std::string& field, const std::string& value) {
  if (value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  return InvalidArgument(field + " must be true or false, not '" + value + "'");
}

}  // namespace

StatusOr<ParsedVerdictQuery> ParseVerdictQuery(std::string_view query) {
  std::map<std::string, std::string> fields;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    auto name = PercentDecode(pair.substr(0, eq));
    auto value =
        PercentDecode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
    if (!name || !value) {
      return InvalidArgument("the query has a bad percent-encoding in '" + std::string(pair) + "'");
    }
    if (!fields.emplace(*name, *value).second) {
      return InvalidArgument("query field '" + *name + "' is given twice");
    }
  }
  ParsedVerdictQuery parsed;
  RolloutVerdictQuery& q = parsed.query;
  for (const auto& field : fields) {
    const std::string& name = field.first;
    const std::string& value = field.second;
    using admission::GateSetting;
    auto setting = [&](GateSetting s) { return admission::ParseGateSetting(s, name, value); };
    if (name == "model") {
      q.model = value;
    } else if (name == "baseline") {
      q.baseline = value;
    } else if (name == "max_p95_ratio") {
      FASTPATH_ASSIGN_OR_RETURN(q.policy.max_p95_ratio, setting(GateSetting::kMaxP95Ratio));
    } else if (name == "min_throughput_ratio") {
      FASTPATH_ASSIGN_OR_RETURN(q.policy.min_throughput_ratio,
                                setting(GateSetting::kMinThroughputRatio));
    } else if (name == "output_tolerance") {
      FASTPATH_ASSIGN_OR_RETURN(q.policy.output_tolerance, setting(GateSetting::kOutputTolerance));
    } else if (name == "rounds") {
      FASTPATH_ASSIGN_OR_RETURN(const double rounds, setting(GateSetting::kRounds));
      q.policy.rounds = static_cast<uint32_t>(rounds);
      q.rounds_given = true;
    } else if (name == "require_same_hardware") {
      FASTPATH_ASSIGN_OR_RETURN(q.require_same_hardware, ParseFlag(name, value));
    } else if (name == "strict") {
      FASTPATH_ASSIGN_OR_RETURN(parsed.strict, ParseFlag(name, value));
    } else {
      return InvalidArgument("unknown query field '" + name + "' (known: " + kKnown + ")");
    }
  }
  if (q.model.empty())
    return InvalidArgument("query field 'model' is required: the model to judge");
  if (q.baseline.empty()) {
    return InvalidArgument(
        "query field 'baseline' is required: the serving version's server (http://HOST:PORT) "
        "or recorded baseline");
  }
  return parsed;
}

RolloutVerdictEndpoint::RolloutVerdictEndpoint(RolloutVerdictFn verdict)
    : verdict_(std::move(verdict)) {}

RolloutVerdictEndpoint::~RolloutVerdictEndpoint() { Stop(); }

void RolloutVerdictEndpoint::Stop() { pool_.Stop(); }

void RolloutVerdictEndpoint::Handle(const Request& request, const ReplyFn& reply) {
  if (!verdict_) return reply(ErrorReply(404, kOff));
  const std::string_view target(request.target().data(), request.target().size());
  const size_t question = target.find('?');
  auto parsed = ParseVerdictQuery(question == std::string_view::npos ? std::string_view()
                                                                     : target.substr(question + 1));
  if (!parsed.ok()) return reply(ErrorReply(parsed.status()));
  parsed->query.candidate = candidate_;
  if (busy_.exchange(true)) {
    HttpReply r = ErrorReply(429,
                             "a rollout verdict is being measured already; one runs at a time "
                             "(two at once would time each other): retry once it is done");
    r.retry_after_s = kBusyRetryAfterS;
    return reply(std::move(r));
  }
  auto result = std::make_shared<StatusOr<RolloutVerdict>>(Internal("not run"));
  const bool strict = parsed->strict;
  pool_.Submit(
      "the rollout verdict of model '" + parsed->query.model + "'",
      [this, query = std::move(parsed->query), result]() {
        *result = verdict_(query);
        return Status::Ok();
      },
      [this, reply, result, strict](Status status) {
        busy_.store(false);
        if (!status.ok()) return reply(ErrorReply(status));  // shutting down, or threw
        if (!result->ok()) {
          const Status& error = result->status();
          // The baseline is not one this server may measure against.
          if (error.code() == StatusCode::kFailedPrecondition) {
            return reply(ErrorReply(403, error.message()));
          }
          return reply(ErrorReply(error));
        }
        RolloutVerdict& verdict = **result;
        unsigned code = 200;
        if (strict && verdict.outcome == RolloutVerdict::Outcome::kRefused) code = 409;
        if (strict && verdict.outcome == RolloutVerdict::Outcome::kNotMeasured) code = 503;
        reply(JsonReply(code, std::move(verdict.json)));
      });
}

}  // namespace fastpath::frontend::http
