// `fastpath gate` (issue 12 §3): a rollout's perf gate between two servers or deployments.
// The candidate server and the baseline (a live server, or a baseline recorded earlier with
// --record) are sent the servers' canary request, one at a time, in alternation, at batch 1
// and at the model's largest batch; their round trips are judged by admission::JudgeGate (the
// same judgement as the server's in-server gate), their outputs and capability snapshots are
// compared. Exit 0 pass, 1 refused, 2 usage, 3 nothing could be judged.
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "command_line.h"
#include "fastpath/admission/rollout_gate.h"
#include "gate_measure.h"

namespace fastpath::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kGateUsage =
    R"(usage: fastpath gate --model M --baseline URL|FILE --candidate URL [options]
       fastpath gate --model M --baseline URL --record FILE [options])";

// Untimed round trips of each request before the rounds: a new connection, the model's first
// runs (allocations, lazy initialization) are not what a rollout changes.
constexpr int kWarmupRuns = 3;

struct GateFlags {
  std::string model;
  std::string baseline;
  std::string candidate;
  std::string record;
  bench::Transport transport = bench::Transport::kHttp;
  std::string baseline_grpc;
  std::string candidate_grpc;
  admission::GatePolicy policy;
  bool json = false;
  bool require_same_hardware = false;
};

StatusOr<double> ParseNumber(const std::string& flag, const std::string& text, double lo,
                             double hi) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value) || value < lo ||
      value > hi) {
    char range[64];
    std::snprintf(range, sizeof range, "a number from %g to %g", lo, hi);
    return InvalidArgument(flag + " must be " + range + ", not '" + text + "'");
  }
  return value;
}

CLI::Option* AddNumber(CLI::App& app, const std::string& names, double lo, double hi,
                       const std::string& default_text, std::function<void(double)> set,
                       const std::string& help) {
  const std::string flag = names.substr(names.rfind(',') + 1);
  return AddValue(app, names, "X", help, default_text,
                  [flag, lo, hi, set = std::move(set)](const std::string& value) -> Status {
                    FASTPATH_ASSIGN_OR_RETURN(const double v, ParseNumber(flag, value, lo, hi));
                    set(v);
                    return Status::Ok();
                  });
}

std::string Figure(double value, const char* unit = "") {
  char text[48];
  if (std::isinf(value)) return "inf";
  std::snprintf(text, sizeof text,
                value >= 100  ? "%.0f%s"
                : value >= 10 ? "%.1f%s"
                              : "%.3f%s",
                value, unit);
  return text;
}

std::string Pad(std::string text, size_t n) {
  if (text.size() < n) text.resize(n, ' ');
  return text;
}

// A server address of a flag: "http://host:port" or "host:port"; the message names the flag.
StatusOr<bench::ServerAddress> ParseServer(const std::string& flag, const std::string& text,
                                           int default_port) {
  if (text.rfind("https://", 0) == 0) {
    return InvalidArgument(flag + " '" + text +
                           "': the gate speaks plain HTTP; give the server's in-cluster "
                           "address or a port-forward (http://HOST:PORT)");
  }
  auto address = bench::ParseAddress(text, default_port);
  if (!address.ok()) {
    std::string message = address.status().message();
    if (message.rfind("--url", 0) == 0) message = flag + message.substr(5);
    return InvalidArgument(message);
  }
  return address;
}

// --baseline is a recorded file when it names one (or ends in .json); a server otherwise.
bool IsRecordFile(const std::string& text) {
  if (text.find("://") != std::string::npos) return false;
  std::error_code ec;
  if (fs::is_regular_file(text, ec)) return true;
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

StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const char* ChangeKind(admission::SnapshotChange::Kind kind) {
  switch (kind) {
    case admission::SnapshotChange::Kind::kAdded:
      return "added";
    case admission::SnapshotChange::Kind::kRemoved:
      return "removed";
    default:
      return "changed";
  }
}

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
  gate::SnapshotComparison snapshots;
};

struct Percentiles {
  double p50 = 0, p95 = 0;
};
Percentiles Of(const std::vector<double>& ms) {
  return {admission::Percentile(ms, 50), admission::Percentile(ms, 95)};
}

