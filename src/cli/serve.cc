// `fastpath serve`: the model repository on ONNX Runtime, served over HTTP and gRPC.
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "cli.h"
#include "command_line.h"
#include "fastpath/admission/admission_report.h"
#include "fastpath/admission/version_lock.h"
#include "fastpath/common/allocator.h"
#include "fastpath/common/decimal.h"
#include "fastpath/common/duration.h"
#include "fastpath/common/log.h"
#include "fastpath/common/open_files.h"
#include "fastpath/common/thread_start.h"
#include "fastpath/config/model_config.h"
#include "fastpath/frontend/grpc_server.h"
#include "fastpath/frontend/http_server.h"
#include "fastpath/gpu/capability_snapshot.h"
#include "fastpath/gpu/node_snapshot.h"
#include "fastpath/gpu/snapshot_json.h"
#include "fastpath/gpu/telemetry.h"
#include "fastpath/metrics/metrics.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/server/server_impl.h"
#include "gate_verdict.h"
#include "runtime_options.h"

namespace fastpath::cli {
namespace {

// SIGTERM and SIGINT, taken with sigwait on a thread of their own from before the models
// load (every other thread blocks them). During start-up a signal ends the process at once:
// nothing has been accepted yet, and a pod deleted while it loads goes now, not at
// Kubernetes' SIGKILL after terminationGracePeriodSeconds. Once serving, the first signal
// begins the drain, and a second one ends the process at once (Ctrl-C twice). Once the drain
// is done, SIGALRM (Done's alarm) ends a process that has not ended by itself.
class ShutdownSignals {
 public:
  explicit ShutdownSignals(const sigset_t& signals) : signals_(signals) {
    // Never joined: it waits in sigwait until the process ends.
    std::thread([this] { Watch(); }).detach();
  }
  // From now on a signal drains instead of ending the process.
  void Serving() {
    std::lock_guard lock(mu_);
    serving_ = true;
  }
  // The drain is over: a signal from now on is ignored (the process is about to exit 0).
  // What is left is to destroy what served, which should take a moment; should it hang,
  // the process exits 0 all the same once `patience` has passed: everything it accepted
  // has been answered. (At the thread limit gRPC 1.51 waits for ever, in grpc_shutdown, for
  // a timer thread it could not start.) A start that fails after the front ends started
  // ends the same way, with its own `exit_code`.
  void Done(std::chrono::seconds patience, int exit_code = 0) {
    std::lock_guard lock(mu_);
    done_ = true;
    patience_ = patience;
    exit_code_ = exit_code;
    alarm(static_cast<unsigned>(patience.count()));
  }
  // Waits for the signal that begins the drain; returns it.
  int AwaitDrain() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return first_ != 0; });
    return first_;
  }

 private:
  void Watch() {
    for (;;) {
      int number = 0;
      if (sigwait(&signals_, &number) != 0) continue;
      std::lock_guard lock(mu_);
      if (number == SIGALRM) {
        if (!done_) continue;  // not Done's
        log::Warn("the process had not ended " + std::to_string(patience_.count()) + " s after " +
                  (exit_code_ == 0 ? "its drain" : "its failed start") +
                  " (destroying what served hung): exiting now");
        std::_Exit(exit_code_);
      }
      const std::string name = number == SIGTERM ? "SIGTERM" : "SIGINT";
      if (done_) continue;
      if (!serving_) {
        log::Warn(name + " during start-up: exiting before serving (no request was accepted)");
        std::_Exit(128 + number);
      }
      if (first_ != 0) {
        log::Warn(name +
                  " during the drain: exiting now; the requests still in flight are "
                  "not answered");
        std::_Exit(128 + number);
      }
      first_ = number;
      cv_.notify_all();
    }
  }

  const sigset_t signals_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool serving_ = false;  // guarded by mu_
  bool done_ = false;     // guarded by mu_
  std::chrono::seconds patience_{0};  // guarded by mu_
  int exit_code_ = 0;                 // guarded by mu_
  int first_ = 0;         // guarded by mu_; the signal that began the drain
};

const char* ControlModeName(repository::ControlMode mode) {
  switch (mode) {
    case repository::ControlMode::kExplicit:
      return "explicit";
    case repository::ControlMode::kPoll:
      return "poll";
    case repository::ControlMode::kNone:
      break;
  }
  return "none";
}

