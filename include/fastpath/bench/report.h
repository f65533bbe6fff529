// What `fastpath bench` measured and how it is written down: the result of every load
// point, the server-side split taken from statistics deltas, and the writers for the
// terminal table, JSON, CSV and the SVG latency-throughput plot. The JSON is also read
// back (ReadReportsJson) so that several runs can be merged into one plot.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fastpath/bench/measurement.h"
#include "fastpath/common/status.h"

namespace fastpath::bench {

// Cumulative count and nanoseconds, as the KServe statistics extension reports them.
struct StatDuration {
  uint64_t count = 0;
  uint64_t ns = 0;
};

// One model version's statistics at one moment (GET /v2/models/{m}/stats).
struct ModelStatsSnapshot {
  uint64_t inference_count = 0;
  uint64_t execution_count = 0;
  StatDuration success;
  StatDuration fail;
  StatDuration queue;
  StatDuration compute_input;
  StatDuration compute_infer;
  StatDuration compute_output;
  // batch size -> executions at that size (the compute_infer count of batch_stats).
  std::map<uint64_t, uint64_t> batch_executions;
};

// Where the server spent a request's time during a measurement, from two snapshots.
struct ServerSplit {
  bool available = false;      // false: the server has no statistics endpoint
  uint64_t requests = 0;       // successful requests the server counted
  uint64_t failed = 0;
  uint64_t executions = 0;     // model executions (batches)
  double queue_us = 0;         // average per request
  double compute_input_us = 0;
  double compute_infer_us = 0;
  double compute_output_us = 0;
  double compute_us() const { return compute_input_us + compute_infer_us + compute_output_us; }
  double average_batch = 0;    // batch elements per execution
  std::map<uint64_t, uint64_t> batch_histogram;  // batch size -> executions
};

// `after` minus `before`; counters that went backwards (a model reload) give an
// unavailable split rather than nonsense.
ServerSplit DiffStats(const ModelStatsSnapshot& before, const ModelStatsSnapshot& after);

// --collect-metrics: one GPU of the server over a point's measured windows, from the scrapes
// of its Prometheus /metrics taken then (the fastpath_gpu_* series labelled gpu="N"), the
// figures perf_analyzer's --collect-metrics reports. A figure the server does not export is
// nullopt: absent, never 0.
struct PointGpu {
  std::string gpu;  // the "gpu" label: the index the server gives it
  std::string uuid;
  int scrapes = 0;                              // the scrapes that carried this GPU
  std::optional<double> utilization_avg;        // mean of fastpath_gpu_utilization_ratio, 0..1
  std::optional<double> power_avg_w;            // mean of fastpath_gpu_power_watts
  std::optional<double> memory_used_max_bytes;  // the largest fastpath_gpu_memory_used_bytes
  std::optional<double> memory_total_bytes;
};

// --collect-metrics: what the scrapes within a point's measured windows showed.
struct PointGpuMetrics {
  int scrapes = 0;             // scrapes taken within the windows, failed ones included
  int failed = 0;              // of those, the ones that failed or did not parse
  std::string error;           // the first failure's message; empty when none failed
  std::vector<PointGpu> gpus;  // in the server's GPU order; empty: no GPU series (a CPU server)
};

// One measured point: a concurrency, a request rate, or an in-process batch size.
struct BenchPoint {
  std::string mode;            // "concurrency", "request_rate" or "in_process"
  int64_t concurrency = 0;     // workers (in-process: sessions)
  double request_rate = 0;     // requests per second asked for (request_rate mode)
  int64_t batch_size = 1;      // batch elements per request
  double throughput_rps = 0;   // completed requests per second
  double throughput_ips = 0;   // inferences (batch elements) per second
  LatencySummary latency;
  uint64_t requests = 0;       // completed successfully in the measured windows
  uint64_t errors = 0;
  std::map<std::string, uint64_t> errors_by_kind;  // "http_503", "grpc_UNAVAILABLE", "connect", ...
  std::map<std::string, std::string> error_samples; // kind -> first message seen
  uint64_t late_sends = 0;     // request_rate mode: sends that missed their slot by > 1 ms
  // In-process with one ORT thread: inferences/s from the runs' CPU time (what the runs
  // would reach on an otherwise idle core); unset elsewhere.
  std::optional<double> cpu_ceiling_ips;
  // In-process: the ORT intra-op threads of each session it ran with; unset for server
  // points and in files written before the thread sweep.
  std::optional<int64_t> intra_op_threads;
  int trials = 0;              // windows measured
  bool stable = false;
  double measured_seconds = 0; // length of the windows the numbers come from
  ServerSplit server;
  std::optional<double> efficiency;  // throughput_ips / best in-process throughput_ips
  // --collect-metrics (server points): the server's GPUs meanwhile; nullopt when not collected.
  std::optional<PointGpuMetrics> gpu_metrics;
};

// A calibration candidate (--calibrate-batching): one server configuration.
struct CalibrationCandidate {
  bool dynamic_batching = true;   // false: the baseline without a batcher
  int64_t max_batch_size = 0;
  int64_t max_queue_delay_us = 0;
  bool ran = false;               // false: the server did not start or the run failed
  std::string failure;
  BenchPoint point;
};

struct CalibrationResult {
  double slo_p99_ms = 0;
  int64_t concurrency = 0;
  std::vector<CalibrationCandidate> candidates;  // candidates[0] is the baseline when present
  std::optional<size_t> chosen;                  // index into candidates
};

// The best-throughput candidate that ran with no errors, used dynamic batching, and has
// p99 at or under the SLO; ties go to the lower p99. nullopt when none qualifies.
std::optional<size_t> ChooseCalibration(const std::vector<CalibrationCandidate>& candidates,
                                        double slo_p99_ms);
// The config.pbtxt lines to paste for a candidate.
std::string BatchingConfigSnippet(const CalibrationCandidate& candidate);

// --soak: one GPU of the server at the end of a soak window, from its Prometheus /metrics
// (the fastpath_gpu_* series labelled gpu="N"). A reading the server does not export is
// nullopt: absent, never 0.
struct SoakGpu {
  std::string gpu;  // the "gpu" label: the index the server gives it
  std::string uuid;
  std::optional<double> temperature_c;
  std::optional<double> sm_clock_mhz;
  std::optional<double> power_w;
  // The clock-event reasons exported as active (1) at the window's end, in label order;
  // nullopt when the server exports no reasons for this GPU (NVML does not support them).
  std::optional<std::vector<std::string>> active_reasons;
  // Seconds throttled per reason within the window (the fastpath_gpu_throttle_seconds_total
  // increase from the window's start to its end; reasons that did not increase are left
  // out); nullopt when unknown: no reasons exported, or no scrape at the window's start.
  std::optional<std::map<std::string, double>> throttle_seconds;
  // The mean of fastpath_gpu_utilization_ratio and the largest fastpath_gpu_memory_used_bytes
  // over the scrapes taken through the window (GpuSampler, every --metrics-interval-ms); nullopt
  // when none of them carried the reading.
  std::optional<double> utilization_avg;
  std::optional<double> memory_used_max_bytes;
};

// --soak: one window of the continuous load. Windows follow one another with no gap.
struct SoakWindow {
  int index = 0;       // 1-based
  double start_s = 0;  // from the start of the first window
  double end_s = 0;
  BenchPoint load;  // this window alone: throughput, latency, errors, server split
  // Drift from the first window: throughput_ips over the first's, p95 over the first's;
  // nullopt when the first window completed no request.
  std::optional<double> throughput_ratio;
  std::optional<double> p95_ratio;
  std::vector<SoakGpu> gpus;  // empty: the server exports no GPU series (or was not scraped)
  std::string metrics_error;  // why the scrape at the window's end failed; empty when it worked
};

struct SoakResult {
  int64_t concurrency = 0;
  double duration_s = 0;  // asked for
  double window_s = 0;
  std::string metrics_url;   // "" when the metrics were not scraped
  bool interrupted = false;  // stopped early (SIGINT): the windows measured until then
  std::vector<SoakWindow> windows;
};

// One run of `fastpath bench`.
struct BenchReport {
  std::string label;        // the configuration's name: one curve per label in the plot
  std::string model;
  std::string model_version;
  std::string transport;    // "http", "grpc" or "" (in-process only)
  std::string encoding;     // "json", "binary"
  std::string url;
  std::string command;      // the command line, to rerun it
  std::string started_at;   // ISO 8601 UTC
  std::string fastpath_version;
  uint64_t seed = 0;
  std::vector<BenchPoint> points;      // against the server
  std::vector<BenchPoint> in_process;  // ORT directly, per intra-op thread count and batch size
  // The model's own intra-op threads (its config's, else 1): the in-process points with this
  // intra_op_threads are "the model's own setting". Unset in files from before the sweep,
  // where every in-process point (none has intra_op_threads) counts as the own setting.
  std::optional<int64_t> in_process_own_threads;
  // The ceiling: the best in-process throughput_ips over every thread count and batch size,
  // and where it was reached (best_in_process_threads unset when that point has none).
  std::optional<double> best_in_process_ips;
  std::optional<int64_t> best_in_process_threads;
  std::optional<int64_t> best_in_process_batch_size;
  std::optional<double> efficiency;    // best server throughput_ips / best in-process
  // The best in-process throughput_ips at the model's own setting only, and the best server
  // throughput_ips over it: what the report said before the thread sweep.
  std::optional<double> in_process_own_ips;
  std::optional<double> efficiency_vs_own_setting;
  // The same against the best in-process CPU-time ceiling: robust on a busy machine, where a
  // CPU-bound loop is descheduled more than a server thread that sleeps between batches.
  std::optional<double> best_in_process_cpu_ceiling_ips;
  std::optional<double> efficiency_vs_cpu_ceiling;
  std::optional<CalibrationResult> calibration;
  std::optional<SoakResult> soak;  // --soak: instead of points
};

// Sets best_in_process_ips (the best over every in-process point that completed a request,
// the first measured on a tie) with its thread count and batch size, in_process_own_ips (the
// same over the points at in_process_own_threads), the CPU-time ceiling, the report's three
// efficiencies (each the best server point's) and every server point's (against the best).
void ComputeEfficiency(BenchReport* report);

// {"runs": [report, ...]}: a file holds one or more runs (--append adds one).
std::string ReportsToJson(const std::vector<BenchReport>& reports);
StatusOr<std::vector<BenchReport>> ReadReportsJson(std::string_view text, std::string_view source);

// One header line and one row per point (server, in-process and calibration points);
// the first column is the label, so appended runs stay distinguishable.
std::string CsvHeader();
std::string ReportCsvRows(const BenchReport& report);
// `existing` (a CSV file's text) with `report`'s rows appended (bench --csv --append). A file
// written before the last columns were added gets today's header, so that the new rows'
// fields have names (its own rows leave those columns empty); a file whose header is not a
// start of today's is another table, and an error says so.
StatusOr<std::string> AppendCsvRows(const std::string& existing, const BenchReport& report);

// The human-readable table (a soak's: one row per window, see soak.h).
std::string RenderTable(const BenchReport& report);

// Latency (p50 solid, p99 dashed) against throughput, one colour per run label, for
// every server and in-process point that completed a request. A self-contained SVG.
std::string RenderLatencyThroughputSvg(const std::vector<BenchReport>& reports,
                                       const std::string& title);

// Escapes &, <, >, " and ' for XML text and attributes.
std::string XmlEscape(std::string_view text);

}  // namespace fastpath::bench