std::string SnapshotLine(const gate::SnapshotComparison& s) {
  if (!s.compared) return "not compared: " + s.note;
  if (s.changes.empty()) return "identical (clock and ECC readings aside)";
  std::string line = std::to_string(s.changes.size()) + " difference" +
                     (s.changes.size() == 1 ? "" : "s") + " (clock and ECC readings aside)";
  if (!s.hardware.empty()) {
    line += "; the hardware or driver differs, so the timings are not like for like";
  }
  return line;
}

std::string TextReport(const GateResult& r) {
  std::ostringstream out;
  const admission::GateVerdict& v = r.verdict;
  out << "fastpath gate: model '" << r.model << "', candidate " << r.candidate
      << " against baseline " << r.baseline << "\n";
  out << "  " << r.rounds << " rounds per batch size, one request at a time over "
      << bench::TransportName(r.transport) << ", the canaries' request (seed 0x" << std::hex
      << gate::kCanarySeed << std::dec << "); "
      << (r.recorded_baseline ? "the baseline was recorded " + r.recorded_at + ", not interleaved"
                              : std::string("interleaved A B, B A, ..."))
      << "\n\n";
  out << "  " << Pad("", 22) << Pad("baseline", 14) << Pad("candidate", 14) << Pad("ratio", 9)
      << "limit\n";
  auto rows = [&](uint64_t batch, const std::vector<double>& a, const std::vector<double>& b,
                  bool judged) {
    const Percentiles pa = Of(a), pb = Of(b);
    const std::string label = "batch " + std::to_string(batch);
    out << "  " << Pad(label, 11) << Pad("p50", 11) << Pad(Figure(pa.p50, " ms"), 14)
        << Figure(pb.p50, " ms") << "\n";
    out << "  " << Pad("", 11) << Pad("p95", 11) << Pad(Figure(pa.p95, " ms"), 14)
        << Pad(Figure(pb.p95, " ms"), 14)
        << Pad(judged ? Figure(v.p95_ratio) : Figure(pa.p95 > 0 ? pb.p95 / pa.p95 : 0), 9)
        << (judged ? "<= " + Figure(r.policy.max_p95_ratio) : "(not judged)") << "\n";
  };
  rows(r.samples.rows, r.samples.baseline_ms, r.samples.candidate_ms, true);
  if (!r.samples.baseline_batch_ms.empty()) {
    rows(r.samples.batch_rows, r.samples.baseline_batch_ms, r.samples.candidate_batch_ms, false);
  }
  out << "  " << Pad("throughput at batch " + std::to_string(v.throughput_rows), 50)
      << Pad(Figure(v.throughput_ratio), 9) << ">= " << Figure(r.policy.min_throughput_ratio)
      << "\n";
  std::string outputs;
  if (!r.samples.output_difference) {
    outputs = "not compared";
  } else if (*r.samples.output_difference == 0) {
    outputs = "identical";
  } else {
    outputs = "largest relative difference " + Figure(*r.samples.output_difference) + ": " +
              r.samples.output_difference_detail;
  }
  out << "  " << Pad("outputs", 22) << outputs
      << (r.policy.output_tolerance ? " (tolerance " + Figure(*r.policy.output_tolerance) + ")"
                                    : std::string(" (not judged: no --output-tolerance)"))
      << "\n";
  out << "  " << Pad("capability snapshots", 22) << SnapshotLine(r.snapshots) << "\n";
  for (const admission::SnapshotChange& c : r.snapshots.changes) {
    const bool hardware = std::find(r.snapshots.hardware.begin(), r.snapshots.hardware.end(),
                                    c.path) != r.snapshots.hardware.end();
    out << "    " << Pad(ChangeKind(c.kind), 8) << c.path << "  "
        << (c.before.empty() ? "(absent)" : c.before) << " -> "
        << (c.after.empty() ? "(absent)" : c.after) << (hardware ? "  [hardware]" : "") << "\n";
  }
  out << "\n";
  if (v.passed) {
    out << "PASSED: the candidate is within the limits\n";
  } else {
    out << "REFUSED:\n";
    for (const std::string& f : v.failures) out << "  - " << f << "\n";
  }
  return out.str();
}

using JsonWriter = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