struct ServeFlags {
  server::ServerOptions server;
  frontend::HttpOptions http;
  frontend::GrpcOptions grpc;
  metrics::MetricsOptions metrics;  // port 8002
  bool allow_metrics = true;
  std::chrono::seconds grace{30};
  std::string port_file;
  std::string version_lock;
  std::string engine_cache;
  std::string gpu_trace;
  // HTTP bodies and gRPC messages held at once; 0: a quarter of the process's memory.
  uint64_t request_bytes_in_flight = 0;
  RolloutVerdictOptions rollout_verdict;  // /v2/rollout/verdict: off unless given
  log::Options logging;
};

// Binds every option of `fastpath serve` to `flags`, whose values are the defaults shown.
void DefineServeOptions(CLI::App& app, ServeFlags& flags) {
  AddRepeatedValue(app, "--model-repository", "DIR",
                   "Triton-layout model repository; given again, each one more, served as one "
                   "(a model name must be unique across them)",
                   [&flags](const std::string& value) {
                     if (value.empty()) return InvalidArgument("--model-repository needs a value");
                     flags.server.repository.roots.push_back(value);
                     return Status::Ok();
                   })
      ->required();
  AddValue(app, "--profile", "production|dev",
           "production: any degradation is fatal (exit 22, 23) and the CPU never runs a GPU "
           "model",
           admission::ProfileName(flags.server.policy.profile), [&flags](const std::string& value) {
             FASTPATH_ASSIGN_OR_RETURN(flags.server.policy.profile, admission::ParseProfile(value));
             return Status::Ok();
           });
  AddSwitch(app, "--allow-cpu-fallback", &flags.server.policy.allow_cpu_fallback,
            "dev only: a GPU model whose GPU placement fails serves on the CPU, labelled "
            "DEGRADED in the log and /v2/health/admission");
  AddText(app, "--version-lock", "FILE", &flags.version_lock,
          "refuse to start (exit 20) unless this node matches the lock written by `fastpath "
          "doctor --lock`");
  AddText(
      app, "--engine-cache", "DIR", &flags.engine_cache,
      "TensorRT engine cache root, keyed per model version (default: .engine-cache in the first "
      "repository; see build-engines)");
  AddInt(app, "--http-port", "N", &flags.http.port, 0, 65535,
         "KServe v2 HTTP/REST port; 0 picks a free port");
  AddInt(app, "--grpc-port", "N", &flags.grpc.port, 0, 65535,
         "KServe v2 gRPC port; 0 picks a free port");
  AddBool(app, "--allow-metrics", &flags.allow_metrics, "serve Prometheus metrics at /metrics");
  AddInt(app, "--metrics-port", "N", &flags.metrics.port, 0, 65535,
         "Prometheus metrics port; 0 picks a free port");
  AddValue(app, "--host", "ADDR", "address to bind", flags.http.address,
           [&flags](const std::string& value) {
             // Checked here, before any model loads: the listeners bind an IP literal as given.
             in6_addr ip{};
             if (inet_pton(AF_INET, value.c_str(), &ip) != 1 &&
                 inet_pton(AF_INET6, value.c_str(), &ip) != 1) {
               return InvalidArgument(
                   "--host must be an IP address (0.0.0.0 or :: for every interface, 127.0.0.1 "
                   "or ::1 for this host only), not '" +
                   value + "'");
             }
             flags.http.address = value;
             flags.grpc.address = value;
             flags.metrics.address = value;
             return Status::Ok();
           });
  AddValue(app, "--model-control-mode", "none|explicit|poll", "how models are loaded",
           ControlModeName(flags.server.repository.mode), [&flags](const std::string& value) {
             FASTPATH_ASSIGN_OR_RETURN(flags.server.repository.mode,
                                       repository::ParseControlMode(value));
             return Status::Ok();
           });
  AddRepeatedValue(app, "--load-model", "NAME",
                   "explicit mode: load NAME at start (repeatable; * = all)",
                   [&flags](const std::string& value) {
                     flags.server.startup_models.push_back(value);
                     return Status::Ok();
                   });
  AddInt(
      app, "--repository-poll-secs", "N", 1, 86400,
      std::chrono::duration_cast<std::chrono::seconds>(flags.server.repository.poll_interval)
          .count(),
      [&flags](int64_t secs) {
        flags.server.repository.poll_interval = std::chrono::seconds(secs);
      },
      "poll mode: seconds between rescans");
  AddThreadPoolOption(app, &flags.server.repository.thread_pool);
  AddBool(app, "--strict-readiness", &flags.server.strict_readiness,
          "ready only when every model is READY");
  AddInt(app, "--http-threads", "N", &flags.http.threads, 1, 256,
         "threads serving HTTP connections");
  AddInt(app, "--grpc-threads", "N", &flags.grpc.threads, 1, 256,
         "threads serving gRPC calls, each polling a completion queue of its own");
  // One option, two limits: each front end keeps its own default until it is given.
  AddValue(app, "--max-request-bytes", "N",
           "largest HTTP body or gRPC request taken (answers: no limit), 1024 to 2^31 "
           "(default " +
               std::to_string(flags.http.max_body_bytes) + " for HTTP, " +
               std::to_string(flags.grpc.max_message_bytes) + " for gRPC)",
           "", [&flags](const std::string& value) {
             FASTPATH_ASSIGN_OR_RETURN(
                 int64_t bytes, ParseInt("--max-request-bytes", value, 1024, int64_t{1} << 31));
             flags.http.max_body_bytes = static_cast<size_t>(bytes);
             flags.grpc.max_message_bytes = static_cast<int>(std::min<int64_t>(bytes, INT32_MAX));
             return Status::Ok();
           });
  AddValue(app, "--max-request-bytes-in-flight", "N",
           "request bytes read or served at once, HTTP bodies and gRPC messages together; past "
           "it, HTTP 503 with Retry-After, gRPC RESOURCE_EXHAUSTED (default: a quarter of the "
           "memory the process may use, the least of the host's, the cgroup limit and "
           "ulimit -v, at least --max-request-bytes)",
           "", [&flags](const std::string& value) {
             FASTPATH_ASSIGN_OR_RETURN(int64_t bytes, ParseInt("--max-request-bytes-in-flight",
                                                               value, 1024, int64_t{1} << 50));
             flags.request_bytes_in_flight = static_cast<uint64_t>(bytes);
             return Status::Ok();
           });
  AddInt(app, "--max-queue-size", "N", &flags.server.repository.max_queue_size, 1, 1 << 24,
         "requests queued per model version before 503");
  AddInt(
      app, "--grace-period-secs", "N", 0, 3600, flags.grace.count(),
      [&flags](int64_t secs) { flags.grace = std::chrono::seconds(secs); },
      "on SIGTERM, how long in-flight requests may take");
  AddInt(
      app, "--memory-sample-interval-ms", "N", 0, 3600 * 1000,
      flags.server.memory_sample_interval.count(),
      [&flags](int64_t ms) { flags.server.memory_sample_interval = std::chrono::milliseconds(ms); },
      "how often every instance's memory arena is sampled for the leak detector and /metrics "
      "(0: never)");
  AddInt(
      app, "--memory-leak-window-secs", "N", 60, 7 * 24 * 3600,
      std::chrono::duration_cast<std::chrono::seconds>(flags.server.leak_detector.window).count(),
      [&flags](int64_t secs) { flags.server.leak_detector.window = std::chrono::seconds(secs); },
      "the leak detector's window: memory held at rest that rises across all of it, with the "
      "request mix steady, is a suspected leak (--memory-sample-interval-ms at most a twelfth of "
      "it: two samples in each sixth)");
  AddInt(
      app, "--gpu-sample-interval-ms", "N", 0, 3600 * 1000, flags.server.gpu_sample_interval.count(),
      [&flags](int64_t ms) { flags.server.gpu_sample_interval = std::chrono::milliseconds(ms); },
      "how often every GPU is sampled through NVML (temperature, clocks, throttle reasons, "
      "ECC, XIDs) for /metrics, /v2/health/admission and the quarantine (0: once, at start)");
  AddText(app, "--gpu-trace", "FILE", &flags.gpu_trace,
          "replay GPU samples from this JSON-lines trace instead of NVML (an incident, or a "
          "test; `fastpath doctor --record-gpu-trace` writes one)");
  AddValue(app, "--gpu-ignored-xids", "LIST",
           "XIDs that are the application's fault and never quarantine a GPU (the Kubernetes "
           "device plugin's list); every other XID does",
           "13,31,43,45,68,109", [&flags](const std::string& value) {
             auto xids = gpu::ParseXidList(value);
             if (!xids.ok()) {
               return InvalidArgument("--gpu-ignored-xids: " + xids.status().message());
             }
             flags.server.gpu_ignored_xids = std::move(xids).value();
             return Status::Ok();
           });
  AddValue(app, "--drift-window", "DURATION",
           "the drift window: compute per execution over it is compared with each model's "
           "start-up baseline (e.g. 30m, 90s)",
           "30m", [&flags](const std::string& value) {
             FASTPATH_ASSIGN_OR_RETURN(
                 const std::chrono::milliseconds window,
                 ParseDuration("--drift-window", value, std::chrono::seconds(1), std::chrono::hours(24)));
             flags.server.drift.window = window;
             return Status::Ok();
           });
  AddValue(app, "--drift-threshold", "F",
           "a model drifts when compute per execution is at least 1 + F times its start-up "
           "baseline over the window (0.01 to 10)",
           "0.15", [&flags](const std::string& value) {
             const double f = ParseDecimal(value).value_or(NAN);
             if (!(f >= 0.01 && f <= 10)) {
               return InvalidArgument("--drift-threshold must be a number from 0.01 to 10, not '" +
                                      value + "'");
             }
             flags.server.drift.threshold = f;
             return Status::Ok();
           });
  AddSwitch(app, "--drift-degrades", &flags.server.drift_degrades,
            "a model that drifts shows DEGRADED in /v2/health/admission and "
            "fastpath_model_state (readiness stays up)");
  AddRepeatedValue(app, "--rollout-verdict-baseline", "URL",
                   "turn on GET /v2/rollout/verdict (`fastpath gate` with this server as the "
                   "candidate), allowing this baseline server (http://HOST:PORT; repeatable): the "
                   "endpoint measures against no other",
                   [&flags](const std::string& value) -> Status {
                     FASTPATH_ASSIGN_OR_RETURN(bench::ServerAddress address,
                                               ParseVerdictBaseline(value));
                     flags.rollout_verdict.baselines.push_back(std::move(address));
                     return Status::Ok();
                   });
  AddText(app, "--rollout-verdict-records", "DIR", &flags.rollout_verdict.records,
          "turn on GET /v2/rollout/verdict, allowing the baselines recorded (`fastpath gate "
          "--record`) in this folder, named relative to it");
  AddText(app, "--port-file", "FILE", &flags.port_file,
          "write \"http=N grpc=N[ metrics=N]\" once listening (for tests with port 0)");
  AddLogOptions(app, &flags.logging);
}

