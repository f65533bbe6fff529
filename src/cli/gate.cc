// `fastpath gate` (issue 12 §3): a rollout's perf gate between two servers or deployments.
// The candidate server and the baseline (a live server, or a baseline recorded earlier with
// --record) are sent the servers' canary request, one at a time, in alternation, at batch 1
// and at the model's largest batch; their round trips are judged by admission::JudgeGate (the
// same judgement as the server's in-server gate), their outputs and capability snapshots are
// compared. Exit 0 pass, 1 refused, 2 usage, 3 nothing could be judged, 4 judged but --record
// unwritten.
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>

#include "cli.h"
#include "command_line.h"
#include "fastpath/admission/rollout_gate.h"
#include "gate_run.h"

namespace fastpath::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kGateUsage =
    R"(usage: fastpath gate --model M --baseline URL|FILE --candidate URL [options]
       fastpath gate --model M --baseline URL --record FILE [options])";

struct GateFlags {
  gate::GateOptions run;
  std::string record;
  bool json = false;
};

// A flag of one of the gate's settings, with the range the config parameter has.
CLI::Option* AddSetting(CLI::App& app, const std::string& flag, const std::string& value_name,
                        admission::GateSetting setting, const std::string& default_text,
                        std::function<void(double)> set, const std::string& help) {
  return AddValue(app, flag, value_name, help, default_text,
                  [flag, setting, set = std::move(set)](const std::string& value) -> Status {
                    FASTPATH_ASSIGN_OR_RETURN(const double v,
                                              admission::ParseGateSetting(setting, flag, value));
                    set(v);
                    return Status::Ok();
                  });
}

// --baseline is a recorded file when it names one, ends in .json or is a path (a server's
// HOST:PORT has no '/'); a server otherwise.
bool IsRecordFile(const std::string& text) {
  if (text.find("://") != std::string::npos) return false;
  std::error_code ec;
  if (fs::is_regular_file(text, ec)) return true;
  const std::string_view trimmed(text.data(), text.find_last_not_of('/') + 1);
  if (trimmed.find('/') != std::string_view::npos) return true;
  return text.size() > 5 && text.compare(text.size() - 5, 5, ".json") == 0;
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// Nothing to judge: exit 3, the reason on stderr and, with --json, as {"passed": false,
// "outcome": "not_measured", "error": ...} on stdout (what an Argo job's log shows).
int NotMeasured(const GateFlags& flags, const Status& status) {
  std::cerr << "fastpath gate: " << status.message() << "\n";
  if (flags.json) std::cout << gate::NotMeasuredJson(flags.run.model, status.message());
  return kExitGateNotMeasured;
}

}  // namespace

