// The report as JSON: the writer behind --json, and the reader (ReadReportsJson) through
// which --append and `fastpath bench plot` merge runs, files of older versions included.
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "fastpath/bench/report.h"
#include "fastpath/bench/soak.h"
#include "fastpath/common/json.h"

namespace fastpath::bench {
namespace {

using Writer = rapidjson::PrettyWriter<rapidjson::StringBuffer>;
using rapidjson::Value;

// ---- JSON writing ----

void Key(Writer& w, const char* key) { w.Key(key); }
void Str(Writer& w, const char* key, const std::string& value) {
  w.Key(key);
  w.String(value.c_str(), static_cast<rapidjson::SizeType>(value.size()));
}
void Num(Writer& w, const char* key, double value) {
  w.Key(key);
  // Three decimals are below anything measurable here and keep the files readable.
  w.Double(std::isfinite(value) ? std::round(value * 1000.0) / 1000.0 : 0.0);
}
void U64(Writer& w, const char* key, uint64_t value) {
  w.Key(key);
  w.Uint64(value);
}
void I64(Writer& w, const char* key, int64_t value) {
  w.Key(key);
  w.Int64(value);
}

void WriteLatency(Writer& w, const LatencySummary& l) {
  Key(w, "latency_us");
  w.StartObject();
  U64(w, "count", l.count);
  Num(w, "mean", l.mean_us);
  Num(w, "min", l.min_us);
  Num(w, "p50", l.p50_us);
  Num(w, "p90", l.p90_us);
  Num(w, "p95", l.p95_us);
  Num(w, "p99", l.p99_us);
  Num(w, "max", l.max_us);
  w.EndObject();
}

void WriteServer(Writer& w, const ServerSplit& s) {
  Key(w, "server");
  if (!s.available) {
    w.Null();
    return;
  }
  w.StartObject();
  U64(w, "requests", s.requests);
  U64(w, "failed", s.failed);
  U64(w, "executions", s.executions);
  Num(w, "queue_us", s.queue_us);
  Num(w, "compute_input_us", s.compute_input_us);
  Num(w, "compute_infer_us", s.compute_infer_us);
  Num(w, "compute_output_us", s.compute_output_us);
  Num(w, "compute_us", s.compute_us());
  Num(w, "average_batch", s.average_batch);
  Key(w, "batch_histogram");
  w.StartObject();
  for (const auto& [size, n] : s.batch_histogram) {
    const std::string k = std::to_string(size);
    w.Key(k.c_str());
    w.Uint64(n);
  }
  w.EndObject();
  w.EndObject();
}

void WriteOptionalDouble(Writer& w, const char* key, const std::optional<double>& v) {
  Key(w, key);
  if (v) {
    w.Double(std::round(*v * 1000.0) / 1000.0);
  } else {
    w.Null();
  }
}
void WriteOptionalInt(Writer& w, const char* key, const std::optional<int64_t>& v) {
  Key(w, key);
  if (v) {
    w.Int64(*v);
  } else {
    w.Null();
  }
}

// "errors_by_kind" and "error_samples", of a point or a soak window.
void WriteErrors(Writer& w, const BenchPoint& p) {
  Key(w, "errors_by_kind");
  w.StartObject();
  for (const auto& [kind, n] : p.errors_by_kind) {
    w.Key(kind.c_str());
    w.Uint64(n);
  }
  w.EndObject();
  Key(w, "error_samples");
  w.StartObject();
  for (const auto& [kind, message] : p.error_samples) Str(w, kind.c_str(), message);
  w.EndObject();
}

// --collect-metrics: null when not collected; an absent figure is null, never 0.
void WriteGpuMetrics(Writer& w, const std::optional<PointGpuMetrics>& m) {
  Key(w, "gpu_metrics");
  if (!m) {
    w.Null();
    return;
  }
  w.StartObject();
  I64(w, "scrapes", m->scrapes);
  I64(w, "failed", m->failed);
  Str(w, "error", m->error);
  Key(w, "gpus");
  w.StartArray();
  for (const PointGpu& g : m->gpus) {
    w.StartObject();
    Str(w, "gpu", g.gpu);
    Str(w, "uuid", g.uuid);
    I64(w, "scrapes", g.scrapes);
    WriteOptionalDouble(w, "utilization_avg", g.utilization_avg);
    WriteOptionalDouble(w, "power_avg_w", g.power_avg_w);
    WriteOptionalDouble(w, "memory_used_max_bytes", g.memory_used_max_bytes);
    WriteOptionalDouble(w, "memory_total_bytes", g.memory_total_bytes);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

void WritePoint(Writer& w, const BenchPoint& p) {
  w.StartObject();
  Str(w, "mode", p.mode);
  I64(w, "concurrency", p.concurrency);
  Num(w, "request_rate", p.request_rate);
  I64(w, "batch_size", p.batch_size);
  Num(w, "throughput_rps", p.throughput_rps);
  Num(w, "throughput_ips", p.throughput_ips);
  WriteLatency(w, p.latency);
  U64(w, "requests", p.requests);
  U64(w, "errors", p.errors);
  WriteErrors(w, p);
  U64(w, "late_sends", p.late_sends);
  Key(w, "cpu_ceiling_ips");
  if (p.cpu_ceiling_ips) {
    w.Double(std::round(*p.cpu_ceiling_ips * 1000.0) / 1000.0);
  } else {
    w.Null();
  }
  WriteOptionalInt(w, "intra_op_threads", p.intra_op_threads);
  I64(w, "trials", p.trials);
  Key(w, "stable");
  w.Bool(p.stable);
  Num(w, "measured_seconds", p.measured_seconds);
  WriteServer(w, p.server);
  Key(w, "efficiency");
  if (p.efficiency) {
    w.Double(std::round(*p.efficiency * 1000.0) / 1000.0);
  } else {
    w.Null();
  }
  WriteGpuMetrics(w, p.gpu_metrics);
  w.EndObject();
}

void WriteCalibration(Writer& w, const CalibrationResult& c) {
  w.StartObject();
  Num(w, "slo_p99_ms", c.slo_p99_ms);
  I64(w, "concurrency", c.concurrency);
  Key(w, "candidates");
  w.StartArray();
  for (const auto& cand : c.candidates) {
    w.StartObject();
    Key(w, "dynamic_batching");
    w.Bool(cand.dynamic_batching);
    I64(w, "max_batch_size", cand.max_batch_size);
    I64(w, "max_queue_delay_us", cand.max_queue_delay_us);
    Key(w, "ran");
    w.Bool(cand.ran);
    Str(w, "failure", cand.failure);
    Key(w, "point");
    WritePoint(w, cand.point);
    w.EndObject();
  }
  w.EndArray();
  Key(w, "chosen");
  if (c.chosen) {
    w.Uint64(*c.chosen);
  } else {
    w.Null();
  }
  w.EndObject();
}

// A soak window: the load fields under the same keys as a point's (so that ReadPoint reads
// them back), then the drift and the GPU fields; an absent reading is null, never 0.
void WriteSoakWindow(Writer& w, const SoakWindow& win) {
  const BenchPoint& p = win.load;
  w.StartObject();
  I64(w, "index", win.index);
  Num(w, "start_s", win.start_s);
  Num(w, "end_s", win.end_s);
  Num(w, "measured_seconds", p.measured_seconds);
  Num(w, "throughput_rps", p.throughput_rps);
  Num(w, "throughput_ips", p.throughput_ips);
  WriteLatency(w, p.latency);
  U64(w, "requests", p.requests);
  U64(w, "errors", p.errors);
  WriteErrors(w, p);
  WriteServer(w, p.server);
  WriteOptionalDouble(w, "throughput_ratio", win.throughput_ratio);
  WriteOptionalDouble(w, "p95_ratio", win.p95_ratio);
  Key(w, "gpus");
  if (win.gpus.empty()) {
    w.Null();
  } else {
    w.StartArray();
    for (const SoakGpu& g : win.gpus) {
      w.StartObject();
      Str(w, "gpu", g.gpu);
      Str(w, "uuid", g.uuid);
      WriteOptionalDouble(w, "temperature_c", g.temperature_c);
      WriteOptionalDouble(w, "sm_clock_mhz", g.sm_clock_mhz);
      WriteOptionalDouble(w, "power_w", g.power_w);
      Key(w, "active_reasons");
      if (g.active_reasons) {
        w.StartArray();
        for (const auto& r : *g.active_reasons)
          w.String(r.c_str(), static_cast<rapidjson::SizeType>(r.size()));
        w.EndArray();
      } else {
        w.Null();
      }
      Key(w, "throttle_seconds");
      if (g.throttle_seconds) {
        w.StartObject();
        for (const auto& [reason, seconds] : *g.throttle_seconds) Num(w, reason.c_str(), seconds);
        w.EndObject();
      } else {
        w.Null();
      }
      WriteOptionalDouble(w, "utilization_avg", g.utilization_avg);
      WriteOptionalDouble(w, "memory_used_max_bytes", g.memory_used_max_bytes);
      w.EndObject();
    }
    w.EndArray();
  }
  Key(w, "metrics_error");
  if (win.metrics_error.empty()) {
    w.Null();
  } else {
    w.String(win.metrics_error.c_str(), static_cast<rapidjson::SizeType>(win.metrics_error.size()));
  }
  w.EndObject();
}

void WriteSoak(Writer& w, const SoakResult& soak) {
  w.StartObject();
  I64(w, "concurrency", soak.concurrency);
  Num(w, "duration_s", soak.duration_s);
  Num(w, "window_s", soak.window_s);
  Str(w, "metrics_url", soak.metrics_url);
  Key(w, "interrupted");
  w.Bool(soak.interrupted);
  Key(w, "drift");
  if (const auto d = SummarizeSoakDrift(soak)) {
    w.StartObject();
    WriteOptionalDouble(w, "last_throughput_ratio", d->last_throughput_ratio);
    WriteOptionalDouble(w, "last_p95_ratio", d->last_p95_ratio);
    WriteOptionalDouble(w, "min_throughput_ratio", d->min_throughput_ratio);
    I64(w, "min_throughput_window", d->min_throughput_window);
    WriteOptionalDouble(w, "max_p95_ratio", d->max_p95_ratio);
    I64(w, "max_p95_window", d->max_p95_window);
    w.EndObject();
  } else {
    w.Null();
  }
  Key(w, "windows");
  w.StartArray();
  for (const SoakWindow& win : soak.windows) WriteSoakWindow(w, win);
  w.EndArray();
  w.EndObject();
}

void WriteReport(Writer& w, const BenchReport& r) {
  w.StartObject();
  Str(w, "label", r.label);
  Str(w, "model", r.model);
  Str(w, "model_version", r.model_version);
  Str(w, "transport", r.transport);
  Str(w, "encoding", r.encoding);
  Str(w, "url", r.url);
  Str(w, "command", r.command);
  Str(w, "started_at", r.started_at);
  Str(w, "fastpath_version", r.fastpath_version);
  U64(w, "seed", r.seed);
  Key(w, "points");
  w.StartArray();
  for (const auto& p : r.points) WritePoint(w, p);
  w.EndArray();
  Key(w, "in_process");
  w.StartArray();
  for (const auto& p : r.in_process) WritePoint(w, p);
  w.EndArray();
  WriteOptionalInt(w, "in_process_own_threads", r.in_process_own_threads);
  WriteOptionalDouble(w, "best_in_process_ips", r.best_in_process_ips);
  WriteOptionalInt(w, "best_in_process_threads", r.best_in_process_threads);
  WriteOptionalInt(w, "best_in_process_batch_size", r.best_in_process_batch_size);
  WriteOptionalDouble(w, "efficiency", r.efficiency);
  WriteOptionalDouble(w, "in_process_own_ips", r.in_process_own_ips);
  WriteOptionalDouble(w, "efficiency_vs_own_setting", r.efficiency_vs_own_setting);
  WriteOptionalDouble(w, "best_in_process_cpu_ceiling_ips", r.best_in_process_cpu_ceiling_ips);
  WriteOptionalDouble(w, "efficiency_vs_cpu_ceiling", r.efficiency_vs_cpu_ceiling);
  Key(w, "calibration");
  if (r.calibration) {
    WriteCalibration(w, *r.calibration);
  } else {
    w.Null();
  }
  Key(w, "soak");
  if (r.soak) {
    WriteSoak(w, *r.soak);
  } else {
    w.Null();
  }
  w.EndObject();
}

// ---- JSON reading (lenient about missing fields: older files still plot) ----

std::string GetStr(const Value& o, const char* key) {
  auto it = o.FindMember(key);
  return it != o.MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
}
double GetNum(const Value& o, const char* key) {
  auto it = o.FindMember(key);
  return it != o.MemberEnd() && it->value.IsNumber() ? it->value.GetDouble() : 0.0;
}
uint64_t GetU64(const Value& o, const char* key) {
  auto it = o.FindMember(key);
  if (it == o.MemberEnd() || !it->value.IsNumber()) return 0;
  return it->value.IsUint64() ? it->value.GetUint64()
                              : static_cast<uint64_t>(it->value.GetDouble());
}
int64_t GetI64(const Value& o, const char* key) {
  auto it = o.FindMember(key);
  if (it == o.MemberEnd() || !it->value.IsNumber()) return 0;
  return it->value.IsInt64() ? it->value.GetInt64() : static_cast<int64_t>(it->value.GetDouble());
}
bool GetBool(const Value& o, const char* key) {
  auto it = o.FindMember(key);
  return it != o.MemberEnd() && it->value.IsBool() && it->value.GetBool();
}
std::optional<double> GetOptNum(const Value& o, const char* key) {
  auto it = o.FindMember(key);
  if (it == o.MemberEnd() || !it->value.IsNumber()) return std::nullopt;
  return it->value.GetDouble();
}
std::optional<int64_t> GetOptI64(const Value& o, const char* key) {
  auto it = o.FindMember(key);
  if (it == o.MemberEnd() || !it->value.IsInt64()) return std::nullopt;
  return it->value.GetInt64();
}

Status ReadPoint(const Value& v, const std::string& where, BenchPoint* p) {
  if (!v.IsObject()) return InvalidArgument(where + " is not an object");
  // A count there with another type is a damaged or edited file, not an older one: read as
  // 0, "errors": "13586" passed preflight's soak check as error-free.
  for (const char* key : {"requests", "errors", "late_sends"}) {
    if (auto it = v.FindMember(key); it != v.MemberEnd() && !it->value.IsUint64()) {
      return InvalidArgument(where + "." + key + " is not a count (a whole number >= 0)");
    }
  }
  p->mode = GetStr(v, "mode");
  p->concurrency = GetI64(v, "concurrency");
  p->request_rate = GetNum(v, "request_rate");
  p->batch_size = GetI64(v, "batch_size");
  p->throughput_rps = GetNum(v, "throughput_rps");
  p->throughput_ips = GetNum(v, "throughput_ips");
  if (auto it = v.FindMember("latency_us"); it != v.MemberEnd() && it->value.IsObject()) {
    const Value& l = it->value;
    p->latency.count = GetU64(l, "count");
    p->latency.mean_us = GetNum(l, "mean");
    p->latency.min_us = GetNum(l, "min");
    p->latency.p50_us = GetNum(l, "p50");
    p->latency.p90_us = GetNum(l, "p90");
    p->latency.p95_us = GetNum(l, "p95");
    p->latency.p99_us = GetNum(l, "p99");
    p->latency.max_us = GetNum(l, "max");
  }
  p->requests = GetU64(v, "requests");
  p->errors = GetU64(v, "errors");
  if (auto it = v.FindMember("errors_by_kind"); it != v.MemberEnd() && it->value.IsObject()) {
    for (const auto& m : it->value.GetObject()) {
      if (m.value.IsUint64()) p->errors_by_kind[m.name.GetString()] = m.value.GetUint64();
    }
  }
  if (auto it = v.FindMember("error_samples"); it != v.MemberEnd() && it->value.IsObject()) {
    for (const auto& m : it->value.GetObject()) {
      if (m.value.IsString()) p->error_samples[m.name.GetString()] = m.value.GetString();
    }
  }
  p->late_sends = GetU64(v, "late_sends");
  p->cpu_ceiling_ips = GetOptNum(v, "cpu_ceiling_ips");
  p->intra_op_threads = GetOptI64(v, "intra_op_threads");
  p->trials = static_cast<int>(GetI64(v, "trials"));
  p->stable = GetBool(v, "stable");
  p->measured_seconds = GetNum(v, "measured_seconds");
  if (auto it = v.FindMember("server"); it != v.MemberEnd() && it->value.IsObject()) {
    const Value& s = it->value;
    p->server.available = true;
    p->server.requests = GetU64(s, "requests");
    p->server.failed = GetU64(s, "failed");
    p->server.executions = GetU64(s, "executions");
    p->server.queue_us = GetNum(s, "queue_us");
    p->server.compute_input_us = GetNum(s, "compute_input_us");
    p->server.compute_infer_us = GetNum(s, "compute_infer_us");
    p->server.compute_output_us = GetNum(s, "compute_output_us");
    p->server.average_batch = GetNum(s, "average_batch");
    if (auto h = s.FindMember("batch_histogram"); h != s.MemberEnd() && h->value.IsObject()) {
      for (const auto& m : h->value.GetObject()) {
        uint64_t size = 0;
        const char* key = m.name.GetString();
        const char* end = key + m.name.GetStringLength();
        auto [ptr, ec] = std::from_chars(key, end, size);
        if (ec != std::errc() || ptr != end || !m.value.IsUint64()) {
          return InvalidArgument(where + ".server.batch_histogram has a bad entry '" + key + "'");
        }
        p->server.batch_histogram[size] = m.value.GetUint64();
      }
    }
  }
  p->efficiency = GetOptNum(v, "efficiency");
  if (auto it = v.FindMember("gpu_metrics"); it != v.MemberEnd() && it->value.IsObject()) {
    const Value& m = it->value;
    PointGpuMetrics& out = p->gpu_metrics.emplace();
    out.scrapes = static_cast<int>(GetI64(m, "scrapes"));
    out.failed = static_cast<int>(GetI64(m, "failed"));
    out.error = GetStr(m, "error");
    if (auto gpus = m.FindMember("gpus"); gpus != m.MemberEnd() && gpus->value.IsArray()) {
      for (const Value& gv : gpus->value.GetArray()) {
        if (!gv.IsObject()) return InvalidArgument(where + ".gpu_metrics.gpus has a non-object");
        PointGpu g;
        g.gpu = GetStr(gv, "gpu");
        g.uuid = GetStr(gv, "uuid");
        g.scrapes = static_cast<int>(GetI64(gv, "scrapes"));
        g.utilization_avg = GetOptNum(gv, "utilization_avg");
        g.power_avg_w = GetOptNum(gv, "power_avg_w");
        g.memory_used_max_bytes = GetOptNum(gv, "memory_used_max_bytes");
        g.memory_total_bytes = GetOptNum(gv, "memory_total_bytes");
        out.gpus.push_back(std::move(g));
      }
    }
  }
  return Status::Ok();
}

Status ReadPoints(const Value& o, const char* key, const std::string& where,
                  std::vector<BenchPoint>* out) {
  auto it = o.FindMember(key);
  if (it == o.MemberEnd() || it->value.IsNull()) return Status::Ok();
  if (!it->value.IsArray()) return InvalidArgument(where + "." + key + " is not an array");
  size_t i = 0;
  for (const Value& v : it->value.GetArray()) {
    BenchPoint p;
    FASTPATH_RETURN_IF_ERROR(ReadPoint(v, where + "." + key + "[" + std::to_string(i++) + "]", &p));
    out->push_back(std::move(p));
  }
  return Status::Ok();
}

Status ReadSoak(const Value& v, const std::string& where, SoakResult* soak) {
  if (!v.IsObject()) return InvalidArgument(where + " is not an object");
  soak->concurrency = GetI64(v, "concurrency");
  soak->duration_s = GetNum(v, "duration_s");
  soak->window_s = GetNum(v, "window_s");
  soak->metrics_url = GetStr(v, "metrics_url");
  if (auto it = v.FindMember("interrupted"); it != v.MemberEnd() && !it->value.IsBool()) {
    return InvalidArgument(where + ".interrupted is not true or false");
  }
  soak->interrupted = GetBool(v, "interrupted");
  auto windows = v.FindMember("windows");
  if (windows == v.MemberEnd() || !windows->value.IsArray()) {
    return InvalidArgument(where + ".windows is not an array");
  }
  size_t i = 0;
  for (const Value& wv : windows->value.GetArray()) {
    const std::string at = where + ".windows[" + std::to_string(i++) + "]";
    SoakWindow win;
    FASTPATH_RETURN_IF_ERROR(ReadPoint(wv, at, &win.load));
    win.load.mode = "soak";
    win.load.concurrency = soak->concurrency;
    win.load.trials = 1;
    win.index = static_cast<int>(GetI64(wv, "index"));
    win.start_s = GetNum(wv, "start_s");
    win.end_s = GetNum(wv, "end_s");
    // The windows follow one another from the soak's start, each at most about window_s long
    // (bench writes them so): how long the soak ran is read from them.
    const double previous_end = soak->windows.empty() ? 0.0 : soak->windows.back().end_s;
    const bool follows = std::abs(win.start_s - previous_end) <= 1e-6 * std::max(1.0, previous_end);
    const double longest = soak->window_s > 0 ? 2 * soak->window_s + 5 : 1e9;
    if (!follows || !(win.end_s > win.start_s) || win.end_s - win.start_s > longest) {
      return InvalidArgument(at + " runs from " + std::to_string(win.start_s) + " to " +
                             std::to_string(win.end_s) +
                             " s: windows follow one another from 0, each at most about "
                             "window_s long");
    }
    win.throughput_ratio = GetOptNum(wv, "throughput_ratio");
    win.p95_ratio = GetOptNum(wv, "p95_ratio");
    win.metrics_error = GetStr(wv, "metrics_error");
    if (auto gpus = wv.FindMember("gpus"); gpus != wv.MemberEnd() && gpus->value.IsArray()) {
      for (const Value& gv : gpus->value.GetArray()) {
        if (!gv.IsObject()) return InvalidArgument(at + ".gpus has a non-object");
        SoakGpu g;
        g.gpu = GetStr(gv, "gpu");
        g.uuid = GetStr(gv, "uuid");
        g.temperature_c = GetOptNum(gv, "temperature_c");
        g.sm_clock_mhz = GetOptNum(gv, "sm_clock_mhz");
        g.power_w = GetOptNum(gv, "power_w");
        g.utilization_avg = GetOptNum(gv, "utilization_avg");
        g.memory_used_max_bytes = GetOptNum(gv, "memory_used_max_bytes");
        if (auto r = gv.FindMember("active_reasons"); r != gv.MemberEnd() && r->value.IsArray()) {
          g.active_reasons.emplace();
          for (const Value& reason : r->value.GetArray()) {
            if (reason.IsString()) g.active_reasons->push_back(reason.GetString());
          }
        }
        if (auto t = gv.FindMember("throttle_seconds");
            t != gv.MemberEnd() && t->value.IsObject()) {
          g.throttle_seconds.emplace();
          for (const auto& m : t->value.GetObject()) {
            if (m.value.IsNumber()) (*g.throttle_seconds)[m.name.GetString()] = m.value.GetDouble();
          }
        }
        win.gpus.push_back(std::move(g));
      }
    }
    soak->windows.push_back(std::move(win));
  }
  return Status::Ok();
}

}  // namespace

std::string ReportsToJson(const std::vector<BenchReport>& reports) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.SetIndent(' ', 2);
  w.StartObject();
  Key(w, "runs");
  w.StartArray();
  for (const auto& r : reports) WriteReport(w, r);
  w.EndArray();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

StatusOr<std::vector<BenchReport>> ReadReportsJson(std::string_view text, std::string_view source) {
  const std::string src(source);
  rapidjson::Document doc;
  if (const std::string error = json::ParseBounded(&doc, text); !error.empty()) {
    return InvalidArgument(src + ": not JSON (" + error + ")");
  }
  if (!doc.IsObject() || !doc.HasMember("runs") || !doc["runs"].IsArray()) {
    return InvalidArgument(src + ": not a fastpath bench report (no \"runs\" array)");
  }
  std::vector<BenchReport> reports;
  size_t i = 0;
  for (const Value& run : doc["runs"].GetArray()) {
    const std::string where = src + ": runs[" + std::to_string(i++) + "]";
    if (!run.IsObject()) return InvalidArgument(where + " is not an object");
    BenchReport r;
    r.label = GetStr(run, "label");
    r.model = GetStr(run, "model");
    r.model_version = GetStr(run, "model_version");
    r.transport = GetStr(run, "transport");
    r.encoding = GetStr(run, "encoding");
    r.url = GetStr(run, "url");
    r.command = GetStr(run, "command");
    r.started_at = GetStr(run, "started_at");
    r.fastpath_version = GetStr(run, "fastpath_version");
    r.seed = GetU64(run, "seed");
    FASTPATH_RETURN_IF_ERROR(ReadPoints(run, "points", where, &r.points));
    FASTPATH_RETURN_IF_ERROR(ReadPoints(run, "in_process", where, &r.in_process));
    r.in_process_own_threads = GetOptI64(run, "in_process_own_threads");
    r.best_in_process_ips = GetOptNum(run, "best_in_process_ips");
    r.best_in_process_threads = GetOptI64(run, "best_in_process_threads");
    r.best_in_process_batch_size = GetOptI64(run, "best_in_process_batch_size");
    r.efficiency = GetOptNum(run, "efficiency");
    r.in_process_own_ips = GetOptNum(run, "in_process_own_ips");
    r.efficiency_vs_own_setting = GetOptNum(run, "efficiency_vs_own_setting");
    r.best_in_process_cpu_ceiling_ips = GetOptNum(run, "best_in_process_cpu_ceiling_ips");
    r.efficiency_vs_cpu_ceiling = GetOptNum(run, "efficiency_vs_cpu_ceiling");
    if (auto it = run.FindMember("calibration"); it != run.MemberEnd() && it->value.IsObject()) {
      const Value& c = it->value;
      CalibrationResult cal;
      cal.slo_p99_ms = GetNum(c, "slo_p99_ms");
      cal.concurrency = GetI64(c, "concurrency");
      if (auto cands = c.FindMember("candidates");
          cands != c.MemberEnd() && cands->value.IsArray()) {
        size_t j = 0;
        for (const Value& cv : cands->value.GetArray()) {
          if (!cv.IsObject())
            return InvalidArgument(where + ".calibration.candidates has a non-object");
          CalibrationCandidate cand;
          cand.dynamic_batching = GetBool(cv, "dynamic_batching");
          cand.max_batch_size = GetI64(cv, "max_batch_size");
          cand.max_queue_delay_us = GetI64(cv, "max_queue_delay_us");
          cand.ran = GetBool(cv, "ran");
          cand.failure = GetStr(cv, "failure");
          if (auto pt = cv.FindMember("point"); pt != cv.MemberEnd()) {
            FASTPATH_RETURN_IF_ERROR(ReadPoint(
                pt->value, where + ".calibration.candidates[" + std::to_string(j) + "].point",
                &cand.point));
          }
          ++j;
          cal.candidates.push_back(std::move(cand));
        }
      }
      if (auto ch = c.FindMember("chosen"); ch != c.MemberEnd() && ch->value.IsUint64()) {
        cal.chosen = ch->value.GetUint64();
      }
      r.calibration = std::move(cal);
    }
    if (auto it = run.FindMember("soak"); it != run.MemberEnd() && !it->value.IsNull()) {
      SoakResult soak;
      FASTPATH_RETURN_IF_ERROR(ReadSoak(it->value, where + ".soak", &soak));
      r.soak = std::move(soak);
    }
    reports.push_back(std::move(r));
  }
  return reports;
}

}  // namespace fastpath::bench
