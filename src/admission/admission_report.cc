#include "fastpath/admission/admission_report.h"

#include <rapidjson/document.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include "fastpath/common/json.h"

namespace fastpath::admission {
namespace {

using Writer = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

void Str(Writer& w, const std::string& value) {
  w.String(value.c_str(), static_cast<rapidjson::SizeType>(value.size()));
}

void Strings(Writer& w, const std::vector<std::string>& values) {
  w.StartArray();
  for (const std::string& v : values) Str(w, v);
  w.EndArray();
}

void OptDouble(Writer& w, const std::optional<double>& value) {
  if (value) {
    w.Double(*value);
  } else {
    w.Null();
  }
}

// Embeds a JSON document produced elsewhere (the snapshot, the placement audit); null when
// empty or unparsable, so one bad producer never breaks the report.
void Embedded(Writer& w, const std::string& json) {
  rapidjson::Document doc;
  if (json.empty() || !json::ParseBounded(&doc, json).empty()) {
    w.Null();
    return;
  }
  doc.Accept(w);
}

void WriteSelfTest(Writer& w, const SelfTestReport& r) {
  w.StartObject();
  w.Key("passed");
  w.Bool(r.passed());
  w.Key("summary");
  Str(w, r.Summary());
  w.Key("budget");
  w.StartObject();
  w.Key("p95_ms");
  OptDouble(w, r.budget.p95_ms);
  w.Key("min_throughput");
  OptDouble(w, r.budget.min_throughput);
  w.Key("iterations");
  w.Uint(r.budget.iterations);
  w.Key("warmup_iterations");
  w.Uint(r.budget.warmup_iterations);
  w.Key("seed");
  w.Uint64(r.budget.seed);
  w.EndObject();
  w.Key("warmup_runs");
  w.Uint(r.warmup_runs);
  w.Key("measured");
  if (r.figures) {
    w.StartObject();
    w.Key("batch_size");
    w.Uint(r.figures->batch_size);
    w.Key("iterations");
    w.Uint(r.figures->iterations);
    w.Key("p50_ms");
    w.Double(r.figures->p50_ms);
    w.Key("p95_ms");
    w.Double(r.figures->p95_ms);
    w.Key("max_ms");
    w.Double(r.figures->max_ms);
    w.Key("throughput");
    w.Double(r.figures->throughput);
    w.EndObject();
  } else {
    w.Null();
  }
  w.Key("misses");
  Strings(w, r.misses);
  w.EndObject();
}

}  // namespace

StatusOr<Profile> ParseProfile(const std::string& text) {
  if (text == "production") return Profile::kProduction;
  if (text == "dev") return Profile::kDev;
  return InvalidArgument("--profile must be production or dev, not '" + text + "'");
}

const char* ProfileName(Profile profile) {
  return profile == Profile::kProduction ? "production" : "dev";
}

const char* AdmissionStateName(AdmissionState state) {
  switch (state) {
    case AdmissionState::kReady:
      return "READY";
    case AdmissionState::kDegraded:
      return "DEGRADED";
    case AdmissionState::kUnavailable:
      return "UNAVAILABLE";
  }
  return "UNAVAILABLE";
}

std::string ReportToJson(const AdmissionReport& report) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("profile");
  w.String(ProfileName(report.policy.profile));
  w.Key("allow_cpu_fallback");
  w.Bool(report.policy.allow_cpu_fallback);
  w.Key("live");
  w.Bool(report.live);
  w.Key("ready");
  w.Bool(report.ready);
  w.Key("reasons");
  Strings(w, report.reasons);
  w.Key("version_lock");
  if (report.version_lock.empty()) {
    w.Null();
  } else {
    w.StartObject();
    w.Key("file");
    Str(w, report.version_lock);
    w.Key("pinned");
    Strings(w, report.pinned);
    w.Key("admitted");
    w.Bool(true);  // a mismatch never gets this far: serve exits
    w.EndObject();
  }
  w.Key("models");
  w.StartArray();
  for (const ModelAdmission& m : report.models) {
    w.StartObject();
    w.Key("name");
    Str(w, m.name);
    w.Key("version");
    Str(w, m.version);
    w.Key("state");
    w.String(AdmissionStateName(m.state));
    w.Key("reasons");
    Strings(w, m.reasons);
    w.Key("self_test");
    if (m.self_test) {
      WriteSelfTest(w, *m.self_test);
    } else {
      w.Null();
    }
    w.Key("placement");
    Embedded(w, m.placement_json);
    w.Key("memory_budget");
    Embedded(w, m.memory_budget ? MemoryBudgetToJson(*m.memory_budget) : std::string());
    if (!m.memory_budget && !m.memory_budget_note.empty()) {
      w.Key("memory_budget_note");
      Str(w, m.memory_budget_note);
    }
    w.Key("drift");
    if (m.drift) {
      w.StartObject();
      w.Key("ratio");
      if (m.drift->ratio) {
        w.Double(*m.drift->ratio);
      } else {
        w.Null();
      }
      w.Key("alert");
      w.Bool(m.drift->alert);
      w.Key("cause");
      if (m.drift->cause.empty()) {
        w.Null();
      } else {
        Str(w, m.drift->cause);
      }
      w.Key("detail");
      Str(w, m.drift->detail);
      w.EndObject();
    } else {
      w.Null();
    }
    w.Key("canary");
    if (m.canary) {
      w.StartObject();
      w.Key("interval_s");
      w.Int64(m.canary->interval_s);
      w.Key("reference_ms");
      w.Double(m.canary->reference_ms);
      w.Key("runs");
      w.Uint64(m.canary->runs);
      w.Key("failures");
      w.Uint64(m.canary->failures);
      w.Key("mismatches");
      w.Uint64(m.canary->mismatches);
      w.Key("latency_ratio");
      if (m.canary->latency_ratio) {
        w.Double(*m.canary->latency_ratio);
      } else {
        w.Null();
      }
      w.Key("last_problem");
      Str(w, m.canary->last_problem);
      w.EndObject();
    } else {
      w.Null();
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("gpu_telemetry");
  if (report.gpu_telemetry.empty()) {
    w.Null();
  } else {
    w.StartObject();
    w.Key("source");
    Str(w, report.gpu_telemetry);
    w.Key("gpus");
    w.StartArray();
    for (const gpu::GpuStatus& status : report.gpus) Embedded(w, gpu::StatusToJson(status));
    w.EndArray();
    w.EndObject();
  }
  w.Key("capability_snapshot");
  Embedded(w, report.snapshot_json);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

}  // namespace fastpath::admission
