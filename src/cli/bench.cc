// `fastpath bench`: the project's own perf_analyzer. Measures a served model over HTTP or
// gRPC at a sweep of concurrencies or request rates, optionally against the same model run
// in-process on ONNX Runtime (the ceiling), or calibrates the dynamic batcher against a p99
// SLO; writes a table, JSON, CSV and an SVG plot.
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "bench_flags.h"
#include "cli.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/config/model_config.h"

namespace fastpath::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kBenchUsage = R"(usage: fastpath bench -m MODEL [options]
       fastpath bench plot --svg OUT.svg [--title TEXT] REPORT.json...

Measures MODEL on a running server (or in-process on ONNX Runtime) and reports throughput,
p50/p90/p95/p99/max latency, the server's queue/compute split and batch sizes (from the
statistics extension), and errors by kind.

target:
  -m, --model NAME              model to measure (required)
  --model-version V             version (default: the server's choice)
  -u, --url HOST:PORT           server (default localhost:8000 for http, localhost:8001 for grpc)
  -i, --protocol http|grpc      transport (default http)
  --encoding binary|json        HTTP body encoding (default binary: the binary tensor extension)
inputs:
  -b, --batch-size N            batch elements per request (default 1)
  --shape NAME:D1,D2,...        dims for an input's dynamic dims (repeatable)
  --seed N                      seed of the deterministic inputs (default 0)
  --request-pool N              distinct requests cycled through (default 16)
load:
  --concurrency SPEC            closed loop: 16 | 1,8,16,32 | 1:32:4 (linear) | 1:32:2x (default 1)
  --request-rate SPEC           open loop at R requests/s instead (same SPEC forms)
  --request-distribution D      constant | poisson (default constant)
  --max-threads N               request-rate mode: sending threads (default 16)
measurement:
  --warmup-ms N                 warm-up before measuring (default 1000)
  --measurement-interval-ms N   window length (default 2000)
  --stability-percentage P      stable when throughput and p95 spread <= P% over 3 windows (default 10)
  --max-trials N                give up on stability after N windows (default 10)
in-process ceiling:
  --in-process                  also run the model directly on ONNX Runtime (no server)
  --model-repository DIR        where MODEL/<version>/model.onnx is (needed by --in-process)
  --batch-sizes LIST            in-process batch sizes (default 1,2,4,8,16,32)
  --no-server                   only the in-process measurement
batching calibration:
  --calibrate-batching          start `fastpath serve` on a copy of MODEL for each candidate
                                (max batch size x queue delay) and pick the best within the SLO
  --slo-p99-ms X                the p99 latency SLO (required with --calibrate-batching)
  --queue-delays-us LIST        candidates (default 0,500,1000,2000,5000,10000)
  --max-batch-sizes LIST        candidates (default 4,8,16,32)
  --skip-baseline               do not measure the configuration without dynamic batching
                                (calibration runs at --concurrency, default 32 there)
output:
  --label TEXT                  the configuration's name (one curve per label in the plot)
  --json FILE  --csv FILE  --svg FILE
  --append                      add this run to existing --json/--csv files (the SVG then
                                plots every run in the JSON file)
  -q, --quiet                   no progress line
)";

StatusOr<int64_t> ParseInt(const std::string& flag, const std::string& text, int64_t lo, int64_t hi) {
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || value < lo || value > hi) {
    return InvalidArgument(flag + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                           "], not '" + text + "'");
  }
  return value;
}

