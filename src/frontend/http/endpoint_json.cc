#include "endpoint_json.h"

#include <cerrno>
#include <cstdlib>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>
#include <rapidjson/document.h>

#include "fastpath/common/dtype.h"
#include "json_reader.h"
#include "json_writer.h"

namespace fastpath::frontend::http {
namespace {

void WriteTensorMetadata(JsonWriter& w, const std::vector<server::TensorMetadata>& tensors) {
  w.StartArray();
  for (const auto& t : tensors) {
    w.StartObject();
    WriteKey(w, "name");
    WriteString(w, t.name);
    WriteKey(w, "datatype");
    WriteString(w, DataTypeName(t.dtype));
    WriteKey(w, "shape");
    w.StartArray();
    for (int64_t d : t.shape) w.Int64(d);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
}

void WriteDuration(JsonWriter& w, std::string_view key, const StatDuration& d) {
  WriteKey(w, key);
  w.StartObject();
  WriteKey(w, "count");
  w.Uint64(d.count);
  WriteKey(w, "ns");
  w.Uint64(d.ns);
  w.EndObject();
}

std::string Finish(const rapidjson::StringBuffer& buffer) {
  return std::string(buffer.GetString(), buffer.GetSize());
}

// Protobuf's JSON mapping writes (u)int64 as strings; Triton rewrites them as numbers and
// its clients expect that. Walks the JSON alongside the message descriptor so that only
// fields declared 64-bit are touched.
void NumberInt64Fields(const google::protobuf::Descriptor* descriptor, rapidjson::Value& object);

void NumberInt64Value(const google::protobuf::FieldDescriptor* field, rapidjson::Value& v) {
  using FD = google::protobuf::FieldDescriptor;
  if (field->cpp_type() == FD::CPPTYPE_MESSAGE) {
    if (v.IsObject()) NumberInt64Fields(field->message_type(), v);
    return;
  }
  if (!v.IsString()) return;
  errno = 0;
  char* end = nullptr;
  if (field->cpp_type() == FD::CPPTYPE_INT64) {
    const long long n = std::strtoll(v.GetString(), &end, 10);
    if (errno == 0 && end != v.GetString() && *end == '\0') v.SetInt64(n);
  } else if (field->cpp_type() == FD::CPPTYPE_UINT64) {
    const unsigned long long n = std::strtoull(v.GetString(), &end, 10);
    if (errno == 0 && end != v.GetString() && *end == '\0') v.SetUint64(n);
  }
}

void NumberInt64Fields(const google::protobuf::Descriptor* descriptor, rapidjson::Value& object) {
  for (auto& member : object.GetObject()) {
    const auto* field = descriptor->FindFieldByName(member.name.GetString());
    if (field == nullptr) continue;
    rapidjson::Value& v = member.value;
    if (field->is_map()) {
      // A map is a JSON object whose values have the type of the entry's "value" field.
      const auto* value_field = field->message_type()->map_value();
      if (v.IsObject()) {
        for (auto& entry : v.GetObject()) NumberInt64Value(value_field, entry.value);
      }
    } else if (field->is_repeated()) {
      if (v.IsArray()) {
        for (auto& e : v.GetArray()) NumberInt64Value(field, e);
      }
    } else {
      NumberInt64Value(field, v);
    }
  }
}

}  // namespace

std::string ServerMetadataJson(const server::ServerMetadata& metadata) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  WriteKey(w, "name");
  WriteString(w, metadata.name);
  WriteKey(w, "version");
  WriteString(w, metadata.version);
  WriteKey(w, "extensions");
  w.StartArray();
  for (const auto& e : metadata.extensions) WriteString(w, e);
  w.EndArray();
  w.EndObject();
  return Finish(buffer);
}

std::string ModelMetadataJson(const server::ModelMetadata& metadata) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  WriteKey(w, "name");
  WriteString(w, metadata.name);
  WriteKey(w, "versions");
  w.StartArray();
  for (const auto& v : metadata.versions) WriteString(w, v);
  w.EndArray();
  WriteKey(w, "platform");
  WriteString(w, metadata.platform);
  WriteKey(w, "inputs");
  WriteTensorMetadata(w, metadata.inputs);
  WriteKey(w, "outputs");
  WriteTensorMetadata(w, metadata.outputs);
  w.EndObject();
  return Finish(buffer);
}

