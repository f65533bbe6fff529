// `fastpath bench`: the parsed command line, shared by the measurement and the soak
// (bench.cc) and the batching calibration (bench_calibrate.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fastpath/bench/client.h"
#include "fastpath/bench/gpu_sampler.h"
#include "fastpath/bench/load_generator.h"
#include "fastpath/bench/report.h"
#include "fastpath/bench/soak.h"
#include "fastpath/common/log.h"

namespace fastpath::cli {

struct BenchFlags {
  std::string model;
  std::string model_version;
  std::string url;  // empty: localhost:8000 (http) or localhost:8001 (grpc)
  bench::Transport transport = bench::Transport::kHttp;
  bench::Encoding encoding = bench::Encoding::kBinary;
  std::vector<int64_t> concurrency = {1};
  std::vector<int64_t> request_rates;  // non-empty: fixed-rate mode
  int64_t batch_size = 1;
  std::map<std::string, std::vector<int64_t>> shapes;
  int64_t request_pool = 16;
  bench::MeasureOptions measure;
  std::string label;
  std::string json_path;
  std::string csv_path;
  std::string svg_path;
  bool append = false;
  bool quiet = false;
  // In-process ceiling.
  bool in_process = false;
  bool no_server = false;
  std::string model_repository;
  std::vector<int64_t> batch_sizes = {1, 2, 4, 8, 16, 32};
  // --in-process-threads: the intra-op thread counts measured besides the model's own
  // setting; empty: 1 to the usable cores (the affinity mask capped by the cgroup quota).
  std::vector<int64_t> in_process_threads;
  // Batching calibration.
  bool calibrate = false;
  std::optional<double> slo_p99_ms;
  std::vector<int64_t> queue_delays_us = {0, 500, 1000, 2000, 5000, 10000};
  std::vector<int64_t> max_batch_sizes = {4, 8, 16, 32};
  bool skip_baseline = false;
  // Soak (--soak): one concurrency held for the whole duration, reported per window.
  std::optional<std::chrono::milliseconds> soak;
  std::chrono::milliseconds soak_window{60000};
  std::optional<bench::MetricsUrl> metrics_url;  // nullopt: the server's host, port 8002
  // --collect-metrics: the server's GPUs scraped through every point.
  bool collect_metrics = false;
  std::chrono::milliseconds metrics_interval{1000};
  std::string command_line;
  log::Options logging;
};

// Prints progress on stderr: a \r-updated line on a terminal, one terse line per point
// otherwise.
class ProgressLine {
 public:
  explicit ProgressLine(bool quiet);
  void Update(const std::string& line);
  void EndPoint();

 private:
  bool quiet_;
  bool tty_;
  std::string last_;
};

// Measures every load point of `flags` on `target` into `report->points`, each with the GPU
// figures of `gpus` over its windows when given (--collect-metrics). Returns the first fatal
// error (a point that could not run at all).
Status MeasureServerPoints(bench::Target& target, const BenchFlags& flags, ProgressLine& progress,
                           bench::BenchReport* report, bench::GpuSampler* gpus = nullptr);

// Builds the request set from the target's metadata and prepares it.
Status PrepareRequests(bench::Target& target, const BenchFlags& flags, int64_t batch_size);

// --calibrate-batching. Fills report->calibration; the error is fatal (usage or set-up).
Status RunCalibration(const BenchFlags& flags, ProgressLine& progress, bench::BenchReport* report);

}  // namespace fastpath::cli