// What depends on the values, beyond what CLI11 checks.
Status CheckServeFlags(const ServeFlags& flags) {
  // Said before the models load, not when the second front end fails to bind after them.
  const std::pair<const char*, int> ports[] = {{"--http-port", flags.http.port},
                                               {"--grpc-port", flags.grpc.port},
                                               {"--metrics-port", flags.metrics.port}};
  for (size_t i = 0; i < std::size(ports); ++i) {
    for (size_t j = i + 1; j < std::size(ports); ++j) {
      if (ports[i].second != 0 && ports[i].second == ports[j].second &&
          (j < 2 || flags.allow_metrics)) {
        return InvalidArgument(std::string(ports[i].first) + " and " + ports[j].first +
                               " are both " + std::to_string(ports[i].second));
      }
    }
  }
  // The port file is written once the ports are open, after every model's load: a folder
  // that is not there is said now, not after the loads with the file never written.
  if (!flags.port_file.empty()) {
    std::error_code ec;
    const std::filesystem::path file(flags.port_file);
    if (std::filesystem::is_directory(file, ec)) {
      return InvalidArgument("--port-file: " + flags.port_file + " is a folder");
    }
    if (file.has_parent_path() && !std::filesystem::is_directory(file.parent_path(), ec)) {
      return InvalidArgument("--port-file: the folder " + file.parent_path().string() +
                             " does not exist");
    }
  }
  if (flags.server.policy.profile == admission::Profile::kProduction &&
      flags.server.policy.allow_cpu_fallback) {
    return InvalidArgument(
        "--allow-cpu-fallback is refused with --profile production: there the CPU "
        "never runs a GPU model");
  }
  if (flags.server.repository.mode != repository::ControlMode::kExplicit &&
      !flags.server.startup_models.empty()) {
    return InvalidArgument("--load-model needs --model-control-mode explicit");
  }
  // Triton refuses to start without a model it was asked for; here a name that cannot load
  // is refused before anything loads, rather than logged once under a server that never
  // turns ready.
  const std::vector<std::filesystem::path>& roots = flags.server.repository.roots;
  for (size_t i = 0; i < roots.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      std::error_code ec;
      if (std::filesystem::equivalent(roots[i], roots[j], ec)) {
        return InvalidArgument("--model-repository " + roots[i].string() + " is given twice (as " +
                               roots[j].string() + ")");
      }
    }
  }
  for (const std::string& model : flags.server.startup_models) {
    if (model == "*") continue;
    if (Status name = repository::CheckModelName(model); !name.ok()) {
      return InvalidArgument("--load-model " + name.message());
    }
    std::string where;
    std::vector<std::string> found;
    bool all_folders = true;  // a missing root fails with its own message later
    for (const auto& root : roots) {
      std::error_code ec;
      all_folders = all_folders && std::filesystem::is_directory(root, ec);
      if (std::filesystem::is_directory(root / model, ec)) found.push_back((root / model).string());
      where += (where.empty() ? "" : ", ") + root.string();
    }
    if (all_folders && found.empty()) {
      return InvalidArgument("--load-model '" + model + "': no model folder '" + model + "' in " +
                             where);
    }
    if (found.size() > 1) {
      return InvalidArgument("--load-model '" + model +
                             "': the name is not unique across the "
                             "repositories: " +
                             found[0] + ", " + found[1] + (found.size() > 2 ? ", ..." : ""));
    }
  }
  // Each of the leak window's buckets needs a sample (two, to not flap); fewer leave a part
  // of every window empty, and the detector could never judge.
  if (const auto interval = flags.server.memory_sample_interval; interval.count() > 0) {
    const auto& leak = flags.server.leak_detector;
    const auto bucket = std::chrono::duration_cast<std::chrono::milliseconds>(leak.window) /
                        std::max(1, leak.buckets);
    if (interval * 2 > bucket) {
      return InvalidArgument(
          "--memory-sample-interval-ms " + std::to_string(interval.count()) +
          " is too long for --memory-leak-window-secs " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(leak.window).count()) +
          ": each of the window's " + std::to_string(leak.buckets) +
          " parts needs two samples, so sample every " + std::to_string(bucket.count() / 2) +
          " ms or less, or widen the window to " +
          std::to_string((interval.count() * 2 * leak.buckets + 999) / 1000) + " s or more");
    }
  }
  if (flags.request_bytes_in_flight != 0 &&
      flags.request_bytes_in_flight < flags.http.max_body_bytes) {
    return InvalidArgument(
        "--max-request-bytes-in-flight " + std::to_string(flags.request_bytes_in_flight) +
        " is below --max-request-bytes " + std::to_string(flags.http.max_body_bytes) +
        ": a request of the largest size could never be taken");
  }
  if (const std::string& records = flags.rollout_verdict.records; !records.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(records, ec)) {
      return InvalidArgument("--rollout-verdict-records '" + records + "': no such folder");
    }
  }
  return Status::Ok();
}

