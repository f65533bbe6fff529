// One comparison of `fastpath gate`: see gate_run.h.
#include "gate_run.h"

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "cli.h"

namespace fastpath::cli::gate {
namespace {

// Untimed round trips of each request before the rounds: a new connection, the model's first
// runs (allocations, lazy initialization) are not what a rollout changes.
constexpr int kWarmupRuns = 3;

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

struct Percentiles {
  double p50 = 0, p95 = 0;
};
Percentiles Of(const std::vector<double>& ms) {
  return {admission::Percentile(ms, 50), admission::Percentile(ms, 95)};
}

std::string SnapshotLine(const SnapshotComparison& s) {
  if (!s.compared) return "not compared: " + s.note;
  if (s.changes.empty()) return "identical (clock and ECC readings aside)";
  std::string line = std::to_string(s.changes.size()) + " difference" +
                     (s.changes.size() == 1 ? "" : "s") + " (clock and ECC readings aside)";
  if (!s.hardware.empty()) {
    line += "; the hardware or driver differs, so the timings are not like for like";
  }
  return line;
}

}  // namespace

std::string SettingName(const GateOptions& options, const std::string& flag) {
  std::string name = flag;
  std::replace(name.begin(), name.end(), options.query_names ? '-' : '_',
               options.query_names ? '_' : '-');
  return options.query_names ? name : "--" + name;
}

GateRun RunGate(const GateOptions& o) {
  GateRun run;
  auto bad_request = [&run](std::string message) {
    run.end = GateEnd::kBadRequest;
    run.error = InvalidArgument(std::move(message));
    return std::move(run);
  };
  auto not_measured = [&run](Status status) {
    run.end = GateEnd::kNotMeasured;
    run.error = std::move(status);
    return std::move(run);
  };
  const std::string baseline_name = SettingName(o, "baseline");
  auto spec = [&](const std::string& role, const std::string& url,
                  const std::string& grpc) -> StatusOr<ServerSpec> {
    ServerSpec s;
    s.role = role;
    s.model = o.model;
    s.transport = o.transport;
    FASTPATH_ASSIGN_OR_RETURN(s.http, ParseServer(SettingName(o, role), url, 8000));
    if (o.transport == bench::Transport::kGrpc) {
      if (grpc.empty()) {
        s.grpc = s.http;
        s.grpc.port = 8001;
      } else {
        FASTPATH_ASSIGN_OR_RETURN(s.grpc, ParseServer(SettingName(o, role + "-grpc"), grpc, 8001));
      }
    }
    return s;
  };
  std::optional<ServerSpec> baseline_spec, candidate_spec;
  if (!o.baseline_is_file) {
    auto s = spec("baseline", o.baseline, o.baseline_grpc);
    if (!s.ok()) return bad_request(s.status().message());
    baseline_spec = *s;
  }
  if (!o.candidate.empty()) {
    auto s = spec("candidate", o.candidate, o.candidate_grpc);
    if (!s.ok()) return bad_request(s.status().message());
    candidate_spec = *s;
  }

  GateResult& result = run.result;
  result.model = o.model;
  result.transport = o.transport;
  result.policy = o.policy;
  result.rounds = o.policy.rounds;

  // The recorded baseline, read before any server is asked.
  std::optional<GateRecord> recorded;
  if (o.baseline_is_file) {
    auto text = ReadTextFile(o.baseline);
    if (!text.ok()) return not_measured(text.status());
    auto parsed = RecordFromJson(*text, o.baseline);
    if (!parsed.ok()) return not_measured(parsed.status());
    if (parsed->model != o.model) {
      return bad_request(baseline_name + " '" + o.baseline + "' records model '" + parsed->model +
                         "', not " + SettingName(o, "model") + " '" + o.model + "'");
    }
    if (parsed->protocol != bench::TransportName(o.transport)) {
      return bad_request(baseline_name + " '" + o.baseline + "' was recorded over " +
                         parsed->protocol + ": give " + SettingName(o, "protocol") + " " +
                         parsed->protocol + " (round trips of two protocols are not comparable)");
    }
    if (parsed->seed != kCanarySeed) {
      return not_measured(InvalidArgument(baseline_name + " '" + o.baseline +
                                          "' was recorded with another request seed; record "
                                          "the baseline again with this fastpath"));
    }
    if (!o.rounds_given) result.rounds = static_cast<uint32_t>(parsed->side.requests[0].ms.size());
    result.recorded_baseline = true;
    result.recorded_at = parsed->recorded_at;
    result.baseline = parsed->side.source + " (recorded in " + o.baseline + ")";
    recorded = std::move(parsed).value();
  }

  std::unique_ptr<GateServer> baseline, candidate;
  if (baseline_spec) {
    auto s = GateServer::Connect(*baseline_spec);
    if (!s.ok()) return not_measured(s.status());
    baseline = std::move(s).value();
    result.baseline = baseline->describe();
  }
  if (candidate_spec) {
    auto s = GateServer::Connect(*candidate_spec);
    if (!s.ok()) return not_measured(s.status());
    candidate = std::move(s).value();
    result.candidate = candidate->describe();
  }
  // The request comes from the candidate's config (the version to roll out), else the
  // baseline's when only recording.
  GateServer& source = candidate ? *candidate : *baseline;
  auto config = source.Config();
  if (!config.ok()) return not_measured(config.status());

  uint64_t batch_rows = config->max_batch_size() > 1 ? config->max_batch_size() : 0;
  if (baseline && candidate) {
    // Asked of the baseline too: both servers see the same requests in the same order (see
    // kConnections), and the largest batch is one both take.
    auto baseline_config = baseline->Config();
    if (!baseline_config.ok()) return not_measured(baseline_config.status());
    const auto rows = static_cast<uint64_t>(std::max(baseline_config->max_batch_size(), 0));
    batch_rows = std::min(batch_rows, rows > 1 ? rows : 0);
  }
  if (recorded) {
    batch_rows = recorded->side.requests.size() > 1 ? recorded->side.requests[1].rows : 0;
    if (batch_rows > 0 && static_cast<uint64_t>(config->max_batch_size()) < batch_rows) {
      return not_measured(FailedPrecondition(
          "the baseline was recorded at batch " + std::to_string(batch_rows) +
          ", the candidate's max_batch_size is " + std::to_string(config->max_batch_size()) +
          ": record the baseline again, or compare two live servers"));
    }
  }
  auto requests = MakeGateRequests(*config, batch_rows);
  if (!requests.ok()) return not_measured(requests.status());
  if (recorded) {
    for (size_t i = 0; i < requests->size(); ++i) {
      if (i >= recorded->side.requests.size() ||
          recorded->side.requests[i].inputs_checksum != (*requests)[i].inputs_checksum) {
        return not_measured(FailedPrecondition(
            "the recorded baseline's request at batch " + std::to_string((*requests)[i].rows) +
            " differs from the candidate's (another input name, datatype, "
            "shape or warm-up data): record the baseline again"));
      }
    }
  }

  SideMeasurement& baseline_side = result.baseline_side;
  SideMeasurement candidate_side;
  if (baseline) {
    if (Status s = baseline->Prepare(*requests, kWarmupRuns, &baseline_side); !s.ok()) {
      return not_measured(s);
    }
    baseline_side.snapshot_json = baseline->CapabilitySnapshot();
  }
  if (candidate) {
    if (Status s = candidate->Prepare(*requests, kWarmupRuns, &candidate_side); !s.ok()) {
      return not_measured(s);
    }
    candidate_side.snapshot_json = candidate->CapabilitySnapshot();
    Status measured =
        MeasureRounds(baseline.get(), *candidate, result.rounds, &baseline_side, &candidate_side);
    if (!measured.ok()) return not_measured(measured);
  } else {
    Status measured = MeasureRounds(nullptr, *baseline, result.rounds, nullptr, &baseline_side);
    if (!measured.ok()) return not_measured(measured);
    run.end = GateEnd::kMeasured;
    return run;
  }
  if (recorded) baseline_side = recorded->side;

  admission::GateSamples& samples = result.samples;
  samples.rows = baseline_side.requests[0].rows;
  samples.baseline_ms = baseline_side.requests[0].ms;
  samples.candidate_ms = candidate_side.requests[0].ms;
  if (candidate_side.requests.size() > 1) {
    samples.batch_rows = candidate_side.requests[1].rows;
    samples.baseline_batch_ms = baseline_side.requests[1].ms;
    samples.candidate_batch_ms = candidate_side.requests[1].ms;
  }
  const OutputComparison outputs = CompareOutputs(baseline_side, candidate_side);
  samples.output_difference = outputs.difference;
  samples.output_difference_detail = outputs.detail;
  result.snapshots = CompareSnapshots(baseline_side.snapshot_json, candidate_side.snapshot_json);

  result.verdict = admission::JudgeGate(o.policy, samples);
  if (o.require_same_hardware && !result.snapshots.hardware.empty()) {
    std::string paths;
    for (const std::string& p : result.snapshots.hardware) paths += (paths.empty() ? "" : ", ") + p;
    result.verdict.failures.push_back("the servers' hardware or driver differs (" + paths +
                                      "), and " + SettingName(o, "require-same-hardware") +
                                      " asks for like with like");
    result.verdict.passed = false;
  }
  run.end = GateEnd::kJudged;
  return run;
}

std::string TextReport(const GateResult& r) {
  std::ostringstream out;
  const admission::GateVerdict& v = r.verdict;
  out << "fastpath gate: model '" << r.model << "', candidate " << r.candidate
      << " against baseline " << r.baseline << "\n";
  out << "  " << r.rounds << " rounds per batch size, one request at a time over "
      << bench::TransportName(r.transport) << ", the canaries' request (seed 0x" << std::hex
      << kCanarySeed << std::dec << "); "
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

std::string JsonReport(const GateResult& r) {
  const admission::GateVerdict& v = r.verdict;
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.SetIndent(' ', 2);
  w.StartObject();
  w.Key("passed");
  w.Bool(v.passed);
  Str(w, "outcome", v.passed ? "passed" : "refused");
  Str(w, "model", r.model);
  Str(w, "baseline", r.baseline);
  Str(w, "candidate", r.candidate);
  w.Key("baseline_recorded");
  w.Bool(r.recorded_baseline);
  w.Key("interleaved");
  w.Bool(!r.recorded_baseline);
  Str(w, "protocol", bench::TransportName(r.transport));
  w.Key("seed");
  w.Uint64(kCanarySeed);
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

std::string NotMeasuredJson(const std::string& model, const std::string& error) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.SetIndent(' ', 2);
  w.StartObject();
  w.Key("passed");
  w.Bool(false);
  Str(w, "outcome", "not_measured");
  Str(w, "model", model);
  Str(w, "error", error);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

}  // namespace fastpath::cli::gate
