// `fastpath serve`: the model repository on ONNX Runtime, served over HTTP and gRPC.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <charconv>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "cli.h"
#include "fastpath/gpu/node_snapshot.h"
#include "fastpath/admission/admission_report.h"
#include "fastpath/admission/version_lock.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/frontend/grpc_server.h"
#include "fastpath/frontend/http_server.h"
#include "fastpath/gpu/capability_snapshot.h"
#include "fastpath/gpu/snapshot_json.h"
#include "fastpath/metrics/metrics.h"
#include "fastpath/server/server_impl.h"

namespace fastpath::cli {
namespace {

constexpr const char* kServeUsage = R"(usage: fastpath serve --model-repository DIR [options]

  --model-repository DIR        Triton-layout model repository (required)
  --profile MODE                production | dev (default dev). production: any degradation
                                is fatal (exit 22, 23) and the CPU never runs a GPU model
  --allow-cpu-fallback          dev only: a GPU model whose GPU placement fails serves on the
                                CPU, labelled DEGRADED in the log and /v2/health/admission
  --version-lock FILE           refuse to start (exit 20) unless this node matches the lock
                                written by `fastpath doctor --lock`
  --engine-cache DIR            TensorRT engine cache root, keyed per model version (default
                                DIR/.engine-cache of the repository; see build-engines)
  --http-port N                 KServe v2 HTTP/REST port (default 8000; 0 picks a free port)
  --grpc-port N                 KServe v2 gRPC port (default 8001; 0 picks a free port)
  --allow-metrics BOOL          serve Prometheus metrics at /metrics (default true)
  --metrics-port N              Prometheus metrics port (default 8002; 0 picks a free port)
  --host ADDR                   address to bind (default 0.0.0.0)
  --model-control-mode MODE     none | explicit | poll (default none)
  --load-model NAME             explicit mode: load NAME at start (repeatable; * = all)
  --repository-poll-secs N      poll mode: seconds between rescans (default 15)
  --strict-readiness BOOL       ready only when every model is READY (default true)
  --http-threads N              threads serving HTTP connections (default 2)
  --max-request-bytes N         largest request body / message accepted (default 268435456)
  --max-queue-size N            requests queued per model version before 503 (default 1024)
  --grace-period-secs N         on SIGTERM, how long in-flight requests may take (default 30)
  --port-file FILE              write "http=N grpc=N[ metrics=N]" once listening (for tests
                                with port 0)
)";

StatusOr<int64_t> ParseInt(const std::string& flag, const std::string& text, int64_t lo,
                           int64_t hi) {
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < lo || value > hi) {
    return InvalidArgument(flag + " must be an integer in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "], not '" + text + "'");
  }
  return value;
}

StatusOr<bool> ParseBool(const std::string& flag, const std::string& text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  return InvalidArgument(flag + " must be true or false, not '" + text + "'");
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
};

StatusOr<ServeFlags> ParseServeFlags(const std::vector<std::string>& args) {
  ServeFlags flags;
  bool have_repo = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    if (flag == "--allow-cpu-fallback") {  // the one flag without a value: an explicit opt-in
      flags.server.policy.allow_cpu_fallback = true;
      continue;
    }
    if (auto eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (flag == "--help" || flag == "-h") {
      return FailedPrecondition("help");
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return InvalidArgument("flag " + flag + " needs a value");
    }
    if (flag == "--engine-cache") {
      flags.engine_cache = value;
    } else if (flag == "--profile") {
      FASTPATH_ASSIGN_OR_RETURN(flags.server.policy.profile, admission::ParseProfile(value));
    } else if (flag == "--version-lock") {
      flags.version_lock = value;
    } else if (flag == "--model-repository") {
      flags.server.repository.root = value;
      have_repo = true;
    } else if (flag == "--http-port") {
      FASTPATH_ASSIGN_OR_RETURN(flags.http.port, ParseInt(flag, value, 0, 65535));
    } else if (flag == "--grpc-port") {
      FASTPATH_ASSIGN_OR_RETURN(flags.grpc.port, ParseInt(flag, value, 0, 65535));
    } else if (flag == "--metrics-port") {
      FASTPATH_ASSIGN_OR_RETURN(flags.metrics.port, ParseInt(flag, value, 0, 65535));
    } else if (flag == "--allow-metrics") {
      FASTPATH_ASSIGN_OR_RETURN(flags.allow_metrics, ParseBool(flag, value));
    } else if (flag == "--host") {
      flags.http.address = value;
      flags.grpc.address = value;
      flags.metrics.address = value;
    } else if (flag == "--model-control-mode") {
      FASTPATH_ASSIGN_OR_RETURN(flags.server.repository.mode, repository::ParseControlMode(value));
    } else if (flag == "--load-model") {
      flags.server.startup_models.push_back(value);
    } else if (flag == "--repository-poll-secs") {
      FASTPATH_ASSIGN_OR_RETURN(int64_t secs, ParseInt(flag, value, 1, 86400));
      flags.server.repository.poll_interval = std::chrono::seconds(secs);
    } else if (flag == "--strict-readiness") {
      FASTPATH_ASSIGN_OR_RETURN(flags.server.strict_readiness, ParseBool(flag, value));
    } else if (flag == "--http-threads") {
      FASTPATH_ASSIGN_OR_RETURN(flags.http.threads, ParseInt(flag, value, 1, 256));
    } else if (flag == "--max-request-bytes") {
      FASTPATH_ASSIGN_OR_RETURN(int64_t bytes, ParseInt(flag, value, 1024, int64_t{1} << 31));
      flags.http.max_body_bytes = static_cast<size_t>(bytes);
      flags.grpc.max_message_bytes = static_cast<int>(std::min<int64_t>(bytes, INT32_MAX));
    } else if (flag == "--max-queue-size") {
      FASTPATH_ASSIGN_OR_RETURN(int64_t n, ParseInt(flag, value, 1, 1 << 24));
      flags.server.repository.max_queue_size = static_cast<size_t>(n);
    } else if (flag == "--grace-period-secs") {
      FASTPATH_ASSIGN_OR_RETURN(int64_t secs, ParseInt(flag, value, 0, 3600));
      flags.grace = std::chrono::seconds(secs);
    } else if (flag == "--port-file") {
      flags.port_file = value;
    } else {
      return InvalidArgument("unknown flag " + flag);
    }
  }
  if (!have_repo) return InvalidArgument("--model-repository is required");
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
  return flags;
}