void Str(JsonWriter& w, const char* key, const std::string& value) {
  w.Key(key);
  w.String(value.c_str(), static_cast<rapidjson::SizeType>(value.size()));
}
void Num(JsonWriter& w, const char* key, double value) {
  w.Key(key);
  if (std::isfinite(value)) {
    w.Double(value);
  } else {
    w.Null();  // JSON has no infinity: a difference of shape or datatype
  }
}

std::string JsonReport(const GateResult& r) {
  const admission::GateVerdict& v = r.verdict;
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.SetIndent(' ', 2);
  w.StartObject();
  w.Key("passed");
  w.Bool(v.passed);
  Str(w, "model", r.model);
  Str(w, "baseline", r.baseline);
  Str(w, "candidate", r.candidate);
  w.Key("baseline_recorded");
  w.Bool(r.recorded_baseline);
  w.Key("interleaved");
  w.Bool(!r.recorded_baseline);
  Str(w, "protocol", bench::TransportName(r.transport));
  w.Key("seed");
  w.Uint64(gate::kCanarySeed);
  w.Key("rounds");
  w.Uint(r.rounds);
  w.Key("rows");
  w.Uint64(r.samples.rows);
  w.Key("batch_rows");
  w.Uint64(r.samples.batch_rows);
  Num(w, "p95_ratio", v.p95_ratio);
  Num(w, "throughput_ratio", v.throughput_ratio);
  w.Key("throughput_rows");
  w.Uint64(v.throughput_rows);
  Num(w, "baseline_p50_ms", v.baseline_p50_ms);
  Num(w, "baseline_p95_ms", v.baseline_p95_ms);
  Num(w, "candidate_p50_ms", v.candidate_p50_ms);
  Num(w, "candidate_p95_ms", v.candidate_p95_ms);
  w.Key("batch");
  if (r.samples.baseline_batch_ms.empty()) {
    w.Null();
  } else {
    const Percentiles a = Of(r.samples.baseline_batch_ms), b = Of(r.samples.candidate_batch_ms);
    w.StartObject();
    w.Key("rows");
    w.Uint64(r.samples.batch_rows);
    Num(w, "baseline_p50_ms", a.p50);
    Num(w, "baseline_p95_ms", a.p95);
    Num(w, "candidate_p50_ms", b.p50);
    Num(w, "candidate_p95_ms", b.p95);
    w.EndObject();
  }
  w.Key("limits");
  w.StartObject();
  Num(w, "max_p95_ratio", r.policy.max_p95_ratio);
  Num(w, "min_throughput_ratio", r.policy.min_throughput_ratio);
  w.Key("output_tolerance");
  if (r.policy.output_tolerance) {
    w.Double(*r.policy.output_tolerance);
  } else {
    w.Null();
  }
  w.EndObject();
  w.Key("output_difference");
  if (r.samples.output_difference) {
    if (std::isfinite(*r.samples.output_difference)) {
      w.Double(*r.samples.output_difference);
    } else {
      w.String("inf");
    }
  } else {
    w.Null();
  }
  Str(w, "output_difference_detail", r.samples.output_difference_detail);
  w.Key("failures");
  w.StartArray();
  for (const std::string& f : v.failures) w.String(f.c_str());
  w.EndArray();
  w.Key("snapshots");
  w.StartObject();
  w.Key("compared");
  w.Bool(r.snapshots.compared);
  Str(w, "note", r.snapshots.note);
  w.Key("comparable_hardware");
  w.Bool(r.snapshots.hardware.empty());
  w.Key("differences");
  w.StartArray();
  for (const admission::SnapshotChange& c : r.snapshots.changes) {
    w.StartObject();
    Str(w, "change", ChangeKind(c.kind));
    Str(w, "path", c.path);
    Str(w, "baseline", c.before);
    Str(w, "candidate", c.after);
    w.Key("hardware");
    w.Bool(std::find(r.snapshots.hardware.begin(), r.snapshots.hardware.end(), c.path) !=
           r.snapshots.hardware.end());
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  Str(w, "summary", v.summary);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

// Nothing to judge: exit 3, the reason on stderr and, with --json, as {"passed": false,
// "error": ...} on stdout (what an Argo job's log shows).
int NotMeasured(const GateFlags& flags, const Status& status) {
  std::cerr << "fastpath gate: " << status.message() << "\n";
  if (flags.json) {
    rapidjson::StringBuffer buffer;
    JsonWriter w(buffer);
    w.SetIndent(' ', 2);
    w.StartObject();
    w.Key("passed");
    w.Bool(false);
    Str(w, "model", flags.model);
    Str(w, "error", status.message());
    w.EndObject();
    std::cout << buffer.GetString() << "\n";
  }
  return kExitGateNotMeasured;
}

}  // namespace

int Gate(const std::vector<std::string>& args) {
  GateFlags f;
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
      "recorded baseline unreadable or of another request).");
  app.option_defaults()->group("servers");
  AddText(app, "-m,--model", "NAME", &f.model, "the model to compare")->required();
  AddText(app, "--baseline", "URL|FILE", &f.baseline,
          "the version serving now: a server (http://HOST:PORT), or a file of --record")
      ->required();
  CLI::Option* candidate = AddText(app, "--candidate", "URL", &f.candidate,
                                   "the version to roll out (http://HOST:PORT)");
  AddValue(app, "-i,--protocol", "http|grpc",
           "the timed requests' protocol (config, outputs and snapshots always over HTTP)", "http",
           [&f](const std::string& v) -> Status {
             auto t = bench::ParseTransport(v);
             if (!t.ok())
               return InvalidArgument("--protocol must be http or grpc, not '" + v + "'");
             f.transport = *t;
             return Status::Ok();
           });
  AddText(app, "--baseline-grpc", "HOST:PORT", &f.baseline_grpc,
          "the baseline's gRPC address with --protocol grpc (default: its host, port 8001)");
  AddText(app, "--candidate-grpc", "HOST:PORT", &f.candidate_grpc,
          "the candidate's gRPC address with --protocol grpc (default: its host, port 8001)");

  app.option_defaults()->group("limits (as fastpath.rollout.* in a config)");
  AddNumber(
      app, "--max-p95-ratio", 1, 100, "1.10", [&f](double v) { f.policy.max_p95_ratio = v; },
      "candidate p95 / baseline p95 at batch 1, at most");
  AddNumber(
      app, "--min-throughput-ratio", 0.01, 1, "0.90",
      [&f](double v) { f.policy.min_throughput_ratio = v; },
      "candidate / baseline inferences per second at the largest batch, at least");
  AddNumber(
      app, "--output-tolerance", 0, 1, "", [&f](double v) { f.policy.output_tolerance = v; },
      "largest relative difference of an output element (0: identical); unset, outputs are "
      "reported, not judged");
  CLI::Option* rounds = AddInt(
      app, "--rounds", "N", 5, 1000, f.policy.rounds,
      [&f](int64_t v) { f.policy.rounds = static_cast<uint32_t>(v); },
      "alternations per batch size (default with --baseline FILE: as many as recorded)");
  AddSwitch(app, "--require-same-hardware", &f.require_same_hardware,
            "refuse when the capability snapshots show another GPU, driver, CUDA, MIG "
            "partition, power limit or CPU allowance (reported only, otherwise)");

  app.option_defaults()->group("output");
  AddSwitch(app, "--json", &f.json, "print the verdict as JSON");
  CLI::Option* record = AddText(app, "--record", "FILE", &f.record,
                                "write the baseline's measurement, for a later --baseline FILE");
  (void)candidate;
  (void)record;
  if (auto exit_code = ParseCommandLine(app, args)) return *exit_code;

  // What depends on values.
  const bool baseline_is_file = IsRecordFile(f.baseline);
  if (baseline_is_file) {
    std::error_code ec;
    if (!fs::is_regular_file(f.baseline, ec)) {
      return UsageError(app, "--baseline '" + f.baseline + "': no such file");
    }
    if (!f.record.empty()) {
      return UsageError(app, "--record measures a live baseline; --baseline '" + f.baseline +
                                 "' is already a recorded one");
    }
    if (f.candidate.empty()) return UsageError(app, "--candidate is required");
    if (!f.baseline_grpc.empty()) {
      return UsageError(app, "--baseline-grpc names a live server; --baseline is a file");
    }
  } else if (f.candidate.empty() && f.record.empty()) {
    return UsageError(app,
                      "--candidate is required (or --record FILE alone, to record the "
                      "baseline for later)");
  }
  if (f.transport == bench::Transport::kHttp &&
      (!f.baseline_grpc.empty() || !f.candidate_grpc.empty())) {
    return UsageError(app, "--baseline-grpc and --candidate-grpc need --protocol grpc");
  }
  auto spec = [&](const std::string& role, const std::string& url,
                  const std::string& grpc) -> StatusOr<gate::ServerSpec> {
    gate::ServerSpec s;
    s.role = role;
    s.model = f.model;
    s.transport = f.transport;
    FASTPATH_ASSIGN_OR_RETURN(s.http, ParseServer("--" + role, url, 8000));
    if (f.transport == bench::Transport::kGrpc) {
      if (grpc.empty()) {
        s.grpc = s.http;
        s.grpc.port = 8001;
      } else {
        FASTPATH_ASSIGN_OR_RETURN(s.grpc, ParseServer("--" + role + "-grpc", grpc, 8001));
      }
    }
    return s;
  };
  std::optional<gate::ServerSpec> baseline_spec, candidate_spec;
  if (!baseline_is_file) {
    auto s = spec("baseline", f.baseline, f.baseline_grpc);
    if (!s.ok()) return UsageError(app, s.status().message());
    baseline_spec = *s;
  }
  if (!f.candidate.empty()) {
    auto s = spec("candidate", f.candidate, f.candidate_grpc);
    if (!s.ok()) return UsageError(app, s.status().message());
    candidate_spec = *s;
  }

  GateResult result;
  result.model = f.model;
  result.transport = f.transport;
  result.policy = f.policy;
  result.rounds = f.policy.rounds;

  // The recorded baseline, read before any server is asked.
  std::optional<gate::GateRecord> recorded;
  if (baseline_is_file) {
    auto text = ReadText(f.baseline);
    if (!text.ok()) return NotMeasured(f, text.status());
    auto parsed = gate::RecordFromJson(*text, f.baseline);
    if (!parsed.ok()) return NotMeasured(f, parsed.status());
    if (parsed->model != f.model) {
      return UsageError(app, "--baseline '" + f.baseline + "' records model '" + parsed->model +
                                 "', not --model '" + f.model + "'");
    }
    if (parsed->protocol != bench::TransportName(f.transport)) {
      return UsageError(app, "--baseline '" + f.baseline + "' was recorded over " +
                                 parsed->protocol + ": give --protocol " + parsed->protocol +
                                 " (round trips of two protocols are not comparable)");
    }
    if (parsed->seed != gate::kCanarySeed) {
      return NotMeasured(f, InvalidArgument("--baseline '" + f.baseline +
                                            "' was recorded with another request seed; record "
                                            "the baseline again with this fastpath"));
    }
    if (!rounds->count()) result.rounds = static_cast<uint32_t>(parsed->side.requests[0].ms.size());
    result.recorded_baseline = true;
    result.recorded_at = parsed->recorded_at;
    result.baseline = parsed->side.source + " (recorded in " + f.baseline + ")";
    recorded = std::move(parsed).value();
  }

  std::unique_ptr<gate::GateServer> baseline, candidate_server;
  if (baseline_spec) {
    auto s = gate::GateServer::Connect(*baseline_spec);
    if (!s.ok()) return NotMeasured(f, s.status());
    baseline = std::move(s).value();
    result.baseline = baseline->describe();
  }
  if (candidate_spec) {
    auto s = gate::GateServer::Connect(*candidate_spec);
    if (!s.ok()) return NotMeasured(f, s.status());
    candidate_server = std::move(s).value();
    result.candidate = candidate_server->describe();
  }
  // The request comes from the candidate's config (the version to roll out), else the
  // baseline's when only recording.
  gate::GateServer& source = candidate_server ? *candidate_server : *baseline;
  auto config = source.Config();
  if (!config.ok()) return NotMeasured(f, config.status());

  uint64_t batch_rows = config->max_batch_size() > 1 ? config->max_batch_size() : 0;
  if (baseline && candidate_server) {
    // Asked of the baseline too: both servers see the same requests in the same order (see
    // gate::kConnections), and the largest batch is one both take.
    auto baseline_config = baseline->Config();
    if (!baseline_config.ok()) return NotMeasured(f, baseline_config.status());
    const auto rows = static_cast<uint64_t>(std::max(baseline_config->max_batch_size(), 0));
    batch_rows = std::min(batch_rows, rows > 1 ? rows : 0);
  }
  if (recorded) {
    batch_rows = recorded->side.requests.size() > 1 ? recorded->side.requests[1].rows : 0;
    if (batch_rows > 0 && static_cast<uint64_t>(config->max_batch_size()) < batch_rows) {
      return NotMeasured(
          f, FailedPrecondition("the baseline was recorded at batch " + std::to_string(batch_rows) +
                                ", the candidate's max_batch_size is " +
                                std::to_string(config->max_batch_size()) +
                                ": record the baseline again, or compare two live servers"));
    }
  }
  auto requests = gate::MakeGateRequests(*config, batch_rows);
  if (!requests.ok()) return NotMeasured(f, requests.status());
  if (recorded) {
    for (size_t i = 0; i < requests->size(); ++i) {
      if (i >= recorded->side.requests.size() ||
          recorded->side.requests[i].inputs_checksum != (*requests)[i].inputs_checksum) {
        return NotMeasured(
            f, FailedPrecondition("the recorded baseline's request at batch " +
                                  std::to_string((*requests)[i].rows) +
                                  " differs from the candidate's (another input name, datatype, "
                                  "shape or warm-up data): record the baseline again"));
      }
    }
  }

  gate::SideMeasurement baseline_side, candidate_side;
  if (baseline) {
    if (Status s = baseline->Prepare(*requests, kWarmupRuns, &baseline_side); !s.ok()) {
      return NotMeasured(f, s);
    }
    baseline_side.snapshot_json = baseline->CapabilitySnapshot();
  }
  if (candidate_server) {
    if (Status s = candidate_server->Prepare(*requests, kWarmupRuns, &candidate_side); !s.ok()) {
      return NotMeasured(f, s);
    }
    candidate_side.snapshot_json = candidate_server->CapabilitySnapshot();
    Status measured = MeasureRounds(baseline.get(), *candidate_server, result.rounds,
                                    &baseline_side, &candidate_side);
    if (!measured.ok()) return NotMeasured(f, measured);
  } else {
    Status measured = MeasureRounds(nullptr, *baseline, result.rounds, nullptr, &baseline_side);
    if (!measured.ok()) return NotMeasured(f, measured);
  }
  if (recorded) baseline_side = recorded->side;

  if (!f.record.empty()) {
    gate::GateRecord out;
    out.model = f.model;
    out.protocol = bench::TransportName(f.transport);
    out.recorded_at = UtcNow();
    out.side = baseline_side;
    if (Status s = WriteFileAtomically(f.record, gate::RecordToJson(out)); !s.ok()) {
      std::cerr << "fastpath gate: --record: " << s.message() << "\n";
      return kExitRuntime;
    }
    std::cerr << "fastpath gate: recorded the baseline " << baseline_side.source << " ("
              << result.rounds << " rounds per batch size) in " << f.record << "\n";
    if (!candidate_server) return kExitOk;
  }

  admission::GateSamples& samples = result.samples;
  samples.rows = baseline_side.requests[0].rows;
  samples.baseline_ms = baseline_side.requests[0].ms;
  samples.candidate_ms = candidate_side.requests[0].ms;
  if (candidate_side.requests.size() > 1) {
    samples.batch_rows = candidate_side.requests[1].rows;
    samples.baseline_batch_ms = baseline_side.requests[1].ms;
    samples.candidate_batch_ms = candidate_side.requests[1].ms;
  }
  const gate::OutputComparison outputs = gate::CompareOutputs(baseline_side, candidate_side);
  samples.output_difference = outputs.difference;
  samples.output_difference_detail = outputs.detail;
  result.snapshots =
      gate::CompareSnapshots(baseline_side.snapshot_json, candidate_side.snapshot_json);

  result.verdict = admission::JudgeGate(f.policy, samples);
  if (f.require_same_hardware && !result.snapshots.hardware.empty()) {
    std::string paths;
    for (const std::string& p : result.snapshots.hardware) paths += (paths.empty() ? "" : ", ") + p;
    result.verdict.failures.push_back("the servers' hardware or driver differs (" + paths +
                                      "), and --require-same-hardware asks for like with like");
    result.verdict.passed = false;
  }
  std::cout << (f.json ? JsonReport(result) : TextReport(result));
  return result.verdict.passed ? kExitOk : kExitGateRefused;
}

}  // namespace fastpath::cli
