// `fastpath bench`: the project's own perf_analyzer. Measures a served model over HTTP or
// gRPC at a sweep of concurrencies or request rates, optionally against the same model run
// in-process on ONNX Runtime (the ceiling), calibrates the dynamic batcher against a p99
// SLO, or soaks the server at one concurrency with its GPU readings per window; writes a
// table, JSON, CSV and an SVG plot.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "bench_flags.h"
#include "cli.h"
#include "command_line.h"
#include "fastpath/common/decimal.h"
#include "fastpath/common/log.h"
#include "fastpath/config/model_config.h"
#include "fastpath/gpu/capability_snapshot.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/repository/model_repository.h"

namespace fastpath::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kBenchUsage = R"(usage: fastpath bench -m MODEL [options]
       fastpath bench -m MODEL --soak DURATION [--soak-window DURATION] [--concurrency N] [options]
       fastpath bench plot --svg OUT.svg [--title TEXT] REPORT.json...)";

StatusOr<double> ParseDouble(const std::string& flag, const std::string& text, double lo) {
  const double v = ParseDecimal(text).value_or(NAN);
  if (!(v >= lo) || v > 1e12) {
    return InvalidArgument(flag + " must be a number >= " + std::to_string(lo) + ", not '" + text + "'");
  }
  return v;
}

