#include "fastpath/bench/report.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace fastpath::bench {
namespace {

using Writer = rapidjson::PrettyWriter<rapidjson::StringBuffer>;
using rapidjson::Value;

double SafeDiv(double a, double b) { return b > 0 ? a / b : 0; }

uint64_t Sub(uint64_t a, uint64_t b, bool* backwards) {
  if (a < b) {
    *backwards = true;
    return 0;
  }
  return a - b;
}

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
  U64(w, "late_sends", p.late_sends);
  Key(w, "cpu_ceiling_ips");
  if (p.cpu_ceiling_ips) {
    w.Double(std::round(*p.cpu_ceiling_ips * 1000.0) / 1000.0);
  } else {
    w.Null();
  }
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

void WriteOptionalDouble(Writer& w, const char* key, const std::optional<double>& v) {
  Key(w, key);
  if (v) {
    w.Double(std::round(*v * 1000.0) / 1000.0);
  } else {
    w.Null();
  }
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
  WriteOptionalDouble(w, "best_in_process_ips", r.best_in_process_ips);
  WriteOptionalDouble(w, "efficiency", r.efficiency);
  WriteOptionalDouble(w, "best_in_process_cpu_ceiling_ips", r.best_in_process_cpu_ceiling_ips);
  WriteOptionalDouble(w, "efficiency_vs_cpu_ceiling", r.efficiency_vs_cpu_ceiling);
  Key(w, "calibration");
  if (r.calibration) {
    WriteCalibration(w, *r.calibration);
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
  return it->value.IsUint64() ? it->value.GetUint64() : static_cast<uint64_t>(it->value.GetDouble());
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

Status ReadPoint(const Value& v, const std::string& where, BenchPoint* p) {
  if (!v.IsObject()) return InvalidArgument(where + " is not an object");
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

// ---- Formatting ----

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string ErrorsText(const BenchPoint& p) {
  std::string out;
  for (const auto& [kind, n] : p.errors_by_kind) {
    if (!out.empty()) out += ' ';
    out += kind + ":" + std::to_string(n);
  }
  return out;
}

std::string HistogramText(const ServerSplit& s) {
  std::string out;
  for (const auto& [size, n] : s.batch_histogram) {
    if (!out.empty()) out += ' ';
    out += std::to_string(size) + ":" + std::to_string(n);
  }
  return out;
}

std::string CsvRow(const std::string& label, const BenchReport& r, const BenchPoint& p,
                   const std::string& extra_mode) {
  std::ostringstream row;
  row << CsvField(label) << ',' << CsvField(r.model) << ',' << r.transport << ',' << r.encoding << ','
      << (extra_mode.empty() ? p.mode : extra_mode) << ',' << p.concurrency << ','
      << Fmt("%.3f", p.request_rate) << ',' << p.batch_size << ',' << Fmt("%.3f", p.throughput_rps)
      << ',' << Fmt("%.3f", p.throughput_ips) << ',' << Fmt("%.1f", p.latency.p50_us) << ','
      << Fmt("%.1f", p.latency.p90_us) << ',' << Fmt("%.1f", p.latency.p95_us) << ','
      << Fmt("%.1f", p.latency.p99_us) << ',' << Fmt("%.1f", p.latency.max_us) << ','
      << Fmt("%.1f", p.latency.mean_us) << ',' << p.requests << ',' << p.errors << ','
      << CsvField(ErrorsText(p)) << ',';
  if (p.server.available) {
    row << Fmt("%.1f", p.server.queue_us) << ',' << Fmt("%.1f", p.server.compute_us()) << ','
        << Fmt("%.2f", p.server.average_batch) << ',' << CsvField(HistogramText(p.server));
  } else {
    row << ",,,";
  }
  row << ',' << (p.efficiency ? Fmt("%.3f", *p.efficiency) : "") << ',' << p.trials << ','
      << (p.stable ? "true" : "false") << '\n';
  return row.str();
}

}  // namespace

ServerSplit DiffStats(const ModelStatsSnapshot& before, const ModelStatsSnapshot& after) {
  ServerSplit s;
  bool backwards = false;
  const uint64_t queue_n = Sub(after.queue.count, before.queue.count, &backwards);
  const uint64_t queue_ns = Sub(after.queue.ns, before.queue.ns, &backwards);
  const uint64_t in_n = Sub(after.compute_input.count, before.compute_input.count, &backwards);
  const uint64_t in_ns = Sub(after.compute_input.ns, before.compute_input.ns, &backwards);
  const uint64_t inf_n = Sub(after.compute_infer.count, before.compute_infer.count, &backwards);
  const uint64_t inf_ns = Sub(after.compute_infer.ns, before.compute_infer.ns, &backwards);
  const uint64_t out_n = Sub(after.compute_output.count, before.compute_output.count, &backwards);
  const uint64_t out_ns = Sub(after.compute_output.ns, before.compute_output.ns, &backwards);
  s.requests = Sub(after.success.count, before.success.count, &backwards);
  s.failed = Sub(after.fail.count, before.fail.count, &backwards);
  s.executions = Sub(after.execution_count, before.execution_count, &backwards);
  uint64_t elements = 0;
  uint64_t batches = 0;
  for (const auto& [size, n] : after.batch_executions) {
    auto it = before.batch_executions.find(size);
    const uint64_t d = Sub(n, it == before.batch_executions.end() ? 0 : it->second, &backwards);
    if (d > 0) s.batch_histogram[size] = d;
    elements += d * size;
    batches += d;
  }
  if (backwards) return ServerSplit{};
  s.available = true;
  s.queue_us = SafeDiv(queue_ns, queue_n) / 1000.0;
  s.compute_input_us = SafeDiv(in_ns, in_n) / 1000.0;
  s.compute_infer_us = SafeDiv(inf_ns, inf_n) / 1000.0;
  s.compute_output_us = SafeDiv(out_ns, out_n) / 1000.0;
  s.average_batch = SafeDiv(elements, batches);
  return s;
}

std::optional<size_t> ChooseCalibration(const std::vector<CalibrationCandidate>& candidates,
                                        double slo_p99_ms) {
  std::optional<size_t> best;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const auto& c = candidates[i];
    if (!c.ran || !c.dynamic_batching || c.point.errors > 0 || c.point.requests == 0) continue;
    if (c.point.latency.p99_us > slo_p99_ms * 1000.0) continue;
    if (!best) {
      best = i;
      continue;
    }
    const auto& b = candidates[*best].point;
    if (c.point.throughput_ips > b.throughput_ips ||
        (c.point.throughput_ips == b.throughput_ips && c.point.latency.p99_us < b.latency.p99_us)) {
      best = i;
    }
  }
  return best;
}

std::string BatchingConfigSnippet(const CalibrationCandidate& c) {
  std::ostringstream out;
  out << "max_batch_size: " << c.max_batch_size << "\n";
  out << "dynamic_batching {\n";
  out << "  max_queue_delay_microseconds: " << c.max_queue_delay_us << "\n";
  out << "}\n";
  return out.str();
}

void ComputeEfficiency(BenchReport* report) {
  report->best_in_process_ips.reset();
  report->efficiency.reset();
  report->best_in_process_cpu_ceiling_ips.reset();
  report->efficiency_vs_cpu_ceiling.reset();
  for (const auto& p : report->in_process) {
    if (p.requests == 0) continue;
    if (p.cpu_ceiling_ips &&
        (!report->best_in_process_cpu_ceiling_ips || *p.cpu_ceiling_ips > *report->best_in_process_cpu_ceiling_ips)) {
      report->best_in_process_cpu_ceiling_ips = p.cpu_ceiling_ips;
    }
    if (!report->best_in_process_ips || p.throughput_ips > *report->best_in_process_ips) {
      report->best_in_process_ips = p.throughput_ips;
    }
  }
  for (auto& p : report->points) {
    p.efficiency.reset();
    if (report->best_in_process_ips && *report->best_in_process_ips > 0 && p.requests > 0) {
      p.efficiency = p.throughput_ips / *report->best_in_process_ips;
      if (!report->efficiency || *p.efficiency > *report->efficiency) report->efficiency = p.efficiency;
    }
    if (report->best_in_process_cpu_ceiling_ips && *report->best_in_process_cpu_ceiling_ips > 0 && p.requests > 0) {
      const double e = p.throughput_ips / *report->best_in_process_cpu_ceiling_ips;
      if (!report->efficiency_vs_cpu_ceiling || e > *report->efficiency_vs_cpu_ceiling) {
        report->efficiency_vs_cpu_ceiling = e;
      }
    }
  }
}

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
  doc.Parse(text.data(), text.size());
  if (doc.HasParseError()) {
    return InvalidArgument(src + ": not JSON (" + rapidjson::GetParseError_En(doc.GetParseError()) +
                           " at offset " + std::to_string(doc.GetErrorOffset()) + ")");
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
    r.best_in_process_ips = GetOptNum(run, "best_in_process_ips");
    r.efficiency = GetOptNum(run, "efficiency");
    r.best_in_process_cpu_ceiling_ips = GetOptNum(run, "best_in_process_cpu_ceiling_ips");
    r.efficiency_vs_cpu_ceiling = GetOptNum(run, "efficiency_vs_cpu_ceiling");
    if (auto it = run.FindMember("calibration"); it != run.MemberEnd() && it->value.IsObject()) {
      const Value& c = it->value;
      CalibrationResult cal;
      cal.slo_p99_ms = GetNum(c, "slo_p99_ms");
      cal.concurrency = GetI64(c, "concurrency");
      if (auto cands = c.FindMember("candidates"); cands != c.MemberEnd() && cands->value.IsArray()) {
        size_t j = 0;
        for (const Value& cv : cands->value.GetArray()) {
          if (!cv.IsObject()) return InvalidArgument(where + ".calibration.candidates has a non-object");
          CalibrationCandidate cand;
          cand.dynamic_batching = GetBool(cv, "dynamic_batching");
          cand.max_batch_size = GetI64(cv, "max_batch_size");
          cand.max_queue_delay_us = GetI64(cv, "max_queue_delay_us");
          cand.ran = GetBool(cv, "ran");
          cand.failure = GetStr(cv, "failure");
          if (auto pt = cv.FindMember("point"); pt != cv.MemberEnd()) {
            FASTPATH_RETURN_IF_ERROR(ReadPoint(pt->value, where + ".calibration.candidates[" +
                                                              std::to_string(j) + "].point",
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
    reports.push_back(std::move(r));
  }
  return reports;
}

std::string CsvHeader() {
  return "label,model,transport,encoding,mode,concurrency,request_rate,batch_size,throughput_rps,"
         "throughput_ips,p50_us,p90_us,p95_us,p99_us,max_us,mean_us,requests,errors,errors_by_kind,"
         "server_queue_us,server_compute_us,server_avg_batch,server_batch_histogram,efficiency,"
         "trials,stable\n";
}

std::string ReportCsvRows(const BenchReport& r) {
  std::string out;
  for (const auto& p : r.in_process) out += CsvRow(r.label, r, p, "");
  for (const auto& p : r.points) out += CsvRow(r.label, r, p, "");
  if (r.calibration) {
    for (const auto& c : r.calibration->candidates) {
      if (!c.ran) continue;
      const std::string label =
          r.label + (c.dynamic_batching ? " mbs=" + std::to_string(c.max_batch_size) + " delay_us=" +
                                              std::to_string(c.max_queue_delay_us)
                                        : " no dynamic batching");
      out += CsvRow(label, r, c.point, "calibration");
    }
  }
  return out;
}

std::string RenderTable(const BenchReport& r) {
  std::ostringstream out;
  auto header = [&](bool server) {
    char line[512];
    std::snprintf(line, sizeof(line), "%-13s %5s %10s %10s %9s %9s %9s %9s %9s%s\n", "point", "batch",
                  "req/s", "infer/s", "p50 ms", "p90 ms", "p95 ms", "p99 ms", "max ms",
                  server ? "  queue ms  compute ms  avg batch  errors" : "");
    out << line;
  };
  auto row = [&](const BenchPoint& p, const std::string& name, bool server) {
    char line[512];
    std::snprintf(line, sizeof(line), "%-13s %5lld %10.1f %10.1f %9.3f %9.3f %9.3f %9.3f %9.3f", name.c_str(),
                  static_cast<long long>(p.batch_size), p.throughput_rps, p.throughput_ips,
                  p.latency.p50_us / 1000, p.latency.p90_us / 1000, p.latency.p95_us / 1000,
                  p.latency.p99_us / 1000, p.latency.max_us / 1000);
    out << line;
    if (server) {
      if (p.server.available) {
        std::snprintf(line, sizeof(line), "  %8.3f  %10.3f  %9.2f", p.server.queue_us / 1000,
                      p.server.compute_us() / 1000, p.server.average_batch);
      } else {
        std::snprintf(line, sizeof(line), "  %8s  %10s  %9s", "-", "-", "-");
      }
      out << line << "  " << (p.errors == 0 ? "0" : ErrorsText(p));
    } else if (p.cpu_ceiling_ips) {
      out << "  cpu-time ceiling " << Fmt("%.1f", *p.cpu_ceiling_ips) << " infer/s";
    }
    if (!p.stable) out << "  (not stable after " << p.trials << " windows)";
    if (p.late_sends > 0) out << "  (" << p.late_sends << " sends late: raise --max-threads)";
    out << "\n";
  };
  auto point_name = [](const BenchPoint& p) {
    if (p.mode == "request_rate") return "rate=" + Fmt("%g", p.request_rate);
    return "c=" + std::to_string(p.concurrency);
  };
  out << "model " << r.model << (r.model_version.empty() ? "" : " version " + r.model_version);
  if (!r.transport.empty()) out << ", " << r.transport << " " << r.encoding << " at " << r.url;
  if (!r.label.empty()) out << " [" << r.label << "]";
  out << "\n";
  if (!r.in_process.empty()) {
    out << "\nin-process ONNX Runtime (no server):\n";
    header(false);
    for (const auto& p : r.in_process) row(p, "batch=" + std::to_string(p.batch_size), false);
  }
  if (!r.points.empty()) {
    out << "\nserver:\n";
    header(true);
    for (const auto& p : r.points) row(p, point_name(p), true);
    for (const auto& p : r.points) {
      if (p.server.available && !p.server.batch_histogram.empty() && p.server.average_batch > 1.0) {
        out << "  " << point_name(p) << " batches formed (size:count): " << HistogramText(p.server) << "\n";
      }
      for (const auto& [kind, message] : p.error_samples) {
        out << "  " << point_name(p) << " " << kind << ": " << message << "\n";
      }
    }
  }
  if (r.best_in_process_ips && r.efficiency) {
    out << "\nefficiency (best server infer/s / best in-process infer/s): " << Fmt("%.3f", *r.efficiency)
        << " (in-process best " << Fmt("%.1f", *r.best_in_process_ips) << " infer/s)\n";
    if (r.efficiency_vs_cpu_ceiling && r.best_in_process_cpu_ceiling_ips) {
      out << "efficiency vs the in-process CPU-time ceiling: " << Fmt("%.3f", *r.efficiency_vs_cpu_ceiling)
          << " (ceiling " << Fmt("%.1f", *r.best_in_process_cpu_ceiling_ips)
          << " infer/s: the runs' own CPU time, not counting time descheduled)\n";
    }
  }
  if (r.calibration) {
    const auto& c = *r.calibration;
    out << "\nbatching calibration at concurrency " << c.concurrency << ", SLO p99 <= "
        << Fmt("%g", c.slo_p99_ms) << " ms:\n";
    char line[256];
    std::snprintf(line, sizeof(line), "%-22s %10s %9s %9s  %s\n", "configuration", "infer/s", "p99 ms",
                  "avg batch", "status");
    out << line;
    for (size_t i = 0; i < c.candidates.size(); ++i) {
      const auto& cand = c.candidates[i];
      const std::string name = cand.dynamic_batching
                                   ? "mbs=" + std::to_string(cand.max_batch_size) + " delay=" +
                                         std::to_string(cand.max_queue_delay_us) + "us"
                                   : "no dynamic batching";
      std::string status;
      if (!cand.ran) {
        status = "failed: " + cand.failure;
      } else if (cand.point.errors > 0) {
        status = "errors: " + ErrorsText(cand.point);
      } else if (cand.point.latency.p99_us > c.slo_p99_ms * 1000) {
        status = "over SLO";
      } else {
        status = "meets SLO";
      }
      if (c.chosen && *c.chosen == i) status += "  <== best";
      std::snprintf(line, sizeof(line), "%-22s %10.1f %9.3f %9.2f  %s\n", name.c_str(),
                    cand.point.throughput_ips, cand.point.latency.p99_us / 1000,
                    cand.point.server.average_batch, status.c_str());
      out << line;
    }
  }
  return out.str();
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

// 1, 2 or 5 times a power of ten, so that about `target` ticks cover [0, max].
double NiceStep(double max, int target) {
  if (max <= 0) return 1;
  const double raw = max / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * mag) return m * mag;
  }
  return 10 * mag;
}

std::string TickLabel(double v) {
  if (v == 0) return "0";
  if (std::fabs(v) >= 1000) return Fmt("%gk", v / 1000);
  if (std::fabs(v) >= 10) return Fmt("%.0f", v);
  if (std::fabs(v) >= 1) return Fmt("%.1f", v);
  return Fmt("%.2f", v);
}

struct Curve {
  std::string label;
  std::vector<std::pair<double, double>> p50;  // (infer/s, ms)
  std::vector<std::pair<double, double>> p99;
};

}  // namespace

std::string RenderLatencyThroughputSvg(const std::vector<BenchReport>& reports, const std::string& title) {
  static const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                  "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
  std::vector<Curve> curves;
  auto add = [&](const std::string& label, const std::vector<BenchPoint>& points) {
    Curve c;
    c.label = label;
    for (const auto& p : points) {
      if (p.requests == 0) continue;
      c.p50.emplace_back(p.throughput_ips, p.latency.p50_us / 1000.0);
      c.p99.emplace_back(p.throughput_ips, p.latency.p99_us / 1000.0);
    }
    // Along the throughput axis, so that each curve reads left to right.
    auto by_x = [](const auto& a, const auto& b) { return a.first < b.first; };
    std::sort(c.p50.begin(), c.p50.end(), by_x);
    std::sort(c.p99.begin(), c.p99.end(), by_x);
    if (!c.p50.empty()) curves.push_back(std::move(c));
  };
  for (const auto& r : reports) {
    std::string base = r.label.empty() ? r.model + " " + r.transport + " " + r.encoding : r.label;
    add(base, r.points);
    add(base + " (in-process)", r.in_process);
  }

  double max_x = 0;
  double max_y = 0;
  for (const auto& c : curves) {
    for (const auto& [x, y] : c.p50) max_x = std::max(max_x, x);
    for (const auto& [x, y] : c.p99) {
      max_x = std::max(max_x, x);
      max_y = std::max(max_y, y);
    }
  }
  const double x_step = NiceStep(max_x * 1.05, 6);
  const double y_step = NiceStep(max_y * 1.05, 6);
  const double x_max = std::max(x_step, std::ceil(max_x * 1.05 / x_step) * x_step);
  const double y_max = std::max(y_step, std::ceil(max_y * 1.05 / y_step) * y_step);

  const double width = 1000;
  const double plot_left = 80;
  const double plot_top = 50;
  const double plot_w = 560;
  const double plot_h = 380;
  const double legend_x = plot_left + plot_w + 25;
  const double height = std::max(plot_top + plot_h + 70, plot_top + 40 + 22.0 * (curves.size() + 3));
  auto sx = [&](double x) { return plot_left + x / x_max * plot_w; };
  auto sy = [&](double y) { return plot_top + plot_h - y / y_max * plot_h; };

  std::ostringstream svg;
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << " " << height << "\" font-family=\"Helvetica, Arial, sans-serif\""
      << " font-size=\"12\">\n";
  svg << "  <rect x=\"0\" y=\"0\" width=\"" << width << "\" height=\"" << height << "\" fill=\"#ffffff\"/>\n";
  svg << "  <text x=\"" << plot_left + plot_w / 2 << "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\""
      << " font-weight=\"bold\">" << XmlEscape(title) << "</text>\n";
  // Grid and ticks.
  svg << "  <g class=\"grid\" stroke=\"#e5e5e5\" stroke-width=\"1\">\n";
  for (double x = 0; x <= x_max + x_step / 2; x += x_step) {
    svg << "    <line x1=\"" << sx(x) << "\" y1=\"" << plot_top << "\" x2=\"" << sx(x) << "\" y2=\""
        << plot_top + plot_h << "\"/>\n";
  }
  for (double y = 0; y <= y_max + y_step / 2; y += y_step) {
    svg << "    <line x1=\"" << plot_left << "\" y1=\"" << sy(y) << "\" x2=\"" << plot_left + plot_w
        << "\" y2=\"" << sy(y) << "\"/>\n";
  }
  svg << "  </g>\n";
  svg << "  <g class=\"axes\" stroke=\"#333333\" stroke-width=\"1.5\">\n";
  svg << "    <line x1=\"" << plot_left << "\" y1=\"" << plot_top + plot_h << "\" x2=\"" << plot_left + plot_w
      << "\" y2=\"" << plot_top + plot_h << "\"/>\n";
  svg << "    <line x1=\"" << plot_left << "\" y1=\"" << plot_top << "\" x2=\"" << plot_left << "\" y2=\""
      << plot_top + plot_h << "\"/>\n";
  svg << "  </g>\n";
  svg << "  <g class=\"ticks\" fill=\"#333333\">\n";
  for (double x = 0; x <= x_max + x_step / 2; x += x_step) {
    svg << "    <text x=\"" << sx(x) << "\" y=\"" << plot_top + plot_h + 18 << "\" text-anchor=\"middle\">"
        << TickLabel(x) << "</text>\n";
  }
  for (double y = 0; y <= y_max + y_step / 2; y += y_step) {
    svg << "    <text x=\"" << plot_left - 8 << "\" y=\"" << sy(y) + 4 << "\" text-anchor=\"end\">"
        << TickLabel(y) << "</text>\n";
  }
  svg << "  </g>\n";
  svg << "  <text x=\"" << plot_left + plot_w / 2 << "\" y=\"" << plot_top + plot_h + 42
      << "\" text-anchor=\"middle\">throughput (inferences/s)</text>\n";
  svg << "  <text x=\"22\" y=\"" << plot_top + plot_h / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 22 "
      << plot_top + plot_h / 2 << ")\">latency (ms)</text>\n";
  if (curves.empty()) {
    svg << "  <text x=\"" << plot_left + plot_w / 2 << "\" y=\"" << plot_top + plot_h / 2
        << "\" text-anchor=\"middle\" fill=\"#999999\">no completed requests to plot</text>\n";
  }
  // Curves: p50 solid with dots, p99 dashed with squares.
  for (size_t i = 0; i < curves.size(); ++i) {
    const char* color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    const auto& c = curves[i];
    svg << "  <g class=\"series\" data-label=\"" << XmlEscape(c.label) << "\">\n";
    for (int which = 0; which < 2; ++which) {
      const auto& pts = which == 0 ? c.p50 : c.p99;
      svg << "    <polyline class=\"" << (which == 0 ? "p50" : "p99") << "\" fill=\"none\" stroke=\""
          << color << "\" stroke-width=\"2\"" << (which == 0 ? "" : " stroke-dasharray=\"6 4\"")
          << " points=\"";
      for (size_t k = 0; k < pts.size(); ++k) {
        svg << (k ? " " : "") << Fmt("%.1f", sx(pts[k].first)) << "," << Fmt("%.1f", sy(pts[k].second));
      }
      svg << "\"/>\n";
      for (const auto& [x, y] : pts) {
        if (which == 0) {
          svg << "    <circle cx=\"" << Fmt("%.1f", sx(x)) << "\" cy=\"" << Fmt("%.1f", sy(y))
              << "\" r=\"3.5\" fill=\"" << color << "\"><title>" << XmlEscape(c.label) << " p50 "
              << Fmt("%.3f", y) << " ms at " << Fmt("%.1f", x) << " infer/s</title></circle>\n";
        } else {
          svg << "    <rect x=\"" << Fmt("%.1f", sx(x) - 3) << "\" y=\"" << Fmt("%.1f", sy(y) - 3)
              << "\" width=\"6\" height=\"6\" fill=\"#ffffff\" stroke=\"" << color << "\"><title>"
              << XmlEscape(c.label) << " p99 " << Fmt("%.3f", y) << " ms at " << Fmt("%.1f", x)
              << " infer/s</title></rect>\n";
        }
      }
    }
    svg << "  </g>\n";
  }
  // Legend: one colour per configuration, then the line styles.
  svg << "  <g class=\"legend\">\n";
  double ly = plot_top + 10;
  for (size_t i = 0; i < curves.size(); ++i) {
    const char* color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    svg << "    <rect x=\"" << legend_x << "\" y=\"" << ly - 9 << "\" width=\"14\" height=\"10\" fill=\"" << color
        << "\"/>\n";
    svg << "    <text x=\"" << legend_x + 20 << "\" y=\"" << ly << "\">" << XmlEscape(curves[i].label)
        << "</text>\n";
    ly += 22;
  }
  ly += 8;
  svg << "    <line x1=\"" << legend_x << "\" y1=\"" << ly - 4 << "\" x2=\"" << legend_x + 24 << "\" y2=\""
      << ly - 4 << "\" stroke=\"#333333\" stroke-width=\"2\"/>\n";
  svg << "    <text x=\"" << legend_x + 30 << "\" y=\"" << ly << "\">p50 latency</text>\n";
  ly += 22;
  svg << "    <line x1=\"" << legend_x << "\" y1=\"" << ly - 4 << "\" x2=\"" << legend_x + 24 << "\" y2=\""
      << ly - 4 << "\" stroke=\"#333333\" stroke-width=\"2\" stroke-dasharray=\"6 4\"/>\n";
  svg << "    <text x=\"" << legend_x + 30 << "\" y=\"" << ly << "\">p99 latency</text>\n";
  svg << "  </g>\n";
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace fastpath::bench