StatusOr<double> ParseDouble(const std::string& flag, const std::string& text, double lo) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(v >= lo) || v > 1e12) {
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

StatusOr<BenchFlags> ParseBenchFlags(const std::vector<std::string>& args) {
  BenchFlags f;
  f.command_line = "fastpath bench";
  for (const auto& a : args) f.command_line += " " + QuoteArg(a);
  bool concurrency_given = false;
  static const std::map<std::string, std::string> kAliases = {
      {"-m", "--model"}, {"-u", "--url"}, {"-i", "--protocol"}, {"--transport", "--protocol"},
      {"-b", "--batch-size"}, {"-q", "--quiet"}};
  static const std::set<std::string> kSwitches = {"--in-process", "--no-server", "--calibrate-batching",
                                                  "--append", "--quiet", "--skip-baseline"};
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    bool has_value = false;
    if (auto eq = flag.find('='); eq != std::string::npos && flag.rfind("--", 0) == 0) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    }
    if (auto it = kAliases.find(flag); it != kAliases.end()) flag = it->second;
    if (flag == "--help" || flag == "-h") return FailedPrecondition("help");
    if (kSwitches.count(flag)) {
      if (has_value) return InvalidArgument(flag + " takes no value");
      if (flag == "--in-process") f.in_process = true;
      if (flag == "--no-server") f.no_server = true;
      if (flag == "--calibrate-batching") f.calibrate = true;
      if (flag == "--append") f.append = true;
      if (flag == "--quiet") f.quiet = true;
      if (flag == "--skip-baseline") f.skip_baseline = true;
      continue;
    }
    if (flag.rfind("-", 0) != 0) return InvalidArgument("unexpected argument '" + flag + "'");
    if (!has_value) {
      if (i + 1 >= args.size()) return InvalidArgument("flag " + flag + " needs a value");
      value = args[++i];
    }
    if (flag == "--model") {
      f.model = value;
    } else if (flag == "--model-version") {
      f.model_version = value;
    } else if (flag == "--url") {
      f.url = value;
    } else if (flag == "--protocol") {
      FASTPATH_ASSIGN_OR_RETURN(f.transport, bench::ParseTransport(value));
    } else if (flag == "--encoding") {
      FASTPATH_ASSIGN_OR_RETURN(f.encoding, bench::ParseEncoding(value));
    } else if (flag == "--batch-size") {
      FASTPATH_ASSIGN_OR_RETURN(f.batch_size, ParseInt(flag, value, 1, 1 << 20));
    } else if (flag == "--shape") {
      FASTPATH_ASSIGN_OR_RETURN(auto shape, bench::ParseShapeOverride(value));
      if (!f.shapes.emplace(shape.first, shape.second).second) {
        return InvalidArgument("--shape given twice for input '" + shape.first + "'");
      }
    } else if (flag == "--seed") {
      FASTPATH_ASSIGN_OR_RETURN(int64_t seed, ParseInt(flag, value, 0, INT64_MAX));
      f.measure.seed = static_cast<uint64_t>(seed);
    } else if (flag == "--request-pool") {
      FASTPATH_ASSIGN_OR_RETURN(f.request_pool, ParseInt(flag, value, 1, 4096));
    } else if (flag == "--concurrency" || flag == "--concurrency-range") {
      FASTPATH_ASSIGN_OR_RETURN(f.concurrency, bench::ParseRangeSpec(value, "--concurrency"));
      concurrency_given = true;
    } else if (flag == "--request-rate" || flag == "--request-rate-range") {
      FASTPATH_ASSIGN_OR_RETURN(f.request_rates, bench::ParseRangeSpec(value, "--request-rate"));
    } else if (flag == "--request-distribution") {
      FASTPATH_ASSIGN_OR_RETURN(f.measure.distribution, bench::ParseRequestDistribution(value));
    } else if (flag == "--max-threads") {
      FASTPATH_ASSIGN_OR_RETURN(int64_t n, ParseInt(flag, value, 1, 1024));
      f.measure.max_threads = static_cast<int>(n);
    } else if (flag == "--warmup-ms") {
      FASTPATH_ASSIGN_OR_RETURN(int64_t n, ParseInt(flag, value, 0, 3600000));
      f.measure.warmup = std::chrono::milliseconds(n);
    } else if (flag == "--measurement-interval-ms" || flag == "-p") {
      FASTPATH_ASSIGN_OR_RETURN(int64_t n, ParseInt(flag, value, 10, 3600000));
      f.measure.window = std::chrono::milliseconds(n);
    } else if (flag == "--stability-percentage" || flag == "-s") {
      FASTPATH_ASSIGN_OR_RETURN(f.measure.stability_percentage, ParseDouble(flag, value, 0));
    } else if (flag == "--max-trials" || flag == "-r") {
      FASTPATH_ASSIGN_OR_RETURN(int64_t n, ParseInt(flag, value, 1, 1000));
      f.measure.max_trials = static_cast<int>(n);
    } else if (flag == "--label") {
      f.label = value;
    } else if (flag == "--json") {
      f.json_path = value;
    } else if (flag == "--csv") {
      f.csv_path = value;
    } else if (flag == "--svg") {
      f.svg_path = value;
    } else if (flag == "--model-repository") {
      f.model_repository = value;
    } else if (flag == "--batch-sizes") {
      FASTPATH_ASSIGN_OR_RETURN(f.batch_sizes, bench::ParseRangeSpec(value, "--batch-sizes"));
    } else if (flag == "--slo-p99-ms") {
      FASTPATH_ASSIGN_OR_RETURN(double slo, ParseDouble(flag, value, 0));
      if (slo <= 0) return InvalidArgument("--slo-p99-ms must be positive");
      f.slo_p99_ms = slo;
    } else if (flag == "--queue-delays-us") {
      FASTPATH_ASSIGN_OR_RETURN(f.queue_delays_us, bench::ParseIntList(value, flag));
    } else if (flag == "--max-batch-sizes") {
      FASTPATH_ASSIGN_OR_RETURN(f.max_batch_sizes, bench::ParseRangeSpec(value, flag));
    } else {
      return InvalidArgument("unknown flag " + flag);
    }
  }
  if (f.model.empty()) return InvalidArgument("-m/--model is required");
  if (f.model.find('/') != std::string::npos || f.model == "." || f.model == "..") {
    return InvalidArgument("--model '" + f.model + "' is not a model name");
  }
  if (f.no_server && !f.in_process) return InvalidArgument("--no-server needs --in-process");
  if (f.in_process && f.model_repository.empty()) {
    return InvalidArgument("--in-process needs --model-repository DIR (where " + f.model + "/<version>/model.onnx is)");
  }
  if (f.calibrate) {
    if (!f.slo_p99_ms) return InvalidArgument("--calibrate-batching needs --slo-p99-ms X");
    if (f.model_repository.empty()) {
      return InvalidArgument("--calibrate-batching needs --model-repository DIR (the model it serves)");
    }
    if (!f.request_rates.empty()) return InvalidArgument("--calibrate-batching measures at --concurrency, not --request-rate");
    if (!concurrency_given) f.concurrency = {32};
    if (f.concurrency.size() != 1) return InvalidArgument("--calibrate-batching takes one --concurrency value");
    if (f.url.empty() == false) return InvalidArgument("--calibrate-batching starts its own servers; drop --url");
  } else if (f.slo_p99_ms) {
    return InvalidArgument("--slo-p99-ms is for --calibrate-batching");
  }
  if (!f.request_rates.empty() && concurrency_given) {
    return InvalidArgument("--concurrency and --request-rate are two load modes: give one");
  }
  if (f.append && f.json_path.empty() && f.csv_path.empty()) {
    return InvalidArgument("--append needs --json or --csv");
  }
  f.measure.batch_size = f.batch_size;
  return f;
}