std::string QuoteArg(const std::string& a) {
  if (!a.empty() && a.find_first_of(" \t\"'\\$`") == std::string::npos) return a;
  std::string out = "'";
  for (char c : a) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string FormatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

std::string JoinInts(const std::vector<int64_t>& values) {
  std::string out;
  for (int64_t v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

// An option whose value one of bench's parsers (range specs, lists, enums) reads into `target`.
template <typename T>
CLI::Option* AddParsed(CLI::App& app, const std::string& names, const std::string& value_name,
                       const std::string& help, const std::string& default_text, T* target,
                       std::function<StatusOr<T>(const std::string&)> parse) {
  return AddValue(app, names, value_name, help, default_text,
                  [target, parse = std::move(parse)](const std::string& value) -> Status {
                    FASTPATH_ASSIGN_OR_RETURN(*target, parse(value));
                    return Status::Ok();
                  });
}

// The options that the checks after parsing look at.
struct BenchOptions {
  CLI::Option* concurrency = nullptr;
  CLI::Option* soak_window = nullptr;
  CLI::Option* metrics_url = nullptr;
  CLI::Option* metrics_interval = nullptr;
};

// Each connection is a socket and each scheduled request a timer: past these a point is a
// mistake in the spec (a range written to INT64_MAX), not a load to generate.
constexpr int64_t kMaxConcurrency = 65536;
constexpr int64_t kMaxRequestRate = 10'000'000;

StatusOr<std::vector<int64_t>> AtMost(const std::string& spec, const char* flag, int64_t most) {
  FASTPATH_ASSIGN_OR_RETURN(std::vector<int64_t> values, bench::ParseRangeSpec(spec, flag));
  for (const int64_t v : values) {
    if (v > most) {
      return InvalidArgument(std::string(flag) + ": " + std::to_string(v) + " is more than " +
                             std::to_string(most));
    }
  }
  return values;
}

BenchOptions DefineBenchOptions(CLI::App& app, BenchFlags& f) {
  BenchOptions o;
  app.option_defaults()->group("target");
  AddText(app, "-m,--model", "NAME", &f.model, "model to measure")->required();
  AddText(app, "--model-version", "V", &f.model_version, "version (default: the server's choice)");
  CLI::Option* url = AddText(app, "-u,--url", "HOST:PORT", &f.url,
                             "server (default localhost:8000 for http, localhost:8001 for grpc)");
  AddParsed<bench::Transport>(app, "-i,--protocol,--transport", "http|grpc", "transport",
                              bench::TransportName(f.transport), &f.transport,
                              [](const std::string& v) { return bench::ParseTransport(v); });
  AddParsed<bench::Encoding>(app, "--encoding", "binary|json",
                             "HTTP body encoding (binary: the binary tensor extension)",
                             bench::EncodingName(f.encoding), &f.encoding,
                             [](const std::string& v) { return bench::ParseEncoding(v); });

  app.option_defaults()->group("inputs");
  AddInt(app, "-b,--batch-size", "N", &f.batch_size, 1, 1 << 20, "batch elements per request");
  AddRepeatedValue(
      app, "--shape", "NAME:D1,D2,...", "dims for an input's dynamic dims (repeatable)",
      [&f](const std::string& value) -> Status {
        FASTPATH_ASSIGN_OR_RETURN(auto shape, bench::ParseShapeOverride(value));
        if (!f.shapes.emplace(shape.first, shape.second).second) {
          return InvalidArgument("--shape given twice for input '" + shape.first + "'");
        }
        return Status::Ok();
      });
  AddInt(
      app, "--seed", "N", 0, INT64_MAX, static_cast<int64_t>(f.measure.seed),
      [&f](int64_t seed) { f.measure.seed = static_cast<uint64_t>(seed); },
      "seed of the deterministic inputs");
  AddInt(app, "--request-pool", "N", &f.request_pool, 1, 4096, "distinct requests cycled through");

  app.option_defaults()->group("load");
  o.concurrency = AddParsed<std::vector<int64_t>>(
      app, "--concurrency,--concurrency-range", "SPEC",
      "closed loop: 16 | 1,8,16,32 | 1:32:4 (linear) | 1:32:2x (32 with --calibrate-batching)",
      JoinInts(f.concurrency), &f.concurrency,
      [](const std::string& v) { return AtMost(v, "--concurrency", kMaxConcurrency); });
  CLI::Option* request_rate = AddParsed<std::vector<int64_t>>(
      app, "--request-rate,--request-rate-range", "SPEC",
      "open loop at R requests/s instead (same SPEC forms)", "", &f.request_rates,
      [](const std::string& v) { return AtMost(v, "--request-rate", kMaxRequestRate); });
  // What only a mode reads needs it: given without it, it would be ignored without a word.
  AddParsed<bench::RequestDistribution>(
      app, "--request-distribution", "constant|poisson", "request-rate mode: arrival times",
      bench::RequestDistributionName(f.measure.distribution), &f.measure.distribution,
      [](const std::string& v) { return bench::ParseRequestDistribution(v); })
      ->needs(request_rate);
  AddInt(app, "--max-threads", "N", &f.measure.max_threads, 1, 1024,
         "request-rate mode: sending threads")
      ->needs(request_rate);

  app.option_defaults()->group("measurement");
  AddInt(
      app, "--warmup-ms", "N", 0, 3600000, f.measure.warmup.count(),
      [&f](int64_t n) { f.measure.warmup = std::chrono::milliseconds(n); },
      "warm-up before measuring");
  CLI::Option* interval = AddInt(
      app, "-p,--measurement-interval-ms", "N", 10, 3600000, f.measure.window.count(),
      [&f](int64_t n) { f.measure.window = std::chrono::milliseconds(n); }, "window length");
  CLI::Option* stability = AddParsed<double>(
      app, "-s,--stability-percentage", "P",
      "stable when throughput and p95 spread <= P% over 3 windows",
      FormatNumber(f.measure.stability_percentage), &f.measure.stability_percentage,
      [](const std::string& v) { return ParseDouble("--stability-percentage", v, 0); });
  CLI::Option* max_trials = AddInt(app, "-r,--max-trials", "N", &f.measure.max_trials, 1, 1000,
                                   "give up on stability after N windows");

  app.option_defaults()->group("in-process ceiling");
  CLI::Option* in_process = AddSwitch(app, "--in-process", &f.in_process,
                                      "also run the model directly on ONNX Runtime (no server)");
  CLI::Option* repository =
      OnlyOnce(AddText(app, "--model-repository", "DIR", &f.model_repository,
                       "where MODEL/<version>/model.onnx is (needed by --in-process)"));
  CLI::Option* batch_sizes = AddParsed<std::vector<int64_t>>(
      app, "--batch-sizes", "LIST", "in-process batch sizes", JoinInts(f.batch_sizes),
      &f.batch_sizes,
      [](const std::string& v) { return bench::ParseRangeSpec(v, "--batch-sizes"); });
  CLI::Option* in_process_threads = AddParsed<std::vector<int64_t>>(
      app, "--in-process-threads", "LIST",
      "intra-op thread counts measured besides the model's own setting, e.g. 1,2,4 or 1:16:2x "
      "(default: 1 to the usable cores); the ceiling is the best of them all",
      "", &f.in_process_threads, [](const std::string& v) -> StatusOr<std::vector<int64_t>> {
        FASTPATH_ASSIGN_OR_RETURN(auto counts, bench::ParseRangeSpec(v, "--in-process-threads"));
        for (int64_t n : counts) {
          if (n > config::kMaxThreadCount) {
            return InvalidArgument("--in-process-threads: " + std::to_string(n) + " is more than " +
                                   std::to_string(config::kMaxThreadCount) + " threads");
          }
        }
        return counts;
      });
  in_process_threads->needs(in_process);
  batch_sizes->needs(in_process);
  AddSwitch(app, "--no-server", &f.no_server, "only the in-process measurement")->needs(in_process);
  in_process->needs(repository);

  app.option_defaults()->group("batching calibration");
  CLI::Option* calibrate = AddSwitch(
      app, "--calibrate-batching", &f.calibrate,
      "start `fastpath serve` on a copy of MODEL for each candidate (max batch size x queue "
      "delay) and pick the best within the SLO");
  CLI::Option* slo =
      AddValue(app, "--slo-p99-ms", "X", "the p99 latency SLO", "",
               [&f](const std::string& value) -> Status {
                 FASTPATH_ASSIGN_OR_RETURN(double v, ParseDouble("--slo-p99-ms", value, 0));
                 if (v <= 0) return InvalidArgument("--slo-p99-ms must be positive");
                 f.slo_p99_ms = v;
                 return Status::Ok();
               });
  CLI::Option* queue_delays = AddParsed<std::vector<int64_t>>(
      app, "--queue-delays-us", "LIST", "candidates", JoinInts(f.queue_delays_us),
      &f.queue_delays_us,
      [](const std::string& v) { return bench::ParseIntList(v, "--queue-delays-us"); });
  CLI::Option* max_batch_sizes = AddParsed<std::vector<int64_t>>(
      app, "--max-batch-sizes", "LIST", "candidates", JoinInts(f.max_batch_sizes),
      &f.max_batch_sizes,
      [](const std::string& v) { return bench::ParseRangeSpec(v, "--max-batch-sizes"); });
  CLI::Option* skip_baseline =
      AddSwitch(app, "--skip-baseline", &f.skip_baseline,
                "do not measure the configuration without dynamic batching");
  for (CLI::Option* candidate : {queue_delays, max_batch_sizes, skip_baseline}) {
    candidate->needs(calibrate);
  }
  calibrate->needs(slo)->needs(repository)->excludes(request_rate)->excludes(url);
  slo->needs(calibrate);
  o.concurrency->excludes(request_rate);

  app.option_defaults()->group("soak");
  CLI::Option* soak = AddValue(
      app, "--soak", "DURATION",
      "hold one --concurrency for DURATION (90s, 30m, 2h) and report every window: throughput, "
      "p50/p95/p99, errors, the drift from the first window, and the server's GPU temperature, "
      "SM clock, power and clock-event reasons from its metrics",
      "", [&f](const std::string& value) -> Status {
        FASTPATH_ASSIGN_OR_RETURN(f.soak, bench::ParseSoakDuration(value, "--soak"));
        return Status::Ok();
      });
  o.soak_window = AddValue(
      app, "--soak-window", "DURATION", "a soak's window", FormatDuration(f.soak_window),
      [&f](const std::string& value) -> Status {
        FASTPATH_ASSIGN_OR_RETURN(f.soak_window, bench::ParseSoakDuration(value, "--soak-window"));
        return Status::Ok();
      });
  o.metrics_url = AddValue(
      app, "--metrics-url", "URL",
      "the server's Prometheus metrics, scraped at every window's end by --soak and through "
      "every point by --collect-metrics (default: the server's host, port 8002, /metrics)",
      "", [&f](const std::string& value) -> Status {
        FASTPATH_ASSIGN_OR_RETURN(f.metrics_url, bench::ParseMetricsUrl(value));
        return Status::Ok();
      });
  o.soak_window->needs(soak);
  soak->excludes(request_rate)
      ->excludes(calibrate)
      ->excludes(in_process)
      ->excludes(interval)
      ->excludes(stability)
      ->excludes(max_trials);

  app.option_defaults()->group("GPU metrics");
  CLI::Option* collect =
      AddSwitch(app, "--collect-metrics", &f.collect_metrics,
                "scrape the server's Prometheus metrics through every point and report each GPU's "
                "average utilization and power and its largest memory use over the point's windows "
                "(perf_analyzer's --collect-metrics)");
  o.metrics_interval = AddInt(
      app, "--metrics-interval-ms", "N", 10, 60000, f.metrics_interval.count(),
      [&f](int64_t ms) { f.metrics_interval = std::chrono::milliseconds(ms); },
      "time between two scrapes through a point (--collect-metrics) or a soak's window (each "
      "GPU's average utilization and peak memory)");
  collect->excludes(soak)->excludes(calibrate);

  app.option_defaults()->group("output");
  AddText(app, "--label", "TEXT", &f.label,
          "the configuration's name (one curve per label in the plot)");
  AddText(app, "--json", "FILE", &f.json_path, "the report as JSON");
  AddText(app, "--csv", "FILE", &f.csv_path, "the points as CSV");
  AddText(app, "--svg", "FILE", &f.svg_path, "latency against throughput");
  AddSwitch(app, "--append", &f.append,
            "add this run to existing --json/--csv files (the SVG then plots every run in the "
            "JSON file)");
  AddSwitch(app, "-q,--quiet", &f.quiet, "no progress line");
  app.option_defaults()->group("logging");
  AddLogOptions(app, &f.logging);
  return o;
}

// What depends on values, beyond CLI11's required, needs and excludes.
Status CheckBenchFlags(const BenchOptions& options, BenchFlags& f) {
  if (Status name = repository::CheckModelName(f.model); !name.ok()) {
    return InvalidArgument("--model " + name.message());
  }
  if (f.calibrate) {
    if (options.concurrency->count() == 0) f.concurrency = {32};
    if (f.concurrency.size() != 1) {
      return InvalidArgument("--calibrate-batching takes one --concurrency value");
    }
  }
  if (!f.model_repository.empty() && !f.in_process && !f.calibrate) {
    return InvalidArgument(
        "--model-repository is read by --in-process and --calibrate-batching "
        "only");
  }
  if (f.transport == bench::Transport::kGrpc && f.encoding == bench::Encoding::kJson) {
    return InvalidArgument("--encoding json is HTTP's: gRPC carries tensors as raw bytes");
  }
  if (f.append && f.json_path.empty() && f.csv_path.empty()) {
    return InvalidArgument("--append needs --json or --csv");
  }
  for (const CLI::Option* o : {options.metrics_url, options.metrics_interval}) {
    if (o->count() > 0 && !f.soak && !f.collect_metrics) {
      return InvalidArgument(o->get_name() + " is read by --soak and --collect-metrics only");
    }
  }
  if (f.collect_metrics && f.no_server) {
    return InvalidArgument("--collect-metrics scrapes a server's metrics: not with --no-server");
  }
  if (f.soak) {
    // The default window is a minute, or the whole soak when that is shorter.
    if (options.soak_window->count() == 0) f.soak_window = std::min(f.soak_window, *f.soak);
    if (f.concurrency.size() != 1) {
      return InvalidArgument("--soak holds one --concurrency value, not '" +
                             JoinInts(f.concurrency) + "'");
    }
    if (f.soak_window > *f.soak) {
      return InvalidArgument("--soak-window " + FormatDuration(f.soak_window) +
                             " is longer than --soak " + FormatDuration(*f.soak));
    }
    if (!f.csv_path.empty()) {
      return InvalidArgument("--csv is not written for --soak: its windows are in --json");
    }
  }
  f.measure.batch_size = f.batch_size;
  return Status::Ok();
}

// A soak picture's title: what is plotted, over time.
std::string SoakTitle(const bench::BenchReport& report) {
  return "fastpath bench --soak: " + report.model + ", latency and throughput with the GPUs";
}

std::string NowIso() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The model file and the instance options the server would use for the model, but for the
// default threads (see FindInProcessModel): options.intra_op_threads is the model's own
// setting.
struct InProcessModel {
  fs::path file;
  backend::InstanceOptions options;
  int64_t instances = 1;
};

// The cores the process can use, as serve counts them (the affinity mask capped by the cgroup
// quota); 0 when neither is known, and then serve gives each CPU instance one thread.
uint32_t UsableCoresAsServe() {
  return gpu::UsableCores(gpu::ProbeContainer(gpu::ProbeEnvironment::Host()));
}

// The top of the default sweep: the usable cores, else the hardware's threads.
int64_t UsableCoresForSweep() {
  const uint32_t cores = UsableCoresAsServe();
  if (cores > 0) return cores;
  return std::max<int64_t>(1, std::thread::hardware_concurrency());
}

StatusOr<InProcessModel> FindInProcessModel(const BenchFlags& flags) {
  const fs::path dir = fs::path(flags.model_repository) / flags.model;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return NotFound("model '" + flags.model + "' is not in repository " + flags.model_repository + " (no folder " +
                    dir.string() + ")");
  }
  InProcessModel m;
  std::string filename = "model.onnx";
  inference::ModelConfig config;
  if (fs::exists(dir / "config.pbtxt", ec)) {
    FASTPATH_ASSIGN_OR_RETURN(std::string text, ReadTextFile((dir / "config.pbtxt").string()));
    FASTPATH_ASSIGN_OR_RETURN(config, config::ParseModelConfig(text, (dir / "config.pbtxt").string()));
    if (!config.default_model_filename().empty()) filename = config.default_model_filename();
  }
  std::string version = flags.model_version;
  if (version.empty()) {
    int64_t best = -1;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      int64_t v = 0;
      auto [ptr, perr] = std::from_chars(name.data(), name.data() + name.size(), v);
      if (perr == std::errc() && ptr == name.data() + name.size() && entry.is_directory(ec) &&
          fs::exists(entry.path() / filename, ec)) {
        best = std::max(best, v);
      }
    }
    if (best < 0) return NotFound("no version of '" + flags.model + "' in " + dir.string() + " has " + filename);
    version = std::to_string(best);
  }
  m.file = dir / version / filename;
  if (!fs::is_regular_file(m.file, ec)) return NotFound("model file " + m.file.string() + " is missing");
  // As serve completes a config without instance_group: one CPU instance.
  if (config.instance_group_size() == 0) {
    inference::ModelInstanceGroup* group = config.add_instance_group();
    group->set_kind(inference::ModelInstanceGroup::KIND_CPU);
    group->set_count(1);
  }
  // The model's own setting: the config's threads, else what serve gives a model that sets
  // none (the usable cores shared by its CPU instances; one thread each when they are not
  // known), so that the efficiency against it compares like with like. RunInProcess measures it and
  // every count of the sweep beside it; the ceiling is the best of them (issue 11 item 4).
  const auto& group = config.instance_group(0);
  FASTPATH_ASSIGN_OR_RETURN(
      m.options, config::InstanceOptionsFor(config, group, group.gpus_size() ? group.gpus(0) : 0,
                                            UsableCoresAsServe()));
  m.instances = std::max(1, group.count());
  return m;
}

// The intra-op thread counts to measure: the model's own first, then --in-process-threads
// (default 1 to the usable cores) without the own count.
std::vector<int64_t> InProcessThreadCounts(const BenchFlags& flags, int64_t own) {
  std::vector<int64_t> sweep = flags.in_process_threads;
  if (sweep.empty()) {
    const int64_t cores = std::min<int64_t>(UsableCoresForSweep(), config::kMaxThreadCount);
    for (int64_t n = 1; n <= cores; ++n) sweep.push_back(n);
  }
  std::vector<int64_t> counts = {own};
  for (int64_t n : sweep) {
    if (n != own) counts.push_back(n);
  }
  return counts;
}

Status RunInProcess(const BenchFlags& flags, ProgressLine& progress, bench::BenchReport* report) {
  FASTPATH_ASSIGN_OR_RETURN(InProcessModel model, FindInProcessModel(flags));
  FASTPATH_ASSIGN_OR_RETURN(std::unique_ptr<backend::Backend> backend, onnxruntime::CreateOrtBackend());
  std::shared_ptr<backend::Backend> shared(std::move(backend));
  const int64_t own = model.options.intra_op_threads;
  report->in_process_own_threads = own;
  for (int64_t threads : InProcessThreadCounts(flags, own)) {
    backend::InstanceOptions instance = model.options;
    instance.intra_op_threads = static_cast<int>(threads);
    for (int64_t batch : flags.batch_sizes) {
      FASTPATH_ASSIGN_OR_RETURN(auto target,
                                bench::MakeInProcessTarget(shared, model.file, instance));
      FASTPATH_RETURN_IF_ERROR(PrepareRequests(*target, flags, batch));
      bench::MeasureOptions options = flags.measure;
      options.batch_size = batch;
      const std::string name = "in-process threads=" + std::to_string(threads) +
                               (threads == own ? " (own)" : "") +
                               " batch=" + std::to_string(batch) + " ";
      options.progress = [&progress, name](const std::string& line) {
        progress.Update(name + line);
      };
      FASTPATH_ASSIGN_OR_RETURN(bench::BenchPoint point,
                                bench::MeasureConcurrency(*target, model.instances, options));
      point.mode = "in_process";
      point.intra_op_threads = threads;
      progress.EndPoint();
      report->in_process.push_back(std::move(point));
    }
  }
  return Status::Ok();
}

// What WriteOutputs will need, checked before measuring, so that a run (a soak of hours)
// is never lost to a path it cannot write at the end: each folder exists and is writable,
// and a file appended to reads as bench's.
Status CheckOutputs(const BenchFlags& flags) {
  for (const std::string* path : {&flags.json_path, &flags.csv_path, &flags.svg_path}) {
    if (path->empty()) continue;
    const fs::path parent =
        fs::path(*path).parent_path().empty() ? fs::path(".") : fs::path(*path).parent_path();
    std::error_code ec;
    if (!fs::is_directory(parent, ec)) {
      return Unavailable("cannot write " + *path + ": no folder " + parent.string());
    }
    if (::access(parent.c_str(), W_OK) != 0) {
      return Unavailable("cannot write " + *path + ": " + parent.string() + " is not writable");
    }
  }
  std::error_code ec;
  if (flags.append && !flags.json_path.empty() && fs::exists(flags.json_path, ec)) {
    FASTPATH_ASSIGN_OR_RETURN(std::string text, ReadTextFile(flags.json_path));
    FASTPATH_RETURN_IF_ERROR(bench::ReadReportsJson(text, flags.json_path).status());
  }
  if (flags.append && !flags.csv_path.empty() && fs::exists(flags.csv_path, ec)) {
    FASTPATH_ASSIGN_OR_RETURN(const std::string existing, ReadTextFile(flags.csv_path));
    FASTPATH_RETURN_IF_ERROR(bench::AppendCsvRows(existing, bench::BenchReport{}).status());
  }
  return Status::Ok();
}

Status WriteOutputs(const BenchFlags& flags, const bench::BenchReport& report) {
  std::vector<bench::BenchReport> runs;
  if (!flags.json_path.empty()) {
    std::error_code ec;
    if (flags.append && fs::exists(flags.json_path, ec)) {
      FASTPATH_ASSIGN_OR_RETURN(std::string text, ReadTextFile(flags.json_path));
      FASTPATH_ASSIGN_OR_RETURN(runs, bench::ReadReportsJson(text, flags.json_path));
    }
    runs.push_back(report);
    FASTPATH_RETURN_IF_ERROR(WriteFileAtomically(flags.json_path, bench::ReportsToJson(runs)));
  } else {
    runs.push_back(report);
  }
  if (!flags.csv_path.empty()) {
    std::error_code ec;
    std::string csv = bench::CsvHeader() + bench::ReportCsvRows(report);
    if (flags.append && fs::exists(flags.csv_path, ec)) {
      FASTPATH_ASSIGN_OR_RETURN(const std::string existing, ReadTextFile(flags.csv_path));
      FASTPATH_ASSIGN_OR_RETURN(csv, bench::AppendCsvRows(existing, report));
    }
    FASTPATH_RETURN_IF_ERROR(WriteFileAtomically(flags.csv_path, csv));
  }
  if (!flags.svg_path.empty() && report.soak) {
    FASTPATH_RETURN_IF_ERROR(
        WriteFileAtomically(flags.svg_path, bench::RenderSoakSvg(report, SoakTitle(report))));
  } else if (!flags.svg_path.empty()) {
    const std::string title = "fastpath bench: " + report.model + " latency vs throughput";
    FASTPATH_RETURN_IF_ERROR(WriteFileAtomically(flags.svg_path, bench::RenderLatencyThroughputSvg(runs, title)));
  }
  return Status::Ok();
}

// The server of --url over --transport, its requests prepared.
struct OpenedServer {
  bench::ServerAddress address;
  std::unique_ptr<bench::Target> target;
};

StatusOr<OpenedServer> OpenServer(const BenchFlags& flags, bench::BenchReport* report) {
  report->transport = bench::TransportName(flags.transport);
  const int default_port = flags.transport == bench::Transport::kGrpc ? 8001 : 8000;
  OpenedServer server;
  FASTPATH_ASSIGN_OR_RETURN(
      server.address,
      bench::ParseAddress(flags.url.empty() ? "localhost" : flags.url, default_port));
  FASTPATH_ASSIGN_OR_RETURN(
      server.target, flags.transport == bench::Transport::kGrpc
                         ? bench::MakeGrpcTarget(server.address, flags.model, flags.model_version)
                         : bench::MakeHttpTarget(server.address, flags.encoding, flags.model,
                                                 flags.model_version));
  report->url = server.target->Describe();
  FASTPATH_RETURN_IF_ERROR(PrepareRequests(*server.target, flags, flags.batch_size));
  return server;
}

// Set by the first SIGINT during a soak: the soak ends with the window in progress and is
// reported; a second SIGINT kills (SA_RESETHAND).
std::atomic<bool> soak_interrupted{false};

void OnSoakInterrupt(int) { soak_interrupted.store(true); }

std::string SoakProgressLine(const bench::SoakWindow& w, int64_t windows) {
  std::string line = "soak window " + std::to_string(w.index) + "/" + std::to_string(windows) +
                     " (" + FormatNumber(std::round(w.end_s)) +
                     " s): " + FormatNumber(std::round(w.load.throughput_ips * 10) / 10) +
                     " infer/s";
  char text[160];
  std::snprintf(text, sizeof(text), "  p95 %.3f ms  errors %llu", w.load.latency.p95_us / 1000,
                static_cast<unsigned long long>(w.load.errors));
  line += text;
  if (w.throughput_ratio && w.p95_ratio) {
    std::snprintf(text, sizeof(text), "  drift %.3fx throughput, %.3fx p95", *w.throughput_ratio,
                  *w.p95_ratio);
    line += text;
  }
  for (const auto& g : w.gpus) {
    if (g.temperature_c) line += "  GPU " + g.gpu + " " + FormatNumber(*g.temperature_c) + " C";
  }
  return line;
}

Status RunSoakCommand(bench::Target& target, const bench::ServerAddress& address,
                      const BenchFlags& flags, ProgressLine& progress, bench::BenchReport* report) {
  const bench::MetricsUrl url =
      flags.metrics_url ? *flags.metrics_url : bench::DefaultMetricsUrl(address);
  const std::unique_ptr<bench::MetricsSource> metrics =
      bench::MakeHttpMetricsSource(url, std::chrono::seconds(5));
  // Its own source: the sampler's thread scrapes beside the boundaries' scrapes.
  const std::unique_ptr<bench::MetricsSource> sampled =
      bench::MakeHttpMetricsSource(url, std::chrono::seconds(5));
  bench::GpuSampler sampler(sampled.get(), flags.metrics_interval);
  sampler.Start();
  const int64_t windows =
      (flags.soak->count() + flags.soak_window.count() - 1) / flags.soak_window.count();
  bench::SoakOptions options;
  options.concurrency = flags.concurrency.front();
  options.measure = flags.measure;
  options.schedule.duration = *flags.soak;
  options.schedule.window = flags.soak_window;
  options.schedule.stop = &soak_interrupted;
  options.metrics = metrics.get();
  options.sampler = &sampler;
  bool warned = false;
  options.on_window = [&](const bench::SoakWindow& w) {
    progress.Update(SoakProgressLine(w, windows));
    progress.EndPoint();
    if (!w.metrics_error.empty() && !warned) {
      warned = true;
      std::cerr << "fastpath bench: " << w.metrics_error
                << "; the GPU fields stay absent while it fails (--metrics-url names the server's "
                   "metrics)\n";
    }
  };
  struct sigaction action = {};
  action.sa_handler = OnSoakInterrupt;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  struct sigaction previous = {};
  sigaction(SIGINT, &action, &previous);
  StatusOr<bench::SoakResult> soak = bench::RunSoak(target, options);
  sigaction(SIGINT, &previous, nullptr);
  if (!soak.ok()) return soak.status();
  report->soak = std::move(soak).value();
  return Status::Ok();
}

int Plot(const std::vector<std::string>& args) {
  std::string svg;
  std::string title;
  std::vector<std::string> inputs;
  CLI::App app{
      "Plots latency against throughput for every run in the reports (`fastpath bench "
      "--json` outputs), one curve per label; a soak report (`--soak`) alone, as its own "
      "picture over time.",
      "fastpath bench plot"};
  UseHelpLayout(app, "usage: fastpath bench plot --svg OUT.svg [--title TEXT] REPORT.json...");
  AddText(app, "--svg", "OUT.svg", &svg, "the plot to write")->required();
  AddText(app, "--title", "TEXT", &title, "the plot's title");
  app.add_option("REPORT.json", inputs, "`fastpath bench --json` outputs")->required();
  if (auto exit_code = ParseCommandLine(app, args)) return *exit_code;
  std::vector<bench::BenchReport> runs;
  for (const auto& path : inputs) {
    auto text = ReadTextFile(path);
    if (!text.ok()) {
      std::cerr << "fastpath bench plot: " << text.status().message() << "\n";
      return kExitRuntime;
    }
    auto read = bench::ReadReportsJson(*text, path);
    if (!read.ok()) {
      std::cerr << "fastpath bench plot: " << read.status().message() << "\n";
      return kExitRuntime;
    }
    runs.insert(runs.end(), read->begin(), read->end());
  }
  const auto soaks = std::count_if(runs.begin(), runs.end(),
                                   [](const bench::BenchReport& r) { return r.soak.has_value(); });
  if (soaks > 0 && runs.size() > 1) {
    std::cerr << "fastpath bench plot: " << soaks << " of the " << runs.size()
              << " runs are soaks (--soak), which are plotted over time, one to a picture: "
                 "pass one soak report alone\n";
    return kExitUsage;
  }
  const std::string picture =
      soaks > 0 ? bench::RenderSoakSvg(runs[0], title.empty() ? SoakTitle(runs[0]) : title)
                : bench::RenderLatencyThroughputSvg(
                      runs, title.empty() ? "fastpath bench: latency vs throughput" : title);
  Status s = WriteFileAtomically(svg, picture);
  if (!s.ok()) {
    std::cerr << "fastpath bench plot: " << s.message() << "\n";
    return kExitRuntime;
  }
  std::cerr << "wrote " << svg << " (" << runs.size() << " runs)\n";
  return kExitOk;
}

}  // namespace