std::string ModelStatisticsJson(const std::vector<ModelStatistics>& stats) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  WriteKey(w, "model_stats");
  w.StartArray();
  for (const auto& s : stats) {
    w.StartObject();
    WriteKey(w, "name");
    WriteString(w, s.name);
    WriteKey(w, "version");
    WriteString(w, s.version);
    WriteKey(w, "last_inference");
    w.Uint64(s.last_inference_ms);
    WriteKey(w, "inference_count");
    w.Uint64(s.inference_count);
    WriteKey(w, "execution_count");
    w.Uint64(s.execution_count);
    WriteKey(w, "inference_stats");
    w.StartObject();
    const auto& is = s.inference_stats;
    WriteDuration(w, "success", is.success);
    WriteDuration(w, "fail", is.fail);
    WriteDuration(w, "queue", is.queue);
    WriteDuration(w, "compute_input", is.compute_input);
    WriteDuration(w, "compute_infer", is.compute_infer);
    WriteDuration(w, "compute_output", is.compute_output);
    // fastpath has no response cache; Triton always reports these and perf_analyzer
    // reads them.
    WriteDuration(w, "cache_hit", {});
    WriteDuration(w, "cache_miss", {});
    w.EndObject();
    WriteKey(w, "batch_stats");
    w.StartArray();
    for (const auto& b : s.batch_stats) {
      w.StartObject();
      WriteKey(w, "batch_size");
      w.Uint64(b.batch_size);
      WriteDuration(w, "compute_input", b.compute_input);
      WriteDuration(w, "compute_infer", b.compute_infer);
      WriteDuration(w, "compute_output", b.compute_output);
      w.EndObject();
    }
    w.EndArray();
    // Triton always lists the model's memory use; fastpath does not track it yet.
    WriteKey(w, "memory_usage");
    w.StartArray();
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return Finish(buffer);
}

std::string RepositoryIndexJson(const std::vector<server::RepositoryEntry>& entries) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartArray();
  for (const auto& e : entries) {
    w.StartObject();
    WriteKey(w, "name");
    WriteString(w, e.name);
    if (!e.version.empty()) {
      WriteKey(w, "version");
      WriteString(w, e.version);
    }
    WriteKey(w, "state");
    WriteString(w, server::ModelStateName(e.state));
    WriteKey(w, "reason");
    WriteString(w, e.reason);
    w.EndObject();
  }
  w.EndArray();
  return Finish(buffer);
}

std::string RolloutHistoryJson(const std::string& model,
                               const std::vector<server::RolloutDecision>& decisions) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  WriteKey(w, "name");
  WriteString(w, model);
  WriteKey(w, "decisions");
  w.StartArray();
  for (const server::RolloutDecision& d : decisions) {
    w.StartObject();
    WriteKey(w, "candidate_version");
    w.Int64(d.candidate_version);
    WriteKey(w, "baseline_version");
    if (d.outcome == server::RolloutDecision::Outcome::kNoBaseline) {
      w.Null();
    } else {
      w.Int64(d.baseline_version);
    }
    WriteKey(w, "outcome");
    WriteString(w, server::RolloutOutcomeName(d.outcome));
    WriteKey(w, "unix_ms");
    w.Int64(d.unix_ms);
    WriteKey(w, "detail");
    WriteString(w, d.detail);
    WriteKey(w, "verdict");
    if (!d.verdict) {
      w.Null();
    } else {
      const admission::GateVerdict& v = *d.verdict;
      w.StartObject();
      WriteKey(w, "passed");
      w.Bool(v.passed);
      const std::pair<const char*, double> figures[] = {
          {"p95_ratio", v.p95_ratio},
          {"throughput_ratio", v.throughput_ratio},
          {"p95_ratio_low", v.p95_ratio_low},
          {"p95_ratio_high", v.p95_ratio_high},
          {"throughput_ratio_low", v.throughput_ratio_low},
          {"throughput_ratio_high", v.throughput_ratio_high},
          {"candidate_p50_ms", v.candidate_p50_ms},
          {"candidate_p95_ms", v.candidate_p95_ms},
          {"baseline_p50_ms", v.baseline_p50_ms},
          {"baseline_p95_ms", v.baseline_p95_ms},
      };
      for (const auto& [key, value] : figures) {
        WriteKey(w, key);
        w.Double(value);
      }
      WriteKey(w, "throughput_batch_size");
      w.Uint64(v.throughput_rows);
      WriteKey(w, "failures");
      w.StartArray();
      for (const std::string& f : v.failures) WriteString(w, f);
      w.EndArray();
      w.EndObject();
    }
    // The canary phase's end (promoted, rolled_back): both loads' error rates and p95 ratio
    // (0 when the p95 was not judged).
    WriteKey(w, "canary");
    if (!d.canary) {
      w.Null();
    } else {
      const admission::CanaryVerdict& c = *d.canary;
      w.StartObject();
      const std::pair<const char*, double> figures[] = {
          {"candidate_error_rate", c.candidate_error_rate},
          {"stable_error_rate", c.stable_error_rate},
          {"p95_ratio", c.p95_ratio},
          {"p95_ratio_low", c.p95_ratio_low},
          {"p95_ratio_high", c.p95_ratio_high},
      };
      for (const auto& [key, value] : figures) {
        WriteKey(w, key);
        w.Double(value);
      }
      w.EndObject();
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return Finish(buffer);
}

StatusOr<std::string> ModelConfigJson(const inference::ModelConfig& config) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string proto_json;
  auto converted = google::protobuf::util::MessageToJsonString(config, &proto_json, options);
  if (!converted.ok()) return Internal("cannot render the model config as JSON: " + converted.ToString());

  rapidjson::Document doc;
  if (ParseJsonInPlace(proto_json.data(), proto_json.size(), &doc) || !doc.IsObject()) return Internal("protobuf produced invalid JSON for the model config");
  NumberInt64Fields(inference::ModelConfig::descriptor(), doc);
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  doc.Accept(w);
  return Finish(buffer);
}

}  // namespace fastpath::frontend::http
