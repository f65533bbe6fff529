// `fastpath bench --calibrate-batching`: for each candidate (the model without dynamic
// batching, then every max batch size x queue delay), writes a one-model repository whose
// config.pbtxt carries the candidate, starts `fastpath serve` on it (this very binary,
// /proc/self/exe) on loopback port 0, measures at the chosen concurrency, stops it, and
// picks the best throughput whose p99 meets the SLO.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "bench_flags.h"
#include "cli.h"
#include "fastpath/bench/calibration.h"

extern char** environ;

namespace fastpath::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr auto kStartTimeout = std::chrono::seconds(120);
constexpr auto kStopTimeout = std::chrono::seconds(60);

std::string Tail(const fs::path& path, size_t n = 1500) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return "";
  std::string t = *text;
  return t.size() > n ? "..." + t.substr(t.size() - n) : t;
}

// A temporary directory removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "fastpath-calibrate-XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// `fastpath serve` as a child; SIGTERMed (then SIGKILLed) on destruction.
class ServeChild {
 public:
  ~ServeChild() { Stop(); }

  Status Start(const fs::path& repository, const fs::path& work) {
    const fs::path port_file = work / "ports";
    log_ = work / "serve.log";
    std::error_code ec;
    const std::string exe = fs::read_symlink("/proc/self/exe", ec).string();
    if (ec) return Internal("cannot find this binary (/proc/self/exe): " + ec.message());
    std::vector<std::string> args = {exe, "serve", "--model-repository", repository.string(), "--http-port", "0",
                                     "--grpc-port", "0", "--metrics-port", "0", "--host", "127.0.0.1",
                                     "--port-file", port_file.string()};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return Internal("cannot start " + exe + " serve: " + std::strerror(rc));
    pid_ = pid;
    const auto deadline = Clock::now() + kStartTimeout;
    while (true) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return Unavailable("fastpath serve exited during start-up; log: " + Tail(log_));
      }
      std::ifstream in(port_file);
      std::string http_field, grpc_field;
      if (in >> http_field >> grpc_field && http_field.rfind("http=", 0) == 0 && grpc_field.rfind("grpc=", 0) == 0) {
        http_port_ = std::atoi(http_field.c_str() + 5);
        grpc_port_ = std::atoi(grpc_field.c_str() + 5);
        return Status::Ok();
      }
      if (Clock::now() > deadline) return Unavailable("fastpath serve wrote no port file; log: " + Tail(log_));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    const auto deadline = Clock::now() + kStopTimeout;
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    pid_ = -1;
  }

  int http_port() const { return http_port_; }
  int grpc_port() const { return grpc_port_; }
  const fs::path& log() const { return log_; }

 private:
  pid_t pid_ = -1;
  int http_port_ = 0;
  int grpc_port_ = 0;
  fs::path log_;
};

// A repository holding only the model, config rewritten, model files linked.
Status WriteCandidateRepository(const fs::path& source_model, const fs::path& repo, const std::string& model,
                                const std::string& config_text) {
  const fs::path dst = repo / model;
  std::error_code ec;
  fs::create_directories(dst, ec);
  if (ec) return Internal("cannot create " + dst.string() + ": " + ec.message());
  {
    std::ofstream out(dst / "config.pbtxt", std::ios::binary | std::ios::trunc);
    if (!(out << config_text)) return Internal("cannot write " + (dst / "config.pbtxt").string());
  }
  for (const auto& entry : fs::directory_iterator(source_model, ec)) {
    if (!entry.is_directory(ec)) continue;
    const fs::path version_dir = dst / entry.path().filename();
    fs::create_directories(version_dir, ec);
    for (const auto& file : fs::directory_iterator(entry.path(), ec)) {
      fs::create_symlink(fs::absolute(file.path()), version_dir / file.path().filename(), ec);
      if (ec) return Internal("cannot link " + file.path().string() + ": " + ec.message());
    }
  }
  return Status::Ok();
}