ProgressLine::ProgressLine(bool quiet) : quiet_(quiet), tty_(isatty(STDERR_FILENO) == 1) {}

void ProgressLine::Update(const std::string& line) {
  last_ = line;
  if (quiet_ || !tty_) return;
  std::cerr << "\r" << line << "\x1b[K" << std::flush;
}

void ProgressLine::EndPoint() {
  if (quiet_ || last_.empty()) return;
  if (tty_) {
    std::cerr << "\n";
  } else {
    std::cerr << last_ << "\n";
  }
  last_.clear();
}

Status PrepareRequests(bench::Target& target, const BenchFlags& flags, int64_t batch_size) {
  FASTPATH_ASSIGN_OR_RETURN(bench::ModelMetadata metadata, target.Metadata());
  // perf_analyzer refuses this too: the rows would be one request's dim, and infer/s would
  // count each request batch_size times.
  if (batch_size > 1 && metadata.max_batch_size == 0) {
    return InvalidArgument("-b " + std::to_string(batch_size) + ": model '" + flags.model +
                           "' does not batch (its config's max_batch_size is 0), so -b must be 1");
  }
  // Every request would be refused: say so before the measurement, not after it.
  if (metadata.max_batch_size.value_or(0) > 0 && batch_size > *metadata.max_batch_size) {
    return InvalidArgument("-b " + std::to_string(batch_size) + ": model '" + flags.model +
                           "' takes at most " + std::to_string(*metadata.max_batch_size) +
                           " rows a request (its config's max_batch_size)");
  }
  std::vector<std::vector<Tensor>> requests;
  for (int64_t i = 0; i < flags.request_pool; ++i) {
    FASTPATH_ASSIGN_OR_RETURN(auto inputs,
                              bench::MakeInputs(metadata, flags.shapes, batch_size, flags.measure.seed, i));
    requests.push_back(std::move(inputs));
  }
  return target.Prepare(requests);
}

