// `fastpath gate --record FILE`: a baseline measured once, compared later with `--baseline
// FILE`. It keeps what the comparison needs: each request's round-trip times, its inputs'
// checksum (a later candidate is compared only on the same request) and its outputs whole
// (base64; the gate compares them element by element, which a checksum alone could not),
// and the server's capability snapshot.
#include <absl/strings/escaping.h>
#include <rapidjson/document.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <iterator>

#include "fastpath/admission/rollout_gate.h"
#include "fastpath/common/json.h"
#include "gate_measure.h"

namespace fastpath::cli::gate {
namespace {

constexpr int kRecordFormat = 1;
using Writer = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

void Str(Writer& w, const char* key, const std::string& value) {
  w.Key(key);
  w.String(value.c_str(), static_cast<rapidjson::SizeType>(value.size()));
}

}  // namespace

std::string Checksum(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : bytes) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ULL;
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, h);
  return text;
}

std::string RecordToJson(const GateRecord& record) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.SetIndent(' ', 2);
  w.SetFormatOptions(rapidjson::kFormatSingleLineArray);
  w.StartObject();
  w.Key("fastpath_gate_record");
  w.Int(kRecordFormat);
  Str(w, "model", record.model);
  Str(w, "server", record.side.source);
  Str(w, "protocol", record.protocol);
  w.Key("seed");
  w.Uint64(record.seed);
  Str(w, "recorded_at", record.recorded_at);
  w.Key("requests");
  w.StartArray();
  for (const RequestMeasurement& r : record.side.requests) {
    w.StartObject();
    w.Key("rows");
    w.Uint64(r.rows);
    Str(w, "inputs_checksum", r.inputs_checksum);
    w.Key("samples_ms");
    w.StartArray();
    for (const double ms : r.ms) w.Double(ms);
    w.EndArray();
    w.Key("outputs");
    w.StartArray();
    for (const Tensor& t : r.outputs) {
      w.StartObject();
      Str(w, "name", t.name);
      Str(w, "datatype", std::string(DataTypeName(t.dtype)));
      w.Key("shape");
      w.StartArray();
      for (const int64_t d : t.shape) w.Int64(d);
      w.EndArray();
      Str(w, "checksum", Checksum(t.data));
      Str(w, "data_base64", absl::Base64Escape(t.data));
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.Key("capability_snapshot");
  if (record.side.snapshot_json.empty()) {
    w.Null();
  } else {
    rapidjson::Document snapshot;
    if (!json::ParseBounded(&snapshot, record.side.snapshot_json).empty()) {
      w.Null();
    } else {
      snapshot.Accept(w);
    }
  }
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

namespace {
constexpr double kMaxSampleMs = 3'600'000;
}  // namespace

StatusOr<GateRecord> RecordFromJson(const std::string& text, const std::string& path) {
  auto bad = [&](const std::string& what) {
    return InvalidArgument(path + " is not a `fastpath gate --record` file: " + what);
  };
  rapidjson::Document doc;
  if (const std::string error = json::ParseBounded(&doc, text); !error.empty()) {
    return bad("not JSON: " + error);
  }
  if (!doc.IsObject()) return bad("not a JSON object");
  const auto format = doc.FindMember("fastpath_gate_record");
  if (format == doc.MemberEnd() || !format->value.IsInt()) {
    return bad("no \"fastpath_gate_record\" member");
  }
  if (format->value.GetInt() != kRecordFormat) {
    return bad("format " + std::to_string(format->value.GetInt()) + ", this fastpath reads " +
               std::to_string(kRecordFormat) + "; record the baseline again");
  }
  auto string = [&](const rapidjson::Value& v, const char* key, std::string* out) {
    const auto it = v.FindMember(key);
    if (it == v.MemberEnd() || !it->value.IsString()) return false;
    *out = it->value.GetString();
    return true;
  };
  GateRecord record;
  if (!string(doc, "model", &record.model) || !string(doc, "server", &record.side.source) ||
      !string(doc, "protocol", &record.protocol)) {
    return bad("\"model\", \"server\" or \"protocol\" is missing");
  }
  (void)string(doc, "recorded_at", &record.recorded_at);
  if (const auto seed = doc.FindMember("seed");
      seed == doc.MemberEnd() || !seed->value.IsUint64()) {
    return bad("no \"seed\"");
  } else {
    record.seed = seed->value.GetUint64();
  }
  const auto requests = doc.FindMember("requests");
  if (requests == doc.MemberEnd() || !requests->value.IsArray() || requests->value.Empty()) {
    return bad("no \"requests\"");
  }
  for (const auto& r : requests->value.GetArray()) {
    RequestMeasurement m;
    if (!r.IsObject() || !r.HasMember("rows") || !r["rows"].IsUint64() ||
        !string(r, "inputs_checksum", &m.inputs_checksum) || !r.HasMember("samples_ms") ||
        !r["samples_ms"].IsArray() || !r.HasMember("outputs") || !r["outputs"].IsArray()) {
      return bad("a request lacks \"rows\", \"inputs_checksum\", \"samples_ms\" or \"outputs\"");
    }
    m.rows = r["rows"].GetUint64();
    if (m.rows == 0) return bad("a request has 0 rows");
    for (const auto& ms : r["samples_ms"].GetArray()) {
      if (!ms.IsNumber() || !(ms.GetDouble() > 0) || ms.GetDouble() > kMaxSampleMs) {
        return bad("a sample is not a time in milliseconds (above 0, under an hour)");
      }
      m.ms.push_back(ms.GetDouble());
    }
    // What `gate --rounds` takes, the same for every request: a verdict on fewer is noise.
    const admission::GateSettingRange& rounds = admission::RangeOf(admission::GateSetting::kRounds);
    const auto min_rounds = static_cast<size_t>(rounds.lo);
    const auto max_rounds = static_cast<size_t>(rounds.hi);
    if (m.ms.size() < min_rounds || m.ms.size() > max_rounds) {
      return bad("a request has " + std::to_string(m.ms.size()) + " samples; a record holds " +
                 std::to_string(min_rounds) + " to " + std::to_string(max_rounds) +
                 " (the rounds of `gate --rounds`)");
    }
    if (!record.side.requests.empty() && m.ms.size() != record.side.requests[0].ms.size()) {
      return bad("its requests have different numbers of samples");
    }
    if (r["outputs"].Empty()) return bad("a request has no outputs to compare");
    for (const auto& o : r["outputs"].GetArray()) {
      Tensor t;
      std::string dtype, data, checksum;
      if (!o.IsObject() || !string(o, "name", &t.name) || !string(o, "datatype", &dtype) ||
          !string(o, "data_base64", &data) || !o.HasMember("shape") || !o["shape"].IsArray()) {
        return bad("an output lacks \"name\", \"datatype\", \"shape\" or \"data_base64\"");
      }
      const auto parsed = ParseDataType(dtype);
      if (!parsed) return bad("output '" + t.name + "' has datatype '" + dtype + "'");
      t.dtype = *parsed;
      for (const auto& d : o["shape"].GetArray()) {
        if (!d.IsInt64()) return bad("output '" + t.name + "' has a bad shape");
        t.shape.push_back(d.GetInt64());
      }
      if (!absl::Base64Unescape(data, &t.data)) return bad("output '" + t.name + "': bad base64");
      if (string(o, "checksum", &checksum) && checksum != Checksum(t.data)) {
        return bad("output '" + t.name + "': its data does not match its checksum");
      }
      m.outputs.push_back(std::move(t));
    }
    record.side.requests.push_back(std::move(m));
  }
  if (const auto s = doc.FindMember("capability_snapshot");
      s != doc.MemberEnd() && s->value.IsObject()) {
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
    s->value.Accept(w);
    record.side.snapshot_json.assign(buffer.GetString(), buffer.GetSize());
  }
  return record;
}

}  // namespace fastpath::cli::gate
