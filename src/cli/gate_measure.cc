// `fastpath gate`'s measurement: see gate_measure.h.
#include "gate_measure.h"

#include <google/protobuf/util/json_util.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <set>

#include "fastpath/admission/accuracy_guard.h"
#include "fastpath/admission/self_test.h"
#include "fastpath/bench/http_once.h"
#include "fastpath/common/json.h"

namespace fastpath::cli::gate {
namespace {

// A config or an admission report answers at once; a model's outputs may take as long as its
// run (a large batch on a slow device). A server that does not answer within these is down
// for the gate's purpose.
constexpr std::chrono::seconds kGetTimeout{30};
constexpr std::chrono::seconds kInferTimeout{120};
constexpr double kInfinite = std::numeric_limits<double>::infinity();

std::string RowsText(uint64_t rows) { return "batch " + std::to_string(rows); }

bool IsFloat(DataType dtype) {
  return dtype == DataType::kFp16 || dtype == DataType::kBf16 || dtype == DataType::kFp32 ||
         dtype == DataType::kFp64;
}

// The path of a snapshot change without its array indices and names:
// "nvml.devices[0].name" -> "nvml.devices.name".
std::string Generic(const std::string& path) {
  std::string out;
  int depth = 0;
  for (char c : path) {
    if (c == '[') ++depth;
    if (depth == 0) out += c;
    if (c == ']') --depth;
  }
  return out;
}

std::string LastKey(const std::string& generic) {
  const size_t dot = generic.rfind('.');
  return dot == std::string::npos ? generic : generic.substr(dot + 1);
}

}  // namespace

StatusOr<std::vector<GateRequest>> MakeGateRequests(const inference::ModelConfig& config,
                                                    uint64_t batch_rows) {
  std::vector<uint64_t> rows = {1};
  if (batch_rows > 1) rows.push_back(batch_rows);
  std::vector<GateRequest> out;
  for (uint64_t r : rows) {
    // No model folder here: a model_warmup that reads input_data_file cannot be built from a
    // remote config, and says so.
    auto request = admission::MakeSeededRequest(config, "", static_cast<uint32_t>(r), kCanarySeed);
    if (!request.ok()) {
      return InvalidArgument("cannot build the canary request of model '" + config.name() +
                             "' at " + RowsText(r) + ": " + request.status().message());
    }
    GateRequest g;
    g.rows = r;
    g.inputs = std::move(request->inputs);
    std::string identity;
    for (const Tensor& t : g.inputs) {
      identity += t.name + '\0' + std::string(DataTypeName(t.dtype)) + '\0' +
                  ShapeToString(t.shape) + '\0' + Checksum(t.data) + '\0';
    }
    g.inputs_checksum = Checksum(identity);
    out.push_back(std::move(g));
  }
  return out;
}

StatusOr<std::unique_ptr<GateServer>> GateServer::Connect(const ServerSpec& spec) {
  std::unique_ptr<GateServer> server(new GateServer(spec));
  server->describe_ = bench::DescribeServer(spec.http);
  const std::string who = "the " + spec.role + " " + server->describe_;
  // The HTTP target answers the model's metadata in any case: whether the server is up and
  // knows the model, and the outputs to ask for.
  auto http = bench::MakeHttpTarget(spec.http, bench::Encoding::kBinary, spec.model, "");
  if (!http.ok()) return http.status().WithContext(who);
  auto metadata = (*http)->Metadata();
  if (!metadata.ok()) {
    if (metadata.status().code() == StatusCode::kNotFound) {
      return NotFound(who + " does not serve model '" + spec.model +
                      "': check --model, and that the model is loaded there (GET /v2/models/" +
                      spec.model + ")");
    }
    return Status(metadata.status().code(), who + ": " + metadata.status().message());
  }
  for (const backend::TensorSpec& o : metadata->outputs) server->output_names_.push_back(o.name);
  if (spec.transport == bench::Transport::kGrpc) {
    auto grpc = bench::MakeGrpcTarget(spec.grpc, spec.model, "");
    if (!grpc.ok()) return grpc.status().WithContext(who + " (gRPC)");
    auto grpc_metadata = (*grpc)->Metadata();
    if (!grpc_metadata.ok()) {
      return Status(grpc_metadata.status().code(), who + ", over gRPC at " + spec.grpc.host + ":" +
                                                       std::to_string(spec.grpc.port) + ": " +
                                                       grpc_metadata.status().message());
    }
    server->target_ = std::move(grpc).value();
  } else {
    server->target_ = std::move(http).value();
  }
  return server;
}

StatusOr<inference::ModelConfig> GateServer::Config() {
  const std::string path = "/v2/models/" + spec_.model + "/config";
  auto body = bench::GetOnce(spec_.http, path, kGetTimeout);
  if (!body.ok()) {
    return Status(body.status().code(),
                  "the " + spec_.role + "'s model config: " + body.status().message());
  }
  inference::ModelConfig config;
  google::protobuf::util::JsonParseOptions options;
  // A newer server, or another KServe v2 server, may render fields this build does not know.
  options.ignore_unknown_fields = true;
  const auto parsed = google::protobuf::util::JsonStringToMessage(*body, &config, options);
  if (!parsed.ok()) {
    return Internal("GET " + describe_ + path + " is not a model config: " + parsed.ToString());
  }
  return config;
}

std::string GateServer::CapabilitySnapshot() {
  auto body = bench::GetOnce(spec_.http, "/v2/health/admission", kGetTimeout);
  if (!body.ok()) return "";
  rapidjson::Document doc;
  if (!json::ParseBounded(&doc, *body).empty() || !doc.IsObject()) return "";
  const auto it = doc.FindMember("capability_snapshot");
  if (it == doc.MemberEnd() || !it->value.IsObject()) return "";
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  it->value.Accept(w);
  return std::string(buffer.GetString(), buffer.GetSize());
}

Status GateServer::Prepare(const std::vector<GateRequest>& requests, int warmup_runs,
                           SideMeasurement* measurement) {
  const std::string who = "the " + spec_.role + " " + describe_;
  std::vector<std::vector<Tensor>> inputs;
  for (const GateRequest& r : requests) inputs.push_back(r.inputs);
  FASTPATH_RETURN_IF_ERROR(target_->Prepare(inputs).WithContext(who));
  sessions_.clear();
  for (int c = 0; c < kConnections; ++c) {
    auto session = target_->NewSession();
    if (!session.ok()) return session.status().WithContext(who);
    sessions_.push_back(std::move(session).value());
  }
  measurement->source = describe_;
  measurement->requests.clear();
  for (size_t i = 0; i < requests.size(); ++i) {
    RequestMeasurement m;
    m.rows = requests[i].rows;
    m.inputs_checksum = requests[i].inputs_checksum;
    auto outputs =
        bench::InferOnce(spec_.http, spec_.model, requests[i].inputs, output_names_, kInferTimeout);
    if (!outputs.ok()) {
      return Status(outputs.status().code(), who + " failed the canary request at " +
                                                 RowsText(m.rows) + ": " +
                                                 outputs.status().message());
    }
    m.outputs = std::move(outputs).value();
    // Every connection at least once: the first request on one pays for connecting.
    for (int run = 0; run < std::max(warmup_runs, kConnections); ++run) {
      FASTPATH_RETURN_IF_ERROR(Time(i, static_cast<uint32_t>(run)).status());
    }
    measurement->requests.push_back(std::move(m));
  }
  return Status::Ok();
}

StatusOr<double> GateServer::Time(size_t index, uint32_t round) {
  bench::InferSession& session = *sessions_[round % sessions_.size()];
  const auto sent = std::chrono::steady_clock::now();
  const bench::InferOutcome outcome = session.Infer(index);
  const auto answered = std::chrono::steady_clock::now();
  if (!outcome.ok) {
    const StatusCode code = outcome.kind == "connect" || outcome.kind == "io"
                                ? StatusCode::kUnavailable
                                : StatusCode::kFailedPrecondition;
    return Status(code, "the " + spec_.role + " " + describe_ + " failed a timed request (" +
                            outcome.kind + "): " + outcome.message);
  }
  return std::chrono::duration<double, std::milli>(answered - sent).count();
}

Status MeasureRounds(GateServer* baseline, GateServer& candidate, uint32_t rounds,
                     SideMeasurement* baseline_measurement,
                     SideMeasurement* candidate_measurement) {
  for (size_t i = 0; i < candidate_measurement->requests.size(); ++i) {
    for (uint32_t round = 0; round < rounds; ++round) {
      const bool baseline_first = round % 2 == 0;
      for (int turn = 0; turn < 2; ++turn) {
        const bool is_baseline = (turn == 0) == baseline_first;
        if (is_baseline && baseline == nullptr) continue;
        GateServer& server = is_baseline ? *baseline : candidate;
        SideMeasurement* side = is_baseline ? baseline_measurement : candidate_measurement;
        FASTPATH_ASSIGN_OR_RETURN(const double ms, server.Time(i, round));
        side->requests[i].ms.push_back(ms);
      }
    }
  }
  return Status::Ok();
}

OutputComparison CompareOutputs(const SideMeasurement& baseline, const SideMeasurement& candidate) {
  OutputComparison worst;
  auto note = [&](double difference, const std::string& detail) {
    if (difference > worst.difference ||
        (std::isnan(difference) && !std::isnan(worst.difference))) {
      worst.difference = difference;
      worst.detail = detail;
    }
  };
  const size_t n = std::min(baseline.requests.size(), candidate.requests.size());
  for (size_t i = 0; i < n; ++i) {
    const std::string at = " at " + RowsText(baseline.requests[i].rows);
    const std::vector<Tensor>& got = candidate.requests[i].outputs;
    for (const Tensor& want : baseline.requests[i].outputs) {
      const auto g = std::find_if(got.begin(), got.end(),
                                  [&](const Tensor& t) { return t.name == want.name; });
      if (g == got.end()) {
        note(kInfinite, "output '" + want.name + "' is missing from the candidate's answer" + at);
        continue;
      }
      if (g->dtype != want.dtype || g->shape != want.shape) {
        note(kInfinite, "output '" + want.name + "'" + at + " is " +
                            std::string(DataTypeName(g->dtype)) + " " + ShapeToString(g->shape) +
                            " on the candidate, " + std::string(DataTypeName(want.dtype)) + " " +
                            ShapeToString(want.shape) + " on the baseline");
        continue;
      }
      if (g->data == want.data) continue;
      if (want.dtype == DataType::kBytes) {
        note(kInfinite, "output '" + want.name + "'" + at + " differs (BYTES)");
        continue;
      }
      auto deviation = admission::WorstDeviation(*g, want, /*relative_floor=*/1.0);
      if (!deviation.ok()) {
        note(kInfinite, "output '" + want.name + "'" + at + ": " + deviation.status().message());
        continue;
      }
      note(deviation->difference,
           "output '" + want.name + "' element " + std::to_string(deviation->index) + at + ": " +
               admission::FormatNumber(deviation->value) + " on the candidate, " +
               admission::FormatNumber(deviation->reference) + " on the baseline" +
               (IsFloat(want.dtype) ? "" : " (integers)"));
    }
  }
  return worst;
}

SnapshotComparison CompareSnapshots(const std::string& baseline_json,
                                    const std::string& candidate_json) {
  SnapshotComparison out;
  if (baseline_json.empty() || candidate_json.empty()) {
    out.note = baseline_json.empty() && candidate_json.empty()
                   ? "neither server shows a capability snapshot"
                   : std::string("the ") + (baseline_json.empty() ? "baseline" : "candidate") +
                         " shows no capability snapshot (GET /v2/health/admission)";
    return out;
  }
  auto changes = admission::DiffSnapshots(baseline_json, "baseline", candidate_json, "candidate");
  if (!changes.ok()) {
    out.note = changes.status().message();
    return out;
  }
  out.compared = true;
  // Instantaneous readings: they differ between two samples of one GPU.
  static const std::set<std::string> kReadings = {
      "sm_clock_mhz",           "mem_clock_mhz",
      "clock_event_reasons",    "clock_event_reason_names",
      "ecc_corrected_volatile", "ecc_uncorrected_volatile"};
  // What makes one server faster than the other whatever model it runs.
  static const std::set<std::string> kHardware = {"driver.device_count",
                                                  "driver.cuda_version",
                                                  "driver.devices",
                                                  "driver.devices.name",
                                                  "driver.devices.compute_capability",
                                                  "driver.devices.total_memory_bytes",
                                                  "nvml.driver_version",
                                                  "nvml.devices",
                                                  "nvml.devices.name",
                                                  "nvml.devices.mig_enabled",
                                                  "nvml.devices.mig_instances",
                                                  "nvml.devices.power_limit_mw",
                                                  "container.allowed_cpus",
                                                  "container.cgroup_cpu_quota",
                                                  "container.mig_device",
                                                  "container.cuda_visible_devices"};
  for (admission::SnapshotChange& c : *changes) {
    const std::string generic = Generic(c.path);
    if (kReadings.count(LastKey(generic)) > 0) continue;
    if (kHardware.count(generic) > 0) out.hardware.push_back(c.path);
    out.changes.push_back(std::move(c));
  }
  return out;
}

}  // namespace fastpath::cli::gate
