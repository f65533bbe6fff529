// The report as CSV: one row per point, the label first so that appended runs stay apart.
// New columns go last, so that the columns before them keep their places from older files:
// intra_op_threads (in-process points only), then the --collect-metrics figures, each
// "GPU:value" per GPU joined by ';' (perf_analyzer's way of putting several GPUs in one cell).
#include <optional>
#include <sstream>
#include <string>

#include "fastpath/bench/report.h"
#include "report_internal.h"

namespace fastpath::bench {
namespace {

using internal::ErrorsText;
using internal::Fmt;
using internal::HistogramText;

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// One --collect-metrics figure of every GPU: "0:0.870;1:0.512"; empty when not collected.
std::string PerGpu(const BenchPoint& p, std::optional<double> PointGpu::*figure,
                   const char* format) {
  if (!p.gpu_metrics) return "";
  std::string out;
  for (const PointGpu& g : p.gpu_metrics->gpus) {
    if (!(g.*figure)) continue;
    if (!out.empty()) out += ';';
    out += g.gpu + ':' + Fmt(format, *(g.*figure));
  }
  return CsvField(out);
}

std::string CsvRow(const std::string& label, const BenchReport& r, const BenchPoint& p,
                   const std::string& extra_mode) {
  std::ostringstream row;
  row << CsvField(label) << ',' << CsvField(r.model) << ',' << r.transport << ',' << r.encoding
      << ',' << (extra_mode.empty() ? p.mode : extra_mode) << ',' << p.concurrency << ','
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
      << (p.stable ? "true" : "false") << ','
      << (p.intra_op_threads ? std::to_string(*p.intra_op_threads) : "") << ','
      << PerGpu(p, &PointGpu::utilization_avg, "%.3f") << ','
      << PerGpu(p, &PointGpu::power_avg_w, "%.1f") << ','
      << PerGpu(p, &PointGpu::memory_used_max_bytes, "%.0f") << '\n';
  return row.str();
}

}  // namespace

std::string CsvHeader() {
  return "label,model,transport,encoding,mode,concurrency,request_rate,batch_size,throughput_rps,"
         "throughput_ips,p50_us,p90_us,p95_us,p99_us,max_us,mean_us,requests,errors,errors_by_kind,"
         "server_queue_us,server_compute_us,server_avg_batch,server_batch_histogram,efficiency,"
         "trials,stable,intra_op_threads,gpu_utilization_avg,gpu_power_avg_w,"
         "gpu_memory_used_max_bytes\n";
}

StatusOr<std::string> AppendCsvRows(const std::string& existing, const BenchReport& report) {
  const std::string header = CsvHeader();
  const size_t end = existing.find('\n');
  const std::string old_header = existing.substr(0, end);
  if (existing.empty()) return header + ReportCsvRows(report);
  if (old_header.empty() || header.compare(0, old_header.size(), old_header) != 0 ||
      (header.size() > old_header.size() && header[old_header.size()] != ',' &&
       header[old_header.size()] != '\n')) {
    return InvalidArgument("the CSV file's header is not fastpath bench's (" +
                           old_header.substr(0, 80) +
                           "...): append to a file bench wrote, or write a new one");
  }
  std::string out = header;
  if (end != std::string::npos) out += existing.substr(end + 1);
  if (!out.empty() && out.back() != '\n') out += '\n';
  return out + ReportCsvRows(report);
}

std::string ReportCsvRows(const BenchReport& r) {
  std::string out;
  for (const auto& p : r.in_process) out += CsvRow(r.label, r, p, "");
  for (const auto& p : r.points) out += CsvRow(r.label, r, p, "");
  if (r.calibration) {
    for (const auto& c : r.calibration->candidates) {
      if (!c.ran) continue;
      const std::string label =
          r.label + (c.dynamic_batching ? " mbs=" + std::to_string(c.max_batch_size) +
                                              " delay_us=" + std::to_string(c.max_queue_delay_us)
                                        : " no dynamic batching");
      out += CsvRow(label, r, c.point, "calibration");
    }
  }
  return out;
}

}  // namespace fastpath::bench