int Gate(const std::vector<std::string>& args) {
  GateFlags f;
  gate::GateOptions& o = f.run;
  CLI::App app{
      "Compares a candidate server's model with a baseline's (a live server, or one recorded "
      "with --record) before a rollout moves traffic: the canaries' seeded request, one at a "
      "time, in alternation, at batch 1 and at the model's max_batch_size; p95 latency, "
      "throughput, outputs and capability snapshots side by side. Both servers are KServe v2 "
      "HTTP addresses (http://HOST:PORT).",
      "fastpath gate"};
  UseHelpLayout(app, kGateUsage);
  app.footer(
      "Exit codes: 0 the candidate passed, 1 refused (a regression), 2 bad command line, 3 "
      "nothing could be judged (a server or the model unreachable, a request failed, a "
      "recorded baseline unreadable or of another request), 4 judged (the report printed) but "
      "--record could not be written.");
  app.option_defaults()->group("servers");
  AddText(app, "-m,--model", "NAME", &o.model, "the model to compare")->required();
  AddText(app, "--baseline", "URL|FILE", &o.baseline,
          "the version serving now: a server (http://HOST:PORT), or a file of --record")
      ->required();
  AddText(app, "--candidate", "URL", &o.candidate, "the version to roll out (http://HOST:PORT)");
  AddValue(app, "-i,--protocol", "http|grpc",
           "the timed requests' protocol (config, outputs and snapshots always over HTTP)", "http",
           [&o](const std::string& v) -> Status {
             auto t = bench::ParseTransport(v);
             if (!t.ok())
               return InvalidArgument("--protocol must be http or grpc, not '" + v + "'");
             o.transport = *t;
             return Status::Ok();
           });
  AddText(app, "--baseline-grpc", "HOST:PORT", &o.baseline_grpc,
          "the baseline's gRPC address with --protocol grpc (default: its host, port 8001)");
  AddText(app, "--candidate-grpc", "HOST:PORT", &o.candidate_grpc,
          "the candidate's gRPC address with --protocol grpc (default: its host, port 8001)");

  app.option_defaults()->group("limits (as fastpath.rollout.* in a config)");
  using admission::GateSetting;
  AddSetting(
      app, "--max-p95-ratio", "X", GateSetting::kMaxP95Ratio, "1.10",
      [&o](double v) { o.policy.max_p95_ratio = v; },
      "candidate p95 / baseline p95 at batch 1, at most");
  AddSetting(
      app, "--min-throughput-ratio", "X", GateSetting::kMinThroughputRatio, "0.90",
      [&o](double v) { o.policy.min_throughput_ratio = v; },
      "candidate / baseline inferences per second at the largest batch, at least");
  AddSetting(
      app, "--output-tolerance", "X", GateSetting::kOutputTolerance, "",
      [&o](double v) { o.policy.output_tolerance = v; },
      "largest relative difference of an output element (0: identical); unset, outputs are "
      "reported, not judged");
  CLI::Option* rounds = AddSetting(
      app, "--rounds", "N", GateSetting::kRounds, std::to_string(o.policy.rounds),
      [&o](double v) { o.policy.rounds = static_cast<uint32_t>(v); },
      "alternations per batch size (default with --baseline FILE: as many as recorded)");
  AddSwitch(app, "--require-same-hardware", &o.require_same_hardware,
            "refuse when the capability snapshots show another GPU, driver, CUDA, MIG "
            "partition, power limit or CPU allowance (reported only, otherwise)");

  app.option_defaults()->group("output");
  AddSwitch(app, "--json", &f.json, "print the verdict as JSON");
  AddText(app, "--record", "FILE", &f.record,
          "write the baseline's measurement, for a later --baseline FILE");
  if (auto exit_code = ParseCommandLine(app, args)) return *exit_code;

  // What depends on values.
  o.baseline_is_file = IsRecordFile(o.baseline);
  o.rounds_given = rounds->count() > 0;
  if (o.baseline_is_file) {
    std::error_code ec;
    if (!fs::is_regular_file(o.baseline, ec)) {
      return UsageError(app, "--baseline '" + o.baseline + "': no such file");
    }
    if (!f.record.empty()) {
      return UsageError(app, "--record measures a live baseline; --baseline '" + o.baseline +
                                 "' is already a recorded one");
    }
    if (o.candidate.empty()) return UsageError(app, "--candidate is required");
    if (!o.baseline_grpc.empty()) {
      return UsageError(app, "--baseline-grpc names a live server; --baseline is a file");
    }
  } else if (o.candidate.empty() && f.record.empty()) {
    return UsageError(app,
                      "--candidate is required (or --record FILE alone, to record the "
                      "baseline for later)");
  }
  if (o.transport == bench::Transport::kHttp &&
      (!o.baseline_grpc.empty() || !o.candidate_grpc.empty())) {
    return UsageError(app, "--baseline-grpc and --candidate-grpc need --protocol grpc");
  }

  // Known before minutes of measuring: a record that cannot be written.
  if (!f.record.empty()) {
    std::error_code ec;
    const fs::path folder = fs::absolute(fs::path(f.record)).parent_path();
    if (!fs::is_directory(folder, ec)) {
      return UsageError(app, "--record '" + f.record + "': no folder " + folder.string());
    }
    if (access(folder.c_str(), W_OK) != 0) {
      return UsageError(app, "--record '" + f.record + "': cannot write in " + folder.string());
    }
  }

  gate::GateRun run = gate::RunGate(o);
  if (run.end == gate::GateEnd::kBadRequest) return UsageError(app, run.error.message());
  if (run.end == gate::GateEnd::kNotMeasured) return NotMeasured(f, run.error);
  const gate::GateResult& result = run.result;

  Status record_error = Status::Ok();
  if (!f.record.empty()) {
    gate::GateRecord out;
    out.model = o.model;
    out.protocol = bench::TransportName(o.transport);
    out.recorded_at = UtcNow();
    out.side = result.baseline_side;
    record_error = WriteFileAtomically(f.record, gate::RecordToJson(out));
    if (record_error.ok()) {
      std::cerr << "fastpath gate: recorded the baseline " << result.baseline_side.source << " ("
                << result.rounds << " rounds per batch size) in " << f.record << "\n";
    }
  }
  // What was judged is printed even when the record could not be written.
  if (run.end != gate::GateEnd::kMeasured) {
    std::cout << (f.json ? gate::JsonReport(result) : gate::TextReport(result)) << std::flush;
  }
  if (!record_error.ok()) {
    std::cerr << "fastpath gate: --record: " << record_error.message() << "\n";
    return kExitGateRecordFailed;
  }
  if (run.end == gate::GateEnd::kMeasured) return kExitOk;
  return result.verdict.passed ? kExitOk : kExitGateRefused;
}

}  // namespace fastpath::cli