std::string NowIso() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The model file and the instance options the server would use for the model.
struct InProcessModel {
  fs::path file;
  backend::InstanceOptions options;
  int64_t instances = 1;
};

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
  bool have_config = false;
  if (fs::exists(dir / "config.pbtxt", ec)) {
    FASTPATH_ASSIGN_OR_RETURN(std::string text, ReadFile((dir / "config.pbtxt").string()));
    FASTPATH_ASSIGN_OR_RETURN(config, config::ParseModelConfig(text, (dir / "config.pbtxt").string()));
    have_config = true;
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
  if (have_config && config.instance_group_size() > 0) {
    const auto& group = config.instance_group(0);
    FASTPATH_ASSIGN_OR_RETURN(m.options, config::InstanceOptionsFor(config, group, group.gpus_size() ? group.gpus(0) : 0));
    m.instances = std::max(1, group.count());
  } else if (have_config) {
    inference::ModelInstanceGroup group;
    group.set_kind(inference::ModelInstanceGroup::KIND_CPU);
    FASTPATH_ASSIGN_OR_RETURN(m.options, config::InstanceOptionsFor(config, group, 0));
  }
  return m;
}

Status RunInProcess(const BenchFlags& flags, ProgressLine& progress, bench::BenchReport* report) {
  FASTPATH_ASSIGN_OR_RETURN(InProcessModel model, FindInProcessModel(flags));
  FASTPATH_ASSIGN_OR_RETURN(std::unique_ptr<backend::Backend> backend, onnxruntime::CreateOrtBackend());
  std::shared_ptr<backend::Backend> shared(std::move(backend));
  for (int64_t batch : flags.batch_sizes) {
    FASTPATH_ASSIGN_OR_RETURN(auto target, bench::MakeInProcessTarget(shared, model.file, model.options));
    FASTPATH_RETURN_IF_ERROR(PrepareRequests(*target, flags, batch));
    bench::MeasureOptions options = flags.measure;
    options.batch_size = batch;
    options.progress = [&progress, batch](const std::string& line) {
      progress.Update("in-process batch=" + std::to_string(batch) + " " + line);
    };
    FASTPATH_ASSIGN_OR_RETURN(bench::BenchPoint point, bench::MeasureConcurrency(*target, model.instances, options));
    point.mode = "in_process";
    progress.EndPoint();
    report->in_process.push_back(std::move(point));
  }
  return Status::Ok();
}

