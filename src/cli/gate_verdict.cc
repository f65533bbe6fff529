// GET /v2/rollout/verdict's measurement: see gate_verdict.h.
#include "gate_verdict.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>
#include <utility>

#include "fastpath/bench/http_once.h"
#include "fastpath/common/log.h"
#include "gate_run.h"

namespace fastpath::cli {
namespace {

namespace fs = std::filesystem;

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

bool SameServer(const bench::ServerAddress& a, const bench::ServerAddress& b) {
  return Lower(a.host) == Lower(b.host) && a.port == b.port;
}

// A baseline that names a record: no scheme, and a .json name (a server is "http://HOST:PORT"
// or "HOST:PORT").
bool NamesRecord(const std::string& baseline) {
  return baseline.find("://") == std::string::npos && baseline.size() > 5 &&
         baseline.compare(baseline.size() - 5, 5, ".json") == 0;
}

// The record file `name` under `records`, after symbolic links: FailedPrecondition (403) for a
// name that leaves the folder, InvalidArgument (400) for one that is not there.
StatusOr<std::string> RecordPath(const std::string& records, const std::string& name) {
  if (records.empty()) {
    return FailedPrecondition("baseline '" + name +
                              "' is a recorded baseline, and this server reads none: start "
                              "`fastpath serve` with --rollout-verdict-records DIR");
  }
  const fs::path relative(name);
  if (relative.is_absolute() ||
      std::any_of(relative.begin(), relative.end(), [](const fs::path& p) { return p == ".."; })) {
    return FailedPrecondition("baseline '" + name +
                              "': a recorded baseline is named relative to the server's "
                              "--rollout-verdict-records folder, without '..'");
  }
  std::error_code ec;
  const fs::path root = fs::canonical(records, ec);
  if (ec) return Unavailable("--rollout-verdict-records " + records + ": " + ec.message());
  const fs::path file = fs::weakly_canonical(root / relative, ec);
  if (ec || std::mismatch(root.begin(), root.end(), file.begin(), file.end()).first != root.end()) {
    return FailedPrecondition("baseline '" + name +
                              "' leads out of the --rollout-verdict-records folder");
  }
  if (!fs::is_regular_file(file, ec)) {
    return InvalidArgument("baseline '" + name +
                           "': no such recorded baseline in the server's --rollout-verdict-records "
                           "folder");
  }
  return file.string();
}

StatusOr<frontend::RolloutVerdict> Verdict(const RolloutVerdictOptions& options,
                                           const frontend::RolloutVerdictQuery& query) {
  gate::GateOptions o;
  o.model = query.model;
  o.candidate = query.candidate;
  o.policy = query.policy;
  o.rounds_given = query.rounds_given;
  o.require_same_hardware = query.require_same_hardware;
  o.query_names = true;
  if (NamesRecord(query.baseline)) {
    FASTPATH_ASSIGN_OR_RETURN(o.baseline, RecordPath(options.records, query.baseline));
    o.baseline_is_file = true;
  } else {
    auto address = bench::ParseAddress(query.baseline, 8000);
    if (!address.ok()) {
      return InvalidArgument("baseline '" + query.baseline +
                             "' is neither a server (http://HOST:PORT) nor a recorded baseline "
                             "(NAME.json)");
    }
    const bool allowed =
        std::any_of(options.baselines.begin(), options.baselines.end(),
                    [&](const bench::ServerAddress& a) { return SameServer(a, *address); });
    if (!allowed) {
      std::string known;
      for (const bench::ServerAddress& a : options.baselines) {
        known += (known.empty() ? "" : ", ") + bench::DescribeServer(a);
      }
      return FailedPrecondition(
          "baseline '" + query.baseline + "' is not a server this one may measure against (" +
          (known.empty() ? std::string("none is") : known + " are") +
          "): start `fastpath serve` with --rollout-verdict-baseline " + query.baseline);
    }
    o.baseline = query.baseline;
  }

  log::Info("rollout verdict: measuring model '" + query.model + "' on this server against " +
            query.baseline);
  const gate::GateRun run = gate::RunGate(o);
  frontend::RolloutVerdict verdict;
  switch (run.end) {
    case gate::GateEnd::kJudged:
      verdict.outcome = run.result.verdict.passed ? frontend::RolloutVerdict::Outcome::kPassed
                                                  : frontend::RolloutVerdict::Outcome::kRefused;
      verdict.json = gate::JsonReport(run.result);
      log::Info("rollout verdict for model '" + query.model + "' against " + query.baseline + ": " +
                run.result.verdict.summary);
      return verdict;
    case gate::GateEnd::kBadRequest:
      return run.error;
    case gate::GateEnd::kMeasured:  // never: the candidate is this server
    case gate::GateEnd::kNotMeasured:
      break;
  }
  log::Warn("rollout verdict for model '" + query.model + "' against " + query.baseline +
            ": not measured: " + run.error.message());
  verdict.outcome = frontend::RolloutVerdict::Outcome::kNotMeasured;
  verdict.json = gate::NotMeasuredJson(query.model, run.error.message());
  return verdict;
}

}  // namespace

StatusOr<bench::ServerAddress> ParseVerdictBaseline(const std::string& text) {
  if (text.rfind("https://", 0) == 0) {
    return InvalidArgument("--rollout-verdict-baseline '" + text +
                           "': the gate speaks plain HTTP (http://HOST:PORT)");
  }
  auto address = bench::ParseAddress(text, 8000);
  if (!address.ok()) {
    std::string message = address.status().message();
    if (message.rfind("--url", 0) == 0) message = "--rollout-verdict-baseline" + message.substr(5);
    return InvalidArgument(message);
  }
  return address;
}

frontend::RolloutVerdictFn MakeRolloutVerdict(RolloutVerdictOptions options) {
  return [options = std::move(options)](const frontend::RolloutVerdictQuery& query) {
    return Verdict(options, query);
  };
}

}  // namespace fastpath::cli