// The node-level admission, before any model loads: the capability snapshot (kept for
// /v2/health/admission) and the version lock. Returns the exit code, kExitOk to go on.
int AdmitNode(ServeFlags* flags) {
  const gpu::CapabilitySnapshot snapshot = gpu::TakeNodeSnapshot(FASTPATH_VERSION);
  const std::vector<gpu::Finding> findings = gpu::Assess(snapshot);
  flags->server.capability_snapshot_json = gpu::SnapshotToJson(snapshot, findings);
  flags->server.device_memory_bytes = DeviceMemoryTotals(snapshot);
  flags->server.repository.usable_cpu_cores = gpu::UsableCores(snapshot.container);
  if (flags->request_bytes_in_flight == 0) {
    uint64_t memory = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                      static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
    if (snapshot.container.cgroup_memory_limit_bytes) {
      memory = std::min(memory, *snapshot.container.cgroup_memory_limit_bytes);
    }
    if (rlimit as{}; getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
      memory = std::min<uint64_t>(memory, as.rlim_cur);  // ulimit -v
    }
    flags->request_bytes_in_flight = std::max<uint64_t>(flags->http.max_body_bytes, memory / 4);
    log::Info("request bytes in flight, HTTP and gRPC together: at most " +
              std::to_string(flags->request_bytes_in_flight >> 20) + " MiB, a quarter of the " +
              std::to_string(memory >> 20) + " MiB the process may use " +
              "(--max-request-bytes-in-flight to choose)");
  }
  // A gRPC message larger than the bound could never be taken: gRPC refuses it itself, as too
  // large, rather than each one being told to retry. (HTTP's largest body is checked against
  // the bound with the flags; gRPC's default largest message is 1 GiB.)
  if (static_cast<uint64_t>(flags->grpc.max_message_bytes) > flags->request_bytes_in_flight) {
    flags->grpc.max_message_bytes = static_cast<int>(flags->request_bytes_in_flight);
    log::Info("gRPC messages: at most " + std::to_string(flags->request_bytes_in_flight >> 20) +
              " MiB, the request bytes in flight (--max-request-bytes to choose)");
  }
  SetEngineCacheFromSnapshot(snapshot, flags->server.repository.roots.front(), flags->engine_cache,
                             &flags->server.repository);
  const admission::Policy& policy = flags->server.policy;
  log::Info(std::string("profile ") + admission::ProfileName(policy.profile) +
            (policy.profile == admission::Profile::kProduction
                 ? ": any degradation is fatal; the CPU never runs a GPU model"
                 : ": degraded models serve, labelled DEGRADED"));
  if (policy.allow_cpu_fallback) {
    log::Warn(
        "!!! --allow-cpu-fallback: GPU models may run on the CPU (10-30x slower); each one that "
        "does is labelled DEGRADED");
  }
  for (const gpu::Finding& f : findings) {
    log::Warn(std::string("GPU fast path: [") + gpu::FailureClassName(f.failure) + "] " +
              f.message);
  }
  if (flags->version_lock.empty()) return kExitOk;
  auto lock = admission::ReadLockFile(flags->version_lock);
  if (!lock.ok()) {
    log::Error(lock.status().message());
    return kExitBadLockFile;
  }
  const std::vector<admission::LockMismatch> mismatches = admission::CheckLock(*lock, snapshot);
  if (!mismatches.empty()) {
    log::Error("this node does not match the version lock " + flags->version_lock +
               "; refusing to start:\n" + admission::DescribeMismatches(mismatches) + "(exit " +
               std::to_string(kExitVersionLockMismatch) + "; see docs/runbooks/admission.md)");
    return kExitVersionLockMismatch;
  }
  flags->server.version_lock = flags->version_lock;
  flags->server.version_lock_pinned = admission::PinnedComponents(*lock);
  std::string pins;
  for (const std::string& p : flags->server.version_lock_pinned)
    pins += (pins.empty() ? "" : ", ") + p;
  log::Info("version lock " + flags->version_lock + ": node admitted (pins " +
            (pins.empty() ? "nothing" : pins) + ")");
  return kExitOk;
}

