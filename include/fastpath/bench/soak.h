// `fastpath bench --soak DURATION` (issue 14 §7): one concurrency held against a server for
// the whole duration, reported per window (throughput, p50/p95/p99, errors, the drift from
// the first window) beside the server's GPU temperature, SM clock, power and clock-event
// reasons, scraped from its Prometheus /metrics at every window's end. The load and the
// windows are the load generator's (MeasureSoak); this module adds the duration flags, the
// metrics scrape and its parsing, the per-window GPU fields and the drift. The table and the
// JSON are the report's writers (report.h: BenchReport::soak); the SVG is RenderSoakSvg.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fastpath/bench/client.h"
#include "fastpath/bench/load_generator.h"
#include "fastpath/bench/report.h"
#include "fastpath/common/duration.h"
#include "fastpath/common/status.h"

namespace fastpath::bench {

class GpuSampler;

// A soak's duration or window (common/duration.h), from 1 s to 7 days. InvalidArgument
// naming `flag` otherwise; FormatDuration writes it back.
StatusOr<std::chrono::milliseconds> ParseSoakDuration(std::string_view text, std::string_view flag);

// Where the server's Prometheus text is.
struct MetricsUrl {
  std::string host;
  int port = 8002;
  std::string path = "/metrics";
};
// "HOST[:PORT][/PATH]", with or without "http://"; the port defaults to 8002 (Triton's, and
// `fastpath serve`'s) and the path to /metrics. InvalidArgument naming --metrics-url.
StatusOr<MetricsUrl> ParseMetricsUrl(std::string_view text);
// The measured server's host, port 8002, /metrics.
MetricsUrl DefaultMetricsUrl(const ServerAddress& server);
// "http://host:8002/metrics" ("[::1]" for an IPv6 host).
std::string DescribeMetricsUrl(const MetricsUrl& url);

// One GET of the metrics text.
class MetricsSource {
 public:
  virtual ~MetricsSource() = default;
  // The body of a 200 answer; Unavailable otherwise, saying why.
  virtual StatusOr<std::string> Scrape() = 0;
  virtual std::string Describe() const = 0;
};
// HTTP/1.1, a new connection per scrape, and `timeout` for the whole exchange: a server that
// hangs costs a window its GPU fields, never the soak.
std::unique_ptr<MetricsSource> MakeHttpMetricsSource(const MetricsUrl& url,
                                                     std::chrono::milliseconds timeout);

// One GPU's series in one scrape.
struct GpuMetrics {
  std::string gpu;  // the "gpu" label
  std::string uuid;
  std::optional<double> temperature_c;  // fastpath_gpu_temperature_celsius
  std::optional<double> sm_clock_mhz;   // fastpath_gpu_sm_clock_mhz
  std::optional<double> power_w;        // fastpath_gpu_power_watts
  std::optional<double> utilization_ratio;   // fastpath_gpu_utilization_ratio
  std::optional<double> memory_used_bytes;   // fastpath_gpu_memory_used_bytes
  std::optional<double> memory_total_bytes;  // fastpath_gpu_memory_total_bytes
  // fastpath_gpu_clocks_event_active{reason}: reason -> 0/1; empty when none is exported.
  std::map<std::string, double> clocks_event_active;
  // fastpath_gpu_throttle_seconds_total{reason}: seconds since the server started.
  std::map<std::string, double> throttle_seconds_total;
};

// Those eight families of a Prometheus text exposition, one entry per "gpu" label in numeric
// order; every other line is skipped. No GPU series at all (a server without a GPU): an
// empty vector. A sample line of one of the eight that does not parse, or that has no "gpu"
// label (no "reason" label for the per-reason two): InvalidArgument naming its line.
StatusOr<std::vector<GpuMetrics>> ParseGpuMetrics(std::string_view text);

// A window's GPU fields from the scrapes at its start and end. `start` nullopt: that scrape
// failed, so the throttle time within the window is unknown. A reason's counter that went
// down (the server restarted), or a GPU whose UUID changed, counts from 0.
std::vector<SoakGpu> SoakGpusBetween(const std::optional<std::vector<GpuMetrics>>& start,
                                     const std::vector<GpuMetrics>& end);

// Sets every window's throughput_ratio and p95_ratio against the first window.
void ComputeSoakDrift(SoakResult* soak);

// The headline of a soak: the drift of the last window and the worst window.
struct SoakDriftSummary {
  std::optional<double> last_throughput_ratio;
  std::optional<double> last_p95_ratio;
  std::optional<double> min_throughput_ratio;  // the lowest over the windows
  int min_throughput_window = 0;
  std::optional<double> max_p95_ratio;  // the highest
  int max_p95_window = 0;
};
// nullopt with fewer than one window.
std::optional<SoakDriftSummary> SummarizeSoakDrift(const SoakResult& soak);

struct SoakOptions {
  int64_t concurrency = 1;
  MeasureOptions measure;  // warmup, batch_size, seed, progress
  SoakSchedule schedule;
  // Scraped when each window starts and ends; null: no GPU fields.
  MetricsSource* metrics = nullptr;
  // Scrapes through the windows, for each GPU's average utilization and peak memory in each;
  // null: those two stay absent.
  GpuSampler* sampler = nullptr;
  // Each window as it ends (drift included), for a progress line.
  std::function<void(const SoakWindow&)> on_window;
};

// The soak: MeasureSoak with a scrape at every boundary. Fails only when the load cannot
// start; a failed scrape is the window's metrics_error.
StatusOr<SoakResult> RunSoak(Target& target, const SoakOptions& options);

// Against the time since the soak started, one point per window at its end, in two panels:
// latency percentiles (p50, p95, p99; left scale, ms) with each GPU's temperature (right
// scale, degrees C) above, throughput (left, infer/s) with each GPU's utilization (right, %)
// below. A right scale without its GPU readings says they are absent. A self-contained SVG.
std::string RenderSoakSvg(const BenchReport& report, const std::string& title);

}  // namespace fastpath::bench
