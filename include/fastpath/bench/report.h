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
  int trials = 0;              // windows measured
  bool stable = false;
  double measured_seconds = 0; // length of the windows the numbers come from
  ServerSplit server;
  std::optional<double> efficiency;  // throughput_ips / best in-process throughput_ips
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
  std::vector<BenchPoint> in_process;  // ORT directly, per batch size
  std::optional<double> best_in_process_ips;
  std::optional<double> efficiency;    // best server throughput_ips / best in-process
  // The same against the best in-process CPU-time ceiling: robust on a busy machine, where a
  // CPU-bound loop is descheduled more than a server thread that sleeps between batches.
  std::optional<double> best_in_process_cpu_ceiling_ips;
  std::optional<double> efficiency_vs_cpu_ceiling;
  std::optional<CalibrationResult> calibration;
};

// Sets best_in_process_ips, the report's efficiency and every server point's.
void ComputeEfficiency(BenchReport* report);

// {"runs": [report, ...]}: a file holds one or more runs (--append adds one).
std::string ReportsToJson(const std::vector<BenchReport>& reports);
StatusOr<std::vector<BenchReport>> ReadReportsJson(std::string_view text, std::string_view source);

// One header line and one row per point (server, in-process and calibration points);
// the first column is the label, so appended runs stay distinguishable.
std::string CsvHeader();
std::string ReportCsvRows(const BenchReport& report);

// The human-readable table.
std::string RenderTable(const BenchReport& report);

// Latency (p50 solid, p99 dashed) against throughput, one colour per run label, for
// every server and in-process point that completed a request. A self-contained SVG.
std::string RenderLatencyThroughputSvg(const std::vector<BenchReport>& reports,
                                       const std::string& title);

// Escapes &, <, >, " and ' for XML text and attributes.
std::string XmlEscape(std::string_view text);

}  // namespace fastpath::bench