// The node-level admission, before any model loads: the capability snapshot (kept for
// /v2/health/admission) and the version lock. Returns the exit code, kExitOk to go on.
int AdmitNode(ServeFlags* flags) {
  const gpu::CapabilitySnapshot snapshot = gpu::TakeNodeSnapshot(FASTPATH_VERSION);
  const std::vector<gpu::Finding> findings = gpu::Assess(snapshot);
  flags->server.capability_snapshot_json = gpu::SnapshotToJson(snapshot, findings);
  SetEngineCacheFromSnapshot(snapshot, flags->server.repository.root, flags->engine_cache,
                             &flags->server.repository);
  const admission::Policy& policy = flags->server.policy;
  std::cerr << "fastpath: profile " << admission::ProfileName(policy.profile)
            << (policy.profile == admission::Profile::kProduction
                    ? ": any degradation is fatal; the CPU never runs a GPU model\n"
                    : ": degraded models serve, labelled DEGRADED\n");
  if (policy.allow_cpu_fallback) {
    std::cerr
        << "fastpath: !!! --allow-cpu-fallback: GPU models may run on the CPU (10-30x slower); "
           "each one that does is labelled DEGRADED\n";
  }
  for (const gpu::Finding& f : findings) {
    std::cerr << "fastpath: GPU fast path: [" << gpu::FailureClassName(f.failure) << "] "
              << f.message << "\n";
  }
  if (flags->version_lock.empty()) return kExitOk;
  auto lock = admission::ReadLockFile(flags->version_lock);
  if (!lock.ok()) {
    std::cerr << "fastpath serve: " << lock.status().message() << "\n";
    return kExitBadLockFile;
  }
  const std::vector<admission::LockMismatch> mismatches = admission::CheckLock(*lock, snapshot);
  if (!mismatches.empty()) {
    std::cerr << "fastpath serve: this node does not match the version lock " << flags->version_lock
              << "; refusing to start:\n"
              << admission::DescribeMismatches(mismatches) << "(exit " << kExitVersionLockMismatch
              << "; see docs/runbooks/admission.md)\n";
    return kExitVersionLockMismatch;
  }
  flags->server.version_lock = flags->version_lock;
  flags->server.version_lock_pinned = admission::PinnedComponents(*lock);
  std::string pins;
  for (const std::string& p : flags->server.version_lock_pinned)
    pins += (pins.empty() ? "" : ", ") + p;
  std::cerr << "fastpath: version lock " << flags->version_lock << ": node admitted (pins "
            << (pins.empty() ? "nothing" : pins) << ")\n";
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
      for (const std::string& r : m.reasons)
        std::cerr << "fastpath: !!! " << what << " is DEGRADED: " << r << "\n";
    }
    if (m.state != admission::AdmissionState::kUnavailable ||
        (m.reasons.size() == 1 && m.reasons[0] == "unloaded")) {
      continue;
    }
    refused += "  " + what + ": " + (m.reasons.empty() ? "UNAVAILABLE" : m.reasons.front()) + "\n";
    if (m.self_test && !m.self_test->passed()) {
      missed_budget = true;
      refused += "    measured " + m.self_test->Summary() + "\n";
    }
  }
  if (report.policy.profile != admission::Profile::kProduction || refused.empty()) return kExitOk;
  const int code = missed_budget ? kExitSelfTestFailed : kExitModelNotAdmitted;
  std::cerr << "fastpath serve: production profile: "
            << (missed_budget ? "a model missed its start-up self-test budget"
                              : "a model is not READY")
            << "; refusing to serve:\n"
            << refused << "(exit " << code << "; see docs/runbooks/admission.md)\n";
  return code;
}

}  // namespace

