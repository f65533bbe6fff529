// What the report is computed from: the server-side split (DiffStats), the calibration
// choice and the efficiency ratios; and the formatting helpers the writers share
// (report_internal.h). Each writer has its own file: report_json.cc, report_csv.cc,
// report_table.cc, report_svg.cc.
#include "fastpath/bench/report.h"

#include <cstdio>
#include <sstream>

#include "report_internal.h"

namespace fastpath::bench {
namespace {

double SafeDiv(double a, double b) { return b > 0 ? a / b : 0; }

uint64_t Sub(uint64_t a, uint64_t b, bool* backwards) {
  if (a < b) {
    *backwards = true;
    return 0;
  }
  return a - b;
}

}  // namespace

namespace internal {

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
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

}  // namespace internal

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
  report->best_in_process_threads.reset();
  report->best_in_process_batch_size.reset();
  report->efficiency.reset();
  report->in_process_own_ips.reset();
  report->efficiency_vs_own_setting.reset();
  report->best_in_process_cpu_ceiling_ips.reset();
  report->efficiency_vs_cpu_ceiling.reset();
  for (const auto& p : report->in_process) {
    if (p.requests == 0) continue;
    if (p.cpu_ceiling_ips && (!report->best_in_process_cpu_ceiling_ips ||
                              *p.cpu_ceiling_ips > *report->best_in_process_cpu_ceiling_ips)) {
      report->best_in_process_cpu_ceiling_ips = p.cpu_ceiling_ips;
    }
    // Strictly greater: on a tie the point measured first (the model's own setting) stays.
    if (!report->best_in_process_ips || p.throughput_ips > *report->best_in_process_ips) {
      report->best_in_process_ips = p.throughput_ips;
      report->best_in_process_threads = p.intra_op_threads;
      report->best_in_process_batch_size = p.batch_size;
    }
    if (p.intra_op_threads == report->in_process_own_threads &&
        (!report->in_process_own_ips || p.throughput_ips > *report->in_process_own_ips)) {
      report->in_process_own_ips = p.throughput_ips;
    }
  }
  // The best server point over `ceiling`, into `out`.
  auto best_over = [report](const std::optional<double>& ceiling, std::optional<double>* out) {
    if (!ceiling || *ceiling <= 0) return;
    for (const auto& p : report->points) {
      if (p.requests == 0) continue;
      const double e = p.throughput_ips / *ceiling;
      if (!*out || e > **out) *out = e;
    }
  };
  for (auto& p : report->points) {
    p.efficiency.reset();
    if (report->best_in_process_ips && *report->best_in_process_ips > 0 && p.requests > 0) {
      p.efficiency = p.throughput_ips / *report->best_in_process_ips;
    }
  }
  best_over(report->best_in_process_ips, &report->efficiency);
  best_over(report->in_process_own_ips, &report->efficiency_vs_own_setting);
  best_over(report->best_in_process_cpu_ceiling_ips, &report->efficiency_vs_cpu_ceiling);
}

}  // namespace fastpath::bench
