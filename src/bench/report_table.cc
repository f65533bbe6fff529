// The report as the terminal table `fastpath bench` prints.
#include <cstdio>
#include <optional>
#include <sstream>

#include "fastpath/bench/report.h"
#include "report_internal.h"

namespace fastpath::bench {

using internal::ErrorsText;
using internal::Fmt;
using internal::HistogramText;

namespace {

// --collect-metrics under a point: a line per GPU, or why there is none.
std::string GpuMetricsText(const std::string& prefix, const PointGpuMetrics& m) {
  std::ostringstream out;
  const std::string scrapes = std::to_string(m.scrapes) + " scrape" + (m.scrapes == 1 ? "" : "s");
  if (m.scrapes == 0) {
    out << prefix << "GPU metrics: no scrape fell within the windows (raise them or lower "
        << "--metrics-interval-ms)\n";
  } else if (m.failed == m.scrapes) {
    out << prefix << "GPU metrics: all " << scrapes << " failed: " << m.error << "\n";
  } else if (m.gpus.empty()) {
    out << prefix << "GPU metrics: the server exports no GPU series (" << scrapes << ")\n";
  }
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  for (const PointGpu& g : m.gpus) {
    out << prefix << "GPU " << g.gpu << (g.uuid.empty() ? "" : " (" + g.uuid + ")")
        << ": utilization " << (g.utilization_avg ? Fmt("%.2f", *g.utilization_avg) : "-")
        << " avg, power " << (g.power_avg_w ? Fmt("%.1f", *g.power_avg_w) + " W" : "-")
        << " avg, memory used "
        << (g.memory_used_max_bytes ? Fmt("%.2f", *g.memory_used_max_bytes / kGiB) : "-") << " of "
        << (g.memory_total_bytes ? Fmt("%.2f", *g.memory_total_bytes / kGiB) : "-")
        << " GiB at most (" << g.scrapes << " scrape" << (g.scrapes == 1 ? "" : "s") << ")\n";
  }
  if (m.failed > 0 && m.failed < m.scrapes) {
    out << prefix << "GPU metrics: " << m.failed << " of " << scrapes << " failed: " << m.error
        << "\n";
  }
  return out.str();
}

}  // namespace

std::string RenderTable(const BenchReport& r) {
  std::ostringstream out;
  auto header = [&](bool server) {
    char line[512];
    std::snprintf(line, sizeof(line), "%-13s %5s %10s %10s %9s %9s %9s %9s %9s%s\n", "point",
                  "batch", "req/s", "infer/s", "p50 ms", "p90 ms", "p95 ms", "p99 ms", "max ms",
                  server ? "  queue ms  compute ms  avg batch  errors" : "");
    out << line;
  };
  auto row = [&](const BenchPoint& p, const std::string& name, bool server) {
    char line[512];
    std::snprintf(line, sizeof(line), "%-13s %5lld %10.1f %10.1f %9.3f %9.3f %9.3f %9.3f %9.3f",
                  name.c_str(), static_cast<long long>(p.batch_size), p.throughput_rps,
                  p.throughput_ips, p.latency.p50_us / 1000, p.latency.p90_us / 1000,
                  p.latency.p95_us / 1000, p.latency.p99_us / 1000, p.latency.max_us / 1000);
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
    if (p.mode == "request_rate" && p.throughput_rps < 0.95 * p.request_rate) {
      // Behind the schedule: the server (or this client) could not keep the rate, and the
      // latencies, timed from each send, leave out the wait behind the backlog.
      out << "  (the rate was not reached: " << p.late_sends
          << " sends late; latencies omit the backlog's wait)";
    } else if (p.late_sends > 0) {
      out << "  (" << p.late_sends << " sends late: raise --max-threads)";
    }
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
  if (r.soak) return out.str() + internal::SoakTable(r);
  if (!r.in_process.empty()) {
    out << "\nin-process ONNX Runtime (no server):\n";
    header(false);
    // A heading wherever the thread count changes (points without one: none).
    std::optional<int64_t> threads;
    for (const auto& p : r.in_process) {
      if (p.intra_op_threads && p.intra_op_threads != threads) {
        out << "intra-op threads " << *p.intra_op_threads
            << (p.intra_op_threads == r.in_process_own_threads ? " (the model's own setting)" : "")
            << ":\n";
      }
      threads = p.intra_op_threads;
      row(p, "batch=" + std::to_string(p.batch_size), false);
    }
  }
  if (!r.points.empty()) {
    out << "\nserver:\n";
    header(true);
    for (const auto& p : r.points) row(p, point_name(p), true);
    for (const auto& p : r.points) {
      if (p.server.available && !p.server.batch_histogram.empty() && p.server.average_batch > 1.0) {
        out << "  " << point_name(p) << " batches formed (size:count): " << HistogramText(p.server)
            << "\n";
      }
      for (const auto& [kind, message] : p.error_samples) {
        out << "  " << point_name(p) << " " << kind << ": " << message << "\n";
      }
      if (p.gpu_metrics) out << GpuMetricsText("  " + point_name(p) + " ", *p.gpu_metrics);
    }
  }
  if (r.best_in_process_ips) {
    auto threads_text = [](int64_t n) {
      return std::to_string(n) + " intra-op thread" + (n == 1 ? "" : "s");
    };
    out << "\nin-process ceiling (the best in-process point): "
        << Fmt("%.1f", *r.best_in_process_ips) << " infer/s at ";
    if (r.best_in_process_threads) out << threads_text(*r.best_in_process_threads) << ", ";
    out << "batch " << r.best_in_process_batch_size.value_or(0) << "\n";
    if (r.in_process_own_ips && r.in_process_own_threads) {
      out << "in-process at the model's own setting (" << threads_text(*r.in_process_own_threads)
          << "): " << Fmt("%.1f", *r.in_process_own_ips) << " infer/s\n";
    }
  }
  if (r.best_in_process_ips && r.efficiency) {
    out << "efficiency (best server infer/s / the in-process ceiling): "
        << Fmt("%.3f", *r.efficiency) << "\n";
    if (r.efficiency_vs_own_setting && r.in_process_own_threads) {
      out << "efficiency vs the model's own setting: " << Fmt("%.3f", *r.efficiency_vs_own_setting)
          << "\n";
    }
    if (r.efficiency_vs_cpu_ceiling && r.best_in_process_cpu_ceiling_ips) {
      out << "efficiency vs the in-process CPU-time ceiling: "
          << Fmt("%.3f", *r.efficiency_vs_cpu_ceiling) << " (ceiling "
          << Fmt("%.1f", *r.best_in_process_cpu_ceiling_ips)
          << " infer/s: the runs' own CPU time, not counting time descheduled)\n";
    }
  }
  if (r.calibration) {
    const auto& c = *r.calibration;
    out << "\nbatching calibration at concurrency " << c.concurrency
        << ", SLO p99 <= " << Fmt("%g", c.slo_p99_ms) << " ms:\n";
    char line[256];
    std::snprintf(line, sizeof(line), "%-22s %10s %9s %9s  %s\n", "configuration", "infer/s",
                  "p99 ms", "avg batch", "status");
    out << line;
    for (size_t i = 0; i < c.candidates.size(); ++i) {
      const auto& cand = c.candidates[i];
      const std::string name = cand.dynamic_batching
                                   ? "mbs=" + std::to_string(cand.max_batch_size) +
                                         " delay=" + std::to_string(cand.max_queue_delay_us) + "us"
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

}  // namespace fastpath::bench