// GPU telemetry: the trace when one is given, else NVML where it loads and shows a GPU; none
// on a machine without one. Returns the exit code, kExitOk to go on.
int OpenGpuTelemetry(ServeFlags* flags) {
  if (!flags->gpu_trace.empty()) {
    auto trace = gpu::OpenTraceSource(flags->gpu_trace);
    if (!trace.ok()) {
      log::Error("--gpu-trace: " + trace.status().message());
      return kExitUsage;
    }
    flags->server.gpu_source = std::move(trace).value();
  } else {
    auto nvml = gpu::OpenNvmlSource(gpu::ProbeEnvironment::Host());
    if (!nvml.ok()) {
      // No NVML is a machine without a GPU; NVML that loads and cannot be used is not.
      const bool absent = nvml.status().message().rfind("NVML cannot be loaded", 0) == 0;
      if (absent) {
        log::Info("GPU telemetry off: " + nvml.status().message());
      } else {
        log::Warn("GPU telemetry off: " + nvml.status().message() +
                  "; no throttling, ECC or XID is watched and no GPU is quarantined");
      }
      return kExitOk;
    }
    flags->server.gpu_source = std::move(nvml).value();
  }
  log::Info("GPU telemetry from " + flags->server.gpu_source->Describe() + ", every " +
            std::to_string(flags->server.gpu_sample_interval.count()) + " ms");
  return kExitOk;
}