Status RunCandidate(const BenchFlags& flags, const std::string& base_config, ProgressLine& progress,
                    bench::CalibrationCandidate* candidate) {
  FASTPATH_ASSIGN_OR_RETURN(std::string config_text,
                            bench::RewriteBatchingConfig(base_config, flags.model + "/config.pbtxt", *candidate));
  TempDir tmp;
  if (tmp.path().empty()) return Internal("cannot create a temporary directory");
  const fs::path repo = tmp.path() / "repository";
  FASTPATH_RETURN_IF_ERROR(
      WriteCandidateRepository(fs::path(flags.model_repository) / flags.model, repo, flags.model, config_text));
  ServeChild serve;
  FASTPATH_RETURN_IF_ERROR(serve.Start(repo, tmp.path()));
  bench::ServerAddress address;
  address.host = "127.0.0.1";
  address.port = flags.transport == bench::Transport::kGrpc ? serve.grpc_port() : serve.http_port();
  FASTPATH_ASSIGN_OR_RETURN(auto target, flags.transport == bench::Transport::kGrpc
                                             ? bench::MakeGrpcTarget(address, flags.model, flags.model_version)
                                             : bench::MakeHttpTarget(address, flags.encoding, flags.model,
                                                                     flags.model_version));
  // The model loads after the ports open: wait until its metadata answers.
  const auto deadline = Clock::now() + kStartTimeout;
  Status prepared;
  while (true) {
    prepared = PrepareRequests(*target, flags, flags.batch_size);
    if (prepared.ok() || Clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!prepared.ok()) return prepared.WithContext("the model did not come up (log: " + Tail(serve.log()) + ")");
  bench::MeasureOptions options = flags.measure;
  const std::string name = candidate->dynamic_batching
                               ? "mbs=" + std::to_string(candidate->max_batch_size) +
                                     " delay=" + std::to_string(candidate->max_queue_delay_us) + "us"
                               : "no dynamic batching";
  options.progress = [&progress, name](const std::string& line) { progress.Update(name + " " + line); };
  FASTPATH_ASSIGN_OR_RETURN(candidate->point, bench::MeasureConcurrency(*target, flags.concurrency[0], options));
  progress.EndPoint();
  serve.Stop();
  return Status::Ok();
}

}  // namespace

Status RunCalibration(const BenchFlags& flags, ProgressLine& progress, bench::BenchReport* report) {
  const fs::path config_path = fs::path(flags.model_repository) / flags.model / "config.pbtxt";
  auto base = ReadTextFile(config_path);
  if (!base.ok()) {
    return NotFound("model '" + flags.model + "' has no " + config_path.string() +
                    " (--calibrate-batching rewrites the model's config)");
  }
  // Check the config once up front, so that a broken file is one clear error.
  bench::CalibrationCandidate probe;
  probe.dynamic_batching = false;
  FASTPATH_RETURN_IF_ERROR(bench::RewriteBatchingConfig(*base, config_path.string(), probe).status());

  bench::CalibrationResult result;
  result.slo_p99_ms = *flags.slo_p99_ms;
  result.concurrency = flags.concurrency[0];
  if (!flags.skip_baseline) {
    bench::CalibrationCandidate baseline;
    baseline.dynamic_batching = false;
    result.candidates.push_back(baseline);
  }
  for (int64_t mbs : flags.max_batch_sizes) {
    for (int64_t delay : flags.queue_delays_us) {
      bench::CalibrationCandidate c;
      c.max_batch_size = mbs;
      c.max_queue_delay_us = delay;
      result.candidates.push_back(c);
    }
  }
  for (auto& c : result.candidates) {
    c.point.mode = "concurrency";
    c.point.concurrency = result.concurrency;
    Status s = RunCandidate(flags, *base, progress, &c);
    if (s.ok()) {
      c.ran = true;
    } else {
      c.failure = s.message();
      progress.Update("candidate failed: " + s.message());
      progress.EndPoint();
    }
  }
  result.chosen = bench::ChooseCalibration(result.candidates, result.slo_p99_ms);
  report->url = "fastpath serve started per candidate on 127.0.0.1";
  report->points.clear();
  report->calibration = std::move(result);
  return Status::Ok();
}

}  // namespace fastpath::cli