Status WriteOutputs(const BenchFlags& flags, const bench::BenchReport& report) {
  std::vector<bench::BenchReport> runs;
  if (!flags.json_path.empty()) {
    std::error_code ec;
    if (flags.append && fs::exists(flags.json_path, ec)) {
      FASTPATH_ASSIGN_OR_RETURN(std::string text, ReadFile(flags.json_path));
      FASTPATH_ASSIGN_OR_RETURN(runs, bench::ReadReportsJson(text, flags.json_path));
    }
    runs.push_back(report);
    FASTPATH_RETURN_IF_ERROR(WriteFileAtomically(flags.json_path, bench::ReportsToJson(runs)));
  } else {
    runs.push_back(report);
  }
  if (!flags.csv_path.empty()) {
    std::error_code ec;
    std::string csv;
    if (flags.append && fs::exists(flags.csv_path, ec)) {
      FASTPATH_ASSIGN_OR_RETURN(csv, ReadFile(flags.csv_path));
    } else {
      csv = bench::CsvHeader();
    }
    csv += bench::ReportCsvRows(report);
    FASTPATH_RETURN_IF_ERROR(WriteFileAtomically(flags.csv_path, csv));
  }
  if (!flags.svg_path.empty()) {
    const std::string title = "fastpath bench: " + report.model + " latency vs throughput";
    FASTPATH_RETURN_IF_ERROR(WriteFileAtomically(flags.svg_path, bench::RenderLatencyThroughputSvg(runs, title)));
  }
  return Status::Ok();
}

int Plot(const std::vector<std::string>& args) {
  std::string svg;
  std::string title = "fastpath bench: latency vs throughput";
  std::vector<std::string> inputs;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << kBenchUsage;
      return kExitOk;
    }
    if ((a == "--svg" || a == "--title") && i + 1 < args.size()) {
      (a == "--svg" ? svg : title) = args[++i];
    } else if (a.rfind("--svg=", 0) == 0) {
      svg = a.substr(6);
    } else if (a.rfind("--title=", 0) == 0) {
      title = a.substr(8);
    } else if (a.rfind("-", 0) == 0) {
      std::cerr << "fastpath bench plot: unknown flag " << a << "\n";
      return kExitUsage;
    } else {
      inputs.push_back(a);
    }
  }
  if (svg.empty() || inputs.empty()) {
    std::cerr << "usage: fastpath bench plot --svg OUT.svg [--title TEXT] REPORT.json...\n";
    return kExitUsage;
  }
  std::vector<bench::BenchReport> runs;
  for (const auto& path : inputs) {
    auto text = ReadFile(path);
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
  Status s = WriteFileAtomically(svg, bench::RenderLatencyThroughputSvg(runs, title));
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
  std::vector<std::vector<Tensor>> requests;
  for (int64_t i = 0; i < flags.request_pool; ++i) {
    FASTPATH_ASSIGN_OR_RETURN(auto inputs,
                              bench::MakeInputs(metadata, flags.shapes, batch_size, flags.measure.seed, i));
    requests.push_back(std::move(inputs));
  }
  return target.Prepare(requests);
}

Status MeasureServerPoints(bench::Target& target, const BenchFlags& flags, ProgressLine& progress,
                           bench::BenchReport* report) {
  bench::MeasureOptions options = flags.measure;
  options.progress = [&progress](const std::string& line) { progress.Update(line); };
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
  auto parsed = ParseBenchFlags(args);
  if (!parsed.ok()) {
    if (parsed.status().code() == StatusCode::kFailedPrecondition) {
      std::cout << kBenchUsage;
      return kExitOk;
    }
    std::cerr << "fastpath bench: " << parsed.status().message() << "\n\n" << kBenchUsage;
    return kExitUsage;
  }
  BenchFlags& flags = *parsed;
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

  if (flags.calibrate) {
    report.transport = bench::TransportName(flags.transport);
    report.label = flags.label.empty() ? flags.model + " batching calibration" : flags.label;
    Status s = RunCalibration(flags, progress, &report);
    if (!s.ok()) return fail(s);
  } else {
    if (flags.in_process) {
      Status s = RunInProcess(flags, progress, &report);
      if (!s.ok()) return fail(s.WithContext("in-process"));
    }
    if (!flags.no_server) {
      report.transport = bench::TransportName(flags.transport);
      const int default_port = flags.transport == bench::Transport::kGrpc ? 8001 : 8000;
      auto address = bench::ParseAddress(flags.url.empty() ? "localhost" : flags.url, default_port);
      if (!address.ok()) return fail(address.status());
      auto target = flags.transport == bench::Transport::kGrpc
                        ? bench::MakeGrpcTarget(*address, flags.model, flags.model_version)
                        : bench::MakeHttpTarget(*address, flags.encoding, flags.model, flags.model_version);
      if (!target.ok()) return fail(target.status());
      report.url = (*target)->Describe();
      Status s = PrepareRequests(**target, flags, flags.batch_size);
      if (!s.ok()) return fail(s);
      s = MeasureServerPoints(**target, flags, progress, &report);
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
  return kExitOk;
}

}  // namespace fastpath::cli