// After the start-up models loaded and ran their self-tests: DEGRADED models are shouted
// in the log; in production a model that is not READY stops the start (22 for a missed
// budget, with the figures beside it, 23 otherwise).
int JudgeStartup(const admission::AdmissionReport& report) {
  bool missed_budget = false;
  std::string refused;
  for (const admission::ModelAdmission& m : report.models) {
    const std::string what =
        "model '" + m.name + "'" + (m.version.empty() ? "" : " version " + m.version);
    if (m.state == admission::AdmissionState::kDegraded) {
      for (const std::string& r : m.reasons) log::Warn("!!! " + what + " is DEGRADED: " + r);
    }
    if (m.state != admission::AdmissionState::kUnavailable || m.unloaded) continue;
    refused += "  " + what + ": " + (m.reasons.empty() ? "UNAVAILABLE" : m.reasons.front()) + "\n";
    if (m.self_test && !m.self_test->passed()) {
      missed_budget = true;
      refused += "    measured " + m.self_test->Summary() + "\n";
    }
  }
  if (report.policy.profile != admission::Profile::kProduction || refused.empty()) return kExitOk;
  const int code = missed_budget ? kExitSelfTestFailed : kExitModelNotAdmitted;
  log::Error(
      std::string("production profile: ") +
      (missed_budget ? "a model missed its start-up self-test budget" : "a model is not READY") +
      "; refusing to serve:\n" + refused + "(exit " + std::to_string(code) +
      "; see docs/runbooks/admission.md)");
  return code;
}

