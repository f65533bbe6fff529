// Prometheus metrics of a running server. Pull model: nothing on the request path writes
// to a metric; on each scrape the collector reads the per-model statistics from the
// facade (the same numbers the KServe statistics extension serves) and turns them into
// metric families with Triton's names. prometheus-cpp renders the exposition format.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fastpath/common/allocator.h"
#include "fastpath/common/process_statistics.h"
#include "fastpath/common/status.h"
#include "fastpath/server/server.h"

namespace fastpath::metrics {

// Per model and version (labels `model`, `version`):
//   nv_inference_request_success, nv_inference_request_failure{reason}, nv_inference_count,
//   nv_inference_exec_count, nv_inference_request_duration_us, nv_inference_queue_duration_us,
//   nv_inference_compute_{input,infer,output}_duration_us (counters, cumulative us),
//   nv_inference_pending_request_count (gauge),
//   fastpath_inference_request_duration_seconds, fastpath_inference_queue_duration_seconds,
//   fastpath_inference_compute_infer_duration_seconds (histograms in seconds, buckets 50 us
//   to 10 s) and fastpath_inference_batch_size (histogram).
// Every fastpath_* name passes `promtool check metrics` (base units, counters end in _total);
// Triton's nv_* names are kept as Triton spells them, which that lint does not accept.
// And admission (issue 4 §5, §6), from the facade's Admission():
//   fastpath_server_ready (gauge, 1 when /v2/health/ready answers 200),
//   fastpath_model_state{model,version,state} (gauge, 1 for the model's state among READY,
//   DEGRADED and UNAVAILABLE, 0 for the others), so that `fastpath_model_state{state=
//   "DEGRADED"} == 1` is the alert for a model served below its proven fast path.
// And drift (issue 14 §4), per READY version the drift watch has judged:
//   fastpath_drift_ratio{model,version} (gauge, once the window has enough executions),
//   fastpath_drift_alert{model,version,cause} (gauge, 1 for the cause while drifting).
// And canaries (issue 14 §6), per READY version that declares one:
//   fastpath_canary_runs_total, fastpath_canary_output_mismatch_total,
//   fastpath_canary_failures_total (counters),
//   fastpath_canary_latency_ratio (gauge, once a run has answered).
// And the rollout gate's decisions since start, per model and `outcome` (passed, refused,
// no_baseline, not_measured, canary, promoted,
// rolled_back, ended): fastpath_rollout_decisions_total (counter).
// And memory (issue 13), per READY version's instance (labels `model`, `version`,
// `model_instance`: its index, since Prometheus keeps `instance` for the target; `device`),
// read from the instance's arena at scrape time:
//   fastpath_memory_in_use_bytes, fastpath_memory_reserved_bytes, fastpath_memory_peak_bytes,
//   fastpath_memory_limit_bytes (gauges; the limit only where there is one),
//   fastpath_memory_arena_extensions_total (counter), fastpath_memory_fragmentation_ratio,
//   and once the memory watch has judged it, fastpath_memory_leak_suspected (0/1) and
//   fastpath_memory_leak_slope_bytes_per_second; per version fastpath_memory_oom_total
//   (counter: runs that failed for lack of memory).
class ServerCollector final : public prometheus::Collectable {
 public:
  // `server` is not owned and must outlive the collector.
  explicit ServerCollector(const server::InferenceServer& server) : server_(server) {}
  // Never throws; a facade that cannot answer yields no families.
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const server::InferenceServer& server_;
};

// The families for these statistics; what ServerCollector::Collect returns. Exposed so the
// mapping can be tested without a server.
std::vector<prometheus::MetricFamily> StatisticsFamilies(
    const std::vector<ModelStatistics>& stats);

// The admission families for this report; also part of ServerCollector::Collect.
std::vector<prometheus::MetricFamily> AdmissionFamilies(const admission::AdmissionReport& report);

// The GPU families for the GPU watch's statuses in this report (gpu_metrics.cc); also part of
// ServerCollector::Collect. Per GPU (labels `gpu`, its index, and `uuid`):
//   fastpath_gpu_temperature_celsius, fastpath_gpu_sm_clock_mhz, fastpath_gpu_memory_clock_mhz,
//   fastpath_gpu_utilization_ratio, fastpath_gpu_memory_{used,total}_bytes,
//   fastpath_gpu_power_watts, fastpath_gpu_power_limit_watts,
//   fastpath_gpu_remapped_rows_uncorrectable (gauges; left out where unsupported),
//   fastpath_gpu_clocks_event_active{reason} (0/1), fastpath_gpu_throttle_seconds_total{reason},
//   fastpath_gpu_violation_seconds_total{policy} (NVML's perf-policy counters),
//   fastpath_gpu_ecc_uncorrected_total, fastpath_gpu_xid_total{xid} (counters),
//   fastpath_gpu_quarantined (0/1);
// and Triton's nv_gpu_utilization, nv_gpu_memory_{total,used}_bytes, nv_gpu_power_usage and
// nv_gpu_power_limit (label `gpu_uuid`).
std::vector<prometheus::MetricFamily> GpuFamilies(const admission::AdmissionReport& report);

// The process's heap (common/allocator.h, jemalloc's statistics; nothing where the process's
// malloc is another): fastpath_heap_bytes{kind="allocated|active|resident|retained"}. Also
// part of ServerCollector::Collect, read at each scrape.
std::vector<prometheus::MetricFamily> HeapFamilies(const std::optional<HeapStatistics>& heap);

// The process metrics of Prometheus's client libraries, under their names and help texts
// (common/process_statistics.h): process_cpu_seconds_total, process_start_time_seconds,
// process_{resident,virtual}_memory_bytes, process_open_fds, process_max_fds. Each is left out
// where /proc cannot give it. Also part of ServerCollector::Collect, read at each scrape.
std::vector<prometheus::MetricFamily> ProcessFamilies(const ProcessStatistics& process);

// The Prometheus text exposition of `collectable`'s families (prometheus::TextSerializer).
std::string RenderText(const prometheus::Collectable& collectable);

struct MetricsOptions {
  std::string address = "0.0.0.0";
  int port = 8002;  // 0 picks a free port; port() tells which
};

// Serves GET /metrics over HTTP/1.1 (Boost.Beast, one thread of its own; the text comes from
// RenderText). Anything else is 404/405. Stops at once when destroyed.
class MetricsServer {
 public:
  // `server` is not owned and must outlive the MetricsServer. Fails with InvalidArgument for
  // an address that is not an IP address, Unavailable when it cannot be bound.
  static StatusOr<std::unique_ptr<MetricsServer>> Start(const server::InferenceServer& server,
                                                        const MetricsOptions& options);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return port_; }

 private:
  struct Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl, int port);
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace fastpath::metrics