Status MeasureServerPoints(bench::Target& target, const BenchFlags& flags, ProgressLine& progress,
                           bench::BenchReport* report, bench::GpuSampler* gpus) {
  bench::MeasureOptions options = flags.measure;
  options.progress = [&progress](const std::string& line) { progress.Update(line); };
  if (gpus != nullptr) {
    options.on_measured = [gpus](auto from, auto to, bench::BenchPoint* point) {
      point->gpu_metrics = gpus->Between(from, to);
      gpus->Forget(to);  // the next point's windows come after
    };
  }
  if (!flags.request_rates.empty()) {
    for (int64_t rate : flags.request_rates) {
      FASTPATH_ASSIGN_OR_RETURN(bench::BenchPoint p,
                                bench::MeasureRequestRate(target, static_cast<double>(rate), options));
      progress.EndPoint();
      report->points.push_back(std::move(p));
    }
    return Status::Ok();
  }
  for (int64_t c : flags.concurrency) {
    FASTPATH_ASSIGN_OR_RETURN(bench::BenchPoint p, bench::MeasureConcurrency(target, c, options));
    progress.EndPoint();
    report->points.push_back(std::move(p));
  }
  return Status::Ok();
}

int Bench(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "plot") return Plot({args.begin() + 1, args.end()});
  BenchFlags flags;
  flags.command_line = "fastpath bench";
  for (const auto& a : args) flags.command_line += " " + QuoteArg(a);
  CLI::App app{
      "Measures MODEL on a running server (or in-process on ONNX Runtime) and reports "
      "throughput, p50/p90/p95/p99/max latency, the server's queue/compute split and "
      "batch sizes (from the statistics extension), and errors by kind.",
      "fastpath bench"};
  UseHelpLayout(app, kBenchUsage);
  const BenchOptions options = DefineBenchOptions(app, flags);
  if (auto exit_code = ParseCommandLine(app, args)) return *exit_code;
  if (Status s = CheckBenchFlags(options, flags); !s.ok()) return UsageError(app, s.message());
  flags.logging.name = "fastpath bench";
  log::Configure(flags.logging);
  ProgressLine progress(flags.quiet);

  bench::BenchReport report;
  report.model = flags.model;
  report.model_version = flags.model_version;
  report.command = flags.command_line;
  report.started_at = NowIso();
  report.fastpath_version = FASTPATH_VERSION;
  report.seed = flags.measure.seed;
  report.encoding = flags.transport == bench::Transport::kGrpc ? "protobuf" : bench::EncodingName(flags.encoding);

  auto fail = [](const Status& s) {
    std::cerr << "fastpath bench: " << s.message() << "\n";
    return s.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitRuntime;
  };
  if (Status s = CheckOutputs(flags); !s.ok()) return fail(s);

  if (flags.calibrate) {
    report.transport = bench::TransportName(flags.transport);
    report.label = flags.label.empty() ? flags.model + " batching calibration" : flags.label;
    Status s = RunCalibration(flags, progress, &report);
    if (!s.ok()) return fail(s);
  } else if (flags.soak) {
    auto server = OpenServer(flags, &report);
    if (!server.ok()) return fail(server.status());
    Status s = RunSoakCommand(*server->target, server->address, flags, progress, &report);
    if (!s.ok()) return fail(s);
    report.label = flags.label.empty()
                       ? flags.model + " " + report.transport + " " + report.encoding + " soak"
                       : flags.label;
  } else {
    if (flags.in_process) {
      Status s = RunInProcess(flags, progress, &report);
      if (!s.ok()) return fail(s.WithContext("in-process"));
    }
    if (!flags.no_server) {
      auto server = OpenServer(flags, &report);
      if (!server.ok()) return fail(server.status());
      std::unique_ptr<bench::MetricsSource> metrics;
      std::unique_ptr<bench::GpuSampler> gpus;
      if (flags.collect_metrics) {
        metrics = bench::MakeHttpMetricsSource(
            flags.metrics_url ? *flags.metrics_url : bench::DefaultMetricsUrl(server->address),
            std::chrono::seconds(5));
        gpus = std::make_unique<bench::GpuSampler>(metrics.get(), flags.metrics_interval);
        gpus->Start();
      }
      Status s = MeasureServerPoints(*server->target, flags, progress, &report, gpus.get());
      if (!s.ok()) return fail(s);
    } else {
      report.encoding.clear();
    }
    if (flags.label.empty()) {
      report.label = flags.no_server ? flags.model + " in-process"
                                     : flags.model + " " + report.transport + " " + report.encoding;
    } else {
      report.label = flags.label;
    }
    bench::ComputeEfficiency(&report);
  }

  std::cout << bench::RenderTable(report);
  if (report.calibration && report.calibration->chosen) {
    const auto& best = report.calibration->candidates[*report.calibration->chosen];
    std::cout << "\nbest configuration within p99 <= " << *flags.slo_p99_ms << " ms; paste into "
              << flags.model << "/config.pbtxt:\n\n" << bench::BatchingConfigSnippet(best);
  } else if (report.calibration) {
    std::cout << "\nno dynamic batching configuration met p99 <= " << *flags.slo_p99_ms
              << " ms without errors at concurrency " << report.calibration->concurrency << "\n";
  }
  std::cout << std::flush;
  Status s = WriteOutputs(flags, report);
  if (!s.ok()) return fail(s);
  // Errors at a point are reported, not fatal; a point where nothing succeeded measured
  // nothing (its latencies read 0), and a script must not take it for a fast one.
  // (Calibration judges its candidates itself.)
  for (const bench::BenchPoint& p : report.points) {
    if (flags.calibrate || p.requests > 0 || p.errors == 0) continue;
    const std::string at =
        p.mode == "request_rate"
            ? "request rate " + std::to_string(static_cast<int64_t>(p.request_rate))
            : "concurrency " + std::to_string(p.concurrency);
    std::string first;
    if (!p.error_samples.empty()) {
      first = "; " + p.error_samples.begin()->first + ": " + p.error_samples.begin()->second;
    }
    return fail(Unavailable("no request succeeded at " + at + " (" + std::to_string(p.errors) +
                            " errors" + first + ")"));
  }
  return kExitOk;
}

}  // namespace fastpath::cli