// main() sets CUDA_DEVICE_ORDER=PCI_BUS_ID unless the user set it: another order may number
// GPUs otherwise than NVML, and a GPU's telemetry be matched to another GPU's models.
void WarnOfDeviceOrder() {
  const char* order = std::getenv("CUDA_DEVICE_ORDER");
  if (order != nullptr && std::string(order) != "PCI_BUS_ID") {
    log::Warn("CUDA_DEVICE_ORDER=" + std::string(order) +
              ": CUDA ordinals may not be NVML's indices on a node with GPUs of more than one "
              "kind, so a GPU's telemetry, throttling and quarantine may be matched to another "
              "GPU's models; unset it (fastpath then uses PCI_BUS_ID) or set PCI_BUS_ID");
  }
}

}  // namespace

int Serve(const std::vector<std::string>& args) {
  ServeFlags flags;
  CLI::App app{
      "Serves a Triton-layout model repository on ONNX Runtime over KServe v2 HTTP and "
      "gRPC, with Prometheus metrics.",
      "fastpath serve"};
  UseHelpLayout(app, "usage: fastpath serve --model-repository DIR [options]");
  DefineServeOptions(app, flags);
  if (auto exit_code = ParseCommandLine(app, args)) return *exit_code;
  if (Status s = CheckServeFlags(flags); !s.ok()) return UsageError(app, s.message());
  flags.logging.name = "fastpath serve";
  log::Configure(flags.logging);
  WarnOfDeviceOrder();

  // A server whose log reader went away (a pipe to a log shipper that restarted) serves on: its
  // next line would otherwise kill it with SIGPIPE, with nowhere to say why. Writes to the
  // broken pipe fail and are dropped. (Sockets never raise it: Asio and gRPC send with
  // MSG_NOSIGNAL.)
  signal(SIGPIPE, SIG_IGN);
  // Block the shutdown signals in every thread; ShutdownSignals' own takes them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGALRM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // Leaked on purpose: its thread uses it until the process ends.
  ShutdownSignals* shutdown_signals = nullptr;
  try {
    shutdown_signals = new ShutdownSignals(signals);
  } catch (const std::system_error& e) {
    log::Error(ThreadLimitReached(e, "the thread that takes SIGTERM").ToString());
    return kExitRuntime;
  }

  if (int code = AdmitNode(&flags); code != kExitOk) return code;
  if (int code = OpenGpuTelemetry(&flags); code != kExitOk) return code;

  auto backend = onnxruntime::CreateOrtBackend(
      OrtOptionsFor(flags.server.repository.thread_pool, flags.server.repository.usable_cpu_cores));
  if (!backend.ok()) {
    log::Error("ONNX Runtime is unusable: " + backend.status().ToString());
    return kExitRuntime;
  }
  log::Info("memory allocator: " + DescribeProcessAllocator());
  log::Info(RaiseOpenFileLimit());
  log::Info("ONNX Runtime " + onnxruntime::OrtVersion() +
            ", execution providers per model (KIND_GPU: the config's gpu_execution_accelerator "
            "list or cuda, through the plugin-EP API; placement logged per instance)");
  std::shared_ptr<backend::Backend> shared_backend = std::move(backend).value();
  auto server = server::Server::Open(flags.server, shared_backend);
  if (!server.ok()) {
    log::Error(server.status().ToString());
    return kExitRuntime;
  }
  if (flags.rollout_verdict.enabled()) {
    flags.http.rollout_verdict = MakeRolloutVerdict(flags.rollout_verdict);
    log::Warn(
        "GET /v2/rollout/verdict is on: whoever reaches this server's HTTP port can make it "
        "measure itself against the allowed baselines (--rollout-verdict-baseline, "
        "--rollout-verdict-records), a few seconds of load on both");
  }
  // The front ends start before the models load, their threads with the server's own: under
  // a thread limit the models that do not fit fail, not the process. Until the start ends
  // they answer health (not ready) and refuse inference and model control (503).
  // One bound for both front ends: the memory is the process's.
  flags.http.request_bytes = flags.grpc.request_bytes =
      std::make_shared<frontend::RequestBytes>(flags.request_bytes_in_flight);
  // From here a failed start has front ends to destroy, which gRPC 1.51 may hang at the
  // thread limit: the exit watchdog ends it with the same code.
  const auto failed_start = [&](int code) {
    shutdown_signals->Done(std::chrono::seconds(10), code);
    return code;
  };
  auto http = frontend::HttpServer::Start(**server, flags.http);
  if (!http.ok()) {
    log::Error("HTTP front end: " + http.status().ToString());
    return failed_start(kExitRuntime);
  }
  auto grpc = frontend::GrpcServer::Start(**server, flags.grpc);
  if (!grpc.ok()) {
    log::Error("gRPC front end: " + grpc.status().ToString());
    return failed_start(kExitRuntime);
  }
  // Declared after the facade so that it stops before the facade it reads goes away.
  std::unique_ptr<metrics::MetricsServer> metrics_server;
  if (flags.allow_metrics) {
    auto started = metrics::MetricsServer::Start(**server, flags.metrics);
    if (!started.ok()) {
      log::Error("metrics: " + started.status().ToString());
      return failed_start(kExitRuntime);
    }
    metrics_server = std::move(started).value();
  }
  log::Info("HTTP on " + flags.http.address + ":" + std::to_string((*http)->port()) + ", gRPC on " +
            flags.grpc.address + ":" + std::to_string((*grpc)->port()) + ", metrics " +
            (metrics_server ? "on " + flags.metrics.address + ":" +
                                  std::to_string(metrics_server->port()) + "/metrics"
                            : std::string("off")) +
            "; loading the models");
  if (Status s = (*server)->LoadStartupModels(); !s.ok()) {
    log::Error(s.ToString());
    return failed_start(kExitRuntime);
  }
  if (int code = JudgeStartup((*server)->Admission()); code != kExitOk) return failed_start(code);
  // A signal from here on drains: requests are accepted from now.
  shutdown_signals->Serving();
  (*server)->EndStartup();
  if ((*server)->IsReady()) {
    log::Info("server is READY");
  } else {
    log::Warn("server is NOT READY");
  }
  if (!flags.port_file.empty()) {
    std::string ports =
        "http=" + std::to_string((*http)->port()) + " grpc=" + std::to_string((*grpc)->port());
    if (metrics_server) ports += " metrics=" + std::to_string(metrics_server->port());
    // Whoever waits for the file would wait for ever: a failure ends the server.
    if (Status s = WriteFileAtomically(flags.port_file, ports + "\n"); !s.ok()) {
      log::Error("--port-file: " + s.message());
      return failed_start(kExitRuntime);
    }
  }

  const int signal_number = shutdown_signals->AwaitDrain();
  log::Info(std::string(signal_number == SIGTERM ? "SIGTERM" : "SIGINT") +
            ": draining (grace period " + std::to_string(flags.grace.count()) + " s)");
  const auto grace = std::chrono::duration_cast<std::chrono::milliseconds>(flags.grace);
  // Order matters. The facade drains first: during the grace period readiness is false,
  // a new request is answered UNAVAILABLE (retryable elsewhere) instead of being cut off,
  // and every request already accepted runs to its answer. The ports stay open meanwhile:
  // closing the HTTP listener at the signal reset the connections the kernel had queued,
  // and refused the clients sent here before the endpoints changed. Only then do the front
  // ends close, each with its own grace for writing the answers still on their way out.
  (*http)->BeginDrain();
  const auto started = std::chrono::steady_clock::now();
  const server::Server::DrainResult left = (*server)->Shutdown(grace);
  const auto remaining = std::max(std::chrono::milliseconds(1000),
                                  grace - std::chrono::duration_cast<std::chrono::milliseconds>(
                                              std::chrono::steady_clock::now() - started));
  // Side by side, each with the time left; one after the other when no thread can start,
  // HTTP with what gRPC left.
  std::thread grpc_stop;
  auto http_remaining = remaining;
  try {
    grpc_stop = std::thread([&] { (*grpc)->Shutdown(remaining); });
  } catch (const std::system_error&) {
    const auto before = std::chrono::steady_clock::now();
    (*grpc)->Shutdown(remaining);
    http_remaining = std::max(std::chrono::milliseconds(0),
                              remaining - std::chrono::duration_cast<std::chrono::milliseconds>(
                                              std::chrono::steady_clock::now() - before));
  }
  (*http)->Shutdown(http_remaining);
  if (grpc_stop.joinable()) grpc_stop.join();
  metrics_server.reset();  // served through the drain; closed last
  if (left.outlived > 0) {
    log::Warn(std::to_string(left.outlived) + " requests outlived the grace period; " +
              std::to_string(left.refused) +
              " queued jobs (requests, ensemble steps) had not started and were answered "
              "UNAVAILABLE, and the runs in progress ran to their answers");
  }
  shutdown_signals->Done(std::chrono::seconds(10));
  log::Info("stopped");
  return 0;
}

}  // namespace fastpath::cli