int Serve(const std::vector<std::string>& args) {
  auto parsed = ParseServeFlags(args);
  if (!parsed.ok()) {
    if (parsed.status().message() == "help") {
      std::cout << kServeUsage;
      return 0;
    }
    std::cerr << "fastpath serve: " << parsed.status().message() << "\n\n" << kServeUsage;
    return kExitUsage;
  }
  ServeFlags flags = std::move(parsed).value();

  // Block the shutdown signals in every thread; the main thread takes them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  if (int code = AdmitNode(&flags); code != kExitOk) return code;

  auto backend = onnxruntime::CreateOrtBackend();
  if (!backend.ok()) {
    std::cerr << "fastpath serve: ONNX Runtime is unusable: " << backend.status().ToString()
              << "\n";
    return kExitRuntime;
  }
  std::cerr << "fastpath: ONNX Runtime " << onnxruntime::OrtVersion()
            << ", execution providers per model (KIND_GPU: the config's gpu_execution_accelerator "
               "list or cuda, through the plugin-EP API; placement logged per instance)\n";
  std::shared_ptr<backend::Backend> shared_backend = std::move(backend).value();
  auto server = server::Server::Create(flags.server, shared_backend);
  if (!server.ok()) {
    std::cerr << "fastpath serve: " << server.status().ToString() << "\n";
    return kExitRuntime;
  }
  if (int code = JudgeStartup((*server)->Admission()); code != kExitOk) return code;
  auto http = frontend::HttpServer::Start(**server, flags.http);
  if (!http.ok()) {
    std::cerr << "fastpath serve: HTTP front end: " << http.status().ToString() << "\n";
    return kExitRuntime;
  }
  auto grpc = frontend::GrpcServer::Start(**server, flags.grpc);
  if (!grpc.ok()) {
    std::cerr << "fastpath serve: gRPC front end: " << grpc.status().ToString() << "\n";
    return kExitRuntime;
  }
  // Declared after the facade so that it stops before the facade it reads goes away.
  std::unique_ptr<metrics::MetricsServer> metrics_server;
  if (flags.allow_metrics) {
    auto started = metrics::MetricsServer::Start(**server, flags.metrics);
    if (!started.ok()) {
      std::cerr << "fastpath serve: metrics: " << started.status().ToString() << "\n";
      return kExitRuntime;
    }
    metrics_server = std::move(started).value();
  }
  std::cerr << "fastpath: HTTP on " << flags.http.address << ":" << (*http)->port() << ", gRPC on "
            << flags.grpc.address << ":" << (*grpc)->port() << ", metrics "
            << (metrics_server ? "on " + flags.metrics.address + ":" +
                                     std::to_string(metrics_server->port()) + "/metrics"
                               : std::string("off"))
            << "\n";
  std::cerr << "fastpath: server is " << ((*server)->IsReady() ? "READY" : "NOT READY") << "\n";
  if (!flags.port_file.empty()) {
    std::string ports =
        "http=" + std::to_string((*http)->port()) + " grpc=" + std::to_string((*grpc)->port());
    if (metrics_server) ports += " metrics=" + std::to_string(metrics_server->port());
    Status s = WriteFileAtomically(flags.port_file, ports + "\n");
    if (!s.ok()) std::cerr << "fastpath: " << s.message() << "\n";
  }

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::cerr << "fastpath: " << (signal_number == SIGTERM ? "SIGTERM" : "SIGINT")
            << ": draining (grace period " << flags.grace.count() << " s)\n";
  const auto grace = std::chrono::duration_cast<std::chrono::milliseconds>(flags.grace);
  // Order matters. The facade drains first: during the grace period readiness is false,
  // a new request is answered UNAVAILABLE (retryable elsewhere) instead of being cut off,
  // and every request already accepted runs to its answer. Only then do the front ends
  // close, each with its own grace for writing the answers still on their way out.
  (*http)->StopAccepting();
  const auto started = std::chrono::steady_clock::now();
  const size_t left = (*server)->Shutdown(grace);
  const auto remaining = std::max(std::chrono::milliseconds(1000),
                                  grace - std::chrono::duration_cast<std::chrono::milliseconds>(
                                              std::chrono::steady_clock::now() - started));
  std::thread grpc_stop([&] { (*grpc)->Shutdown(remaining); });
  (*http)->Shutdown(remaining);
  grpc_stop.join();
  metrics_server.reset();  // served through the drain; closed last
  if (left > 0) {
    std::cerr << "fastpath: " << left
              << " requests outlived the grace period; answered them before exit\n";
  }
  std::cerr << "fastpath: stopped\n";
  return 0;
}

}  // namespace fastpath::cli
