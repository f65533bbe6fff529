// `fastpath doctor`: the capability snapshot of this machine, for people (a table) or for
// machines (--json), with one exit code per class of failure (cli.h); and
// `--record-gpu-trace`, which samples the GPUs through NVML into a trace for
// `fastpath serve --gpu-trace`.
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "command_line.h"
#include "fastpath/admission/snapshot_diff.h"
#include "fastpath/admission/version_lock.h"
#include "fastpath/common/log.h"
#include "fastpath/gpu/capability_snapshot.h"
#include "fastpath/gpu/node_snapshot.h"
#include "fastpath/gpu/snapshot_json.h"
#include "fastpath/gpu/telemetry.h"

namespace fastpath::cli {
namespace {

// cli.h's exit codes are gpu::FailureClass's values; keep them one table.
static_assert(kExitNoDriverLibrary == static_cast<int>(gpu::FailureClass::kNoDriverLibrary));
static_assert(kExitNoDevice == static_cast<int>(gpu::FailureClass::kNoDevice));
static_assert(kExitDriverTooOld == static_cast<int>(gpu::FailureClass::kDriverTooOld));
static_assert(kExitNvmlUnavailable == static_cast<int>(gpu::FailureClass::kNvmlUnavailable));
static_assert(kExitDriverInitFailed == static_cast<int>(gpu::FailureClass::kDriverInitFailed));
static_assert(kExitNoCudaRuntime == static_cast<int>(gpu::FailureClass::kNoCudaRuntime));
static_assert(kExitDeviceUnhealthy == static_cast<int>(gpu::FailureClass::kDeviceUnhealthy));
static_assert(kExitNoGpuExecutionProvider ==
              static_cast<int>(gpu::FailureClass::kNoGpuExecutionProvider));

constexpr const char* kDoctorExitCodes =
    R"(exit codes (with --require-gpu; without it, 0 whenever the probes ran):
   0  the GPU fast path is usable        13  NVML unavailable
  10  no driver library (libcuda.so.1)   14  the driver failed to initialize
  11  the driver sees no device          15  no CUDA runtime (libcudart)
  12  driver too old for a library       16  device unhealthy (ECC, HW slowdown)
                                         17  ORT's CUDA execution provider unusable
   2  bad command line                   21  --diff: a snapshot is unreadable or not JSON
--record-gpu-trace: 0 written (also when a SIGINT or SIGTERM ended it early), 1 the file
  cannot be written, 2 bad command line, 13 no NVML (not loadable, not initializing, no GPU))";

constexpr const char* kDoctorUsage = R"(usage: fastpath doctor [options]
       fastpath doctor --record-gpu-trace FILE --seconds N [--interval-ms M])";

constexpr int64_t kMaxRecordSeconds = 86400;

struct DoctorFlags {
  bool json = false;
  bool require_gpu = false;
  std::string lock_file;                 // --lock FILE
  std::vector<std::string> diff_files;   // --diff A B
  std::string trace_file;                // --record-gpu-trace FILE
  std::optional<int64_t> trace_seconds;  // --seconds N
  int64_t trace_interval_ms = 1000;      // --interval-ms M
  log::Options logging;
};

// What Doctor() checks after parsing, beyond CLI11's needs and excludes: a recording
// without --seconds.
struct DoctorOptions {
  CLI::Option* record = nullptr;
  CLI::Option* seconds = nullptr;
  CLI::Option* lock = nullptr;
};

DoctorOptions DefineDoctorOptions(CLI::App& app, DoctorFlags& flags) {
  CLI::Option* json =
      AddSwitch(app, "--json", &flags.json, "print the snapshot as JSON instead of a table");
  CLI::Option* require_gpu =
      AddSwitch(app, "--require-gpu", &flags.require_gpu,
                "exit non-zero when the GPU fast path is unusable (default: report only)");
  CLI::Option* lock =
      AddText(app, "--lock", "FILE", &flags.lock_file,
              "write the version lock of this machine (driver branch, CUDA, cuDNN, TensorRT, ONNX "
              "Runtime, GPU) to FILE, for `fastpath serve --version-lock`");
  CLI::Option* diff =
      app.add_option("--diff", flags.diff_files,
                     "compare two snapshots (`doctor --json` outputs) and list what changed; exit "
                     "0 when they agree, 1 when they differ, 21 when one is unreadable")
          ->type_name("A B")
          ->expected(2);
  DoctorOptions o;
  o.record = AddText(
      app, "--record-gpu-trace", "FILE", &flags.trace_file,
      "sample every GPU through NVML for --seconds and write the samples to FILE as a GPU trace "
      "(JSON lines) for `fastpath serve --gpu-trace FILE`; written as FILE.tmp, one flushed "
      "write per pass, and renamed to FILE at the end or at the first SIGINT/SIGTERM");
  o.seconds =
      AddValue(app, "--seconds", "N",
               "the recording's length in seconds, 1 to 86400; --record-gpu-trace requires it", "",
               [&flags](const std::string& value) -> Status {
                 FASTPATH_ASSIGN_OR_RETURN(flags.trace_seconds,
                                           ParseInt("--seconds", value, 1, kMaxRecordSeconds));
                 return Status::Ok();
               });
  CLI::Option* interval =
      AddInt(app, "--interval-ms", "M", &flags.trace_interval_ms, 10, 3600 * 1000,
             "how often --record-gpu-trace samples, in milliseconds");
  o.seconds->needs(o.record);
  interval->needs(o.record);
  o.lock = lock;
  // A recording is its own mode: it takes no snapshot, so there is nothing to print as
  // JSON, lock, diff or judge.
  o.record->excludes(json)->excludes(require_gpu)->excludes(lock)->excludes(diff);
  // A diff reads two files: it takes no snapshot either. A lock is written instead of the
  // snapshot's print; --require-gpu then keeps a lock from a node without its fast path.
  diff->excludes(json)->excludes(require_gpu)->excludes(lock);
  lock->excludes(json);
  AddLogOptions(app, &flags.logging);
  return o;
}

std::string Gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

template <typename T>
std::string Or(const std::optional<T>& value, const std::string& unit) {
  return value ? std::to_string(*value) + unit : "not supported";
}

std::string OnOff(const std::optional<bool>& value) {
  return value ? (*value ? "on" : "off") : "not supported";
}

std::string EnvValue(const std::optional<std::string>& value) {
  return value ? "'" + *value + "'" : "(unset)";
}

void Row(std::ostream& out, const std::string& label, const std::string& value) {
  std::string padded = "  " + label;
  if (padded.size() < 26) padded.resize(26, ' ');
  out << padded << " " << value << "\n";
}

std::string RenderTable(const gpu::CapabilitySnapshot& s,
                        const std::vector<gpu::Finding>& findings) {
  std::ostringstream out;
  out << "fastpath " << s.fastpath_version << " doctor, ONNX Runtime " << s.ort_version << "\n\n";

  out << "CUDA driver (libcuda.so.1)\n";
  const gpu::DriverInfo& d = s.driver;
  if (!d.library_found) {
    Row(out, "library", "NOT FOUND: " + d.load_error);
  } else {
    Row(out, "library", d.library_path);
    Row(out, "supports CUDA", d.cuda_version.ToString());
    Row(out, "cuInit", d.initialized ? "ok" : "FAILED: " + d.init_error);
    if (d.initialized) Row(out, "devices", std::to_string(d.device_count));
    for (const gpu::DriverDevice& dev : d.devices) {
      Row(out, "GPU " + std::to_string(dev.ordinal),
          dev.name + ", compute capability " + std::to_string(dev.compute_capability_major) + "." +
              std::to_string(dev.compute_capability_minor) + ", " + Gib(dev.total_memory_bytes) +
              (dev.error.empty() ? "" : " (" + dev.error + ")"));
    }
    if (!d.error.empty()) Row(out, "error", d.error);
  }

  out << "\nNVML (libnvidia-ml.so.1)\n";
  const gpu::NvmlInfo& n = s.nvml;
  if (!n.library_found) {
    Row(out, "library", "NOT FOUND: " + n.load_error);
  } else {
    Row(out, "library", n.library_path);
    Row(out, "nvmlInit", n.initialized ? "ok" : "FAILED: " + n.init_error);
    if (!n.driver_version.empty()) Row(out, "driver version", n.driver_version);
    for (const gpu::NvmlDevice& dev : n.devices) {
      const std::string gpu = "GPU " + std::to_string(dev.index);
      Row(out, gpu, dev.name);
      Row(out, "  MIG",
          OnOff(dev.mig_enabled) +
              (dev.mig_instances ? ", " + std::to_string(*dev.mig_instances) + " instances" : ""));
      Row(out, "  ECC",
          OnOff(dev.ecc_enabled) +
              (dev.ecc_enabled.value_or(false)
                   ? ", volatile errors: " + Or(dev.ecc_corrected_volatile, "") + " corrected, " +
                         Or(dev.ecc_uncorrected_volatile, "") + " uncorrected"
                   : ""));
      Row(out, "  power limit",
          dev.power_limit_mw ? std::to_string(*dev.power_limit_mw / 1000) + " W" : "not supported");
      Row(out, "  clocks",
          "SM " + Or(dev.sm_clock_mhz, " MHz") + ", memory " + Or(dev.mem_clock_mhz, " MHz"));
      std::string reasons;
      for (const std::string& r : dev.clock_event_reason_names)
        reasons += (reasons.empty() ? "" : ", ") + r;
      Row(out, "  clock event reasons",
          !dev.clock_event_reasons ? "not supported"
          : reasons.empty()        ? "none"
                                   : reasons);
      if (!dev.error.empty()) Row(out, "  error", dev.error);
    }
    if (!n.error.empty()) Row(out, "error", n.error);
  }

  out << "\nCUDA libraries on the library path\n";
  for (const gpu::LibraryInfo& lib : s.libraries) {
    if (!lib.found) {
      Row(out, lib.name, "not found");
      continue;
    }
    std::string value = (lib.version.empty() ? "version unknown" : lib.version) + "  " + lib.path;
    if (lib.requires_cuda.known()) value += "  (needs CUDA " + lib.requires_cuda.ToString() + ")";
    if (!lib.error.empty()) value += "  (" + lib.error + ")";
    Row(out, lib.name, value);
  }

  out << "\nONNX Runtime execution providers\n";
  const gpu::OnnxRuntimeInfo& o = s.onnxruntime;
  if (!o.probed) {
    Row(out, "status", "not probed");
  } else if (!o.error.empty()) {
    Row(out, "status", "FAILED: " + o.error);
  } else {
    Row(out, "EP library folder", o.ep_library_dir);
    for (const gpu::EpLibraryInfo& library : o.libraries) {
      std::string value;
      if (!library.error.empty()) {
        value =
            std::string(library.registered ? "registered, " : "") + "NOT USABLE: " + library.error;
      } else {
        value = "registered, " + std::to_string(library.devices.size()) + " device" +
                (library.devices.size() == 1 ? "" : "s");
      }
      if (!library.interface.empty()) value += " [" + library.interface + "]";
      Row(out, library.provider, value);
    }
    for (const gpu::EpDeviceInfo& device : o.devices) {
      char ids[32];
      std::snprintf(ids, sizeof(ids), "%04x:%04x", device.vendor_id, device.device_id);
      Row(out, device.ep_name,
          device.device_type + ", " + (device.vendor.empty() ? "vendor unknown" : device.vendor) +
              " (PCI " + ids + ")" +
              (device.cuda_device_id ? ", CUDA device " + std::to_string(*device.cuda_device_id)
                                     : ""));
    }
  }

  out << "\nContainer\n";
  std::string nodes;
  for (const std::string& node : s.container.device_nodes)
    nodes += (nodes.empty() ? "" : " ") + node;
  Row(out, "/dev/nvidia*", nodes.empty() ? "none" : nodes);
  Row(out, "NVIDIA_VISIBLE_DEVICES", EnvValue(s.container.nvidia_visible_devices));
  Row(out, "CUDA_VISIBLE_DEVICES", EnvValue(s.container.cuda_visible_devices));
  Row(out, "MIG slice", s.container.mig_device.value_or("none selected"));
  Row(out, "cgroup memory limit",
      s.container.cgroup_version.empty()
          ? "no memory cgroup found"
          : s.container.cgroup_version + ", " +
                (s.container.cgroup_memory_limit_bytes ? Gib(*s.container.cgroup_memory_limit_bytes)
                                                       : "unlimited"));

  out << "\nCompatibility\n";
  std::string compat;
  for (const std::string& lib : s.compatibility.compat_libraries)
    compat += (compat.empty() ? "" : " ") + lib;
  Row(out, "cuda-compat",
      compat.empty()
          ? "not installed"
          : compat + (s.compatibility.compat_driver_loaded ? " (in use)" : " (not in use)"));
  // Without a driver (or its CUDA version) nothing was compared: "ok" would claim a check.
  Row(out, "driver vs libraries",
      !s.compatibility.problems.empty() ? "MISMATCH (see below)"
      : !s.driver.library_found         ? "not checked (no driver)"
      : !s.driver.cuda_version.known()  ? "not checked (the driver's CUDA version is unknown)"
                                        : "ok");

  out << "\n";
  if (findings.empty()) {
    out << "GPU fast path: usable.\n";
  } else {
    out << "GPU fast path: NOT usable. Missing or wrong:\n";
    for (const gpu::Finding& f : findings) {
      out << "  [" << static_cast<int>(f.failure) << " " << gpu::FailureClassName(f.failure) << "] "
          << f.message << "\n";
    }
    out << "With --require-gpu, doctor exits " << static_cast<int>(findings.front().failure)
        << ".\n";
  }
  return out.str();
}

// `doctor --diff A B`: 0 same, 1 different, 21 unreadable.
int Diff(const std::string& a, const std::string& b) {
  auto text_a = ReadTextFile(a);
  auto text_b = ReadTextFile(b);
  for (const auto* text : {&text_a, &text_b}) {
    if (!text->ok()) {
      std::cerr << "fastpath doctor --diff: " << text->status().message() << "\n";
      return kExitBadLockFile;
    }
  }
  auto changes = admission::DiffSnapshots(*text_a, a, *text_b, b);
  if (!changes.ok()) {
    std::cerr << "fastpath doctor --diff: " << changes.status().message() << "\n";
    return kExitBadLockFile;
  }
  std::cout << admission::RenderChanges(*changes, a, b);
  return changes->empty() ? kExitOk : kExitSnapshotsDiffer;
}

// `doctor --lock FILE`: pins what this machine has; says what it could not pin.
int WriteLock(const std::string& path, const gpu::CapabilitySnapshot& snapshot) {
  const admission::VersionLock lock = admission::LockFromSnapshot(snapshot);
  if (Status s = WriteFileAtomically(path, admission::LockToJson(lock)); !s.ok()) {
    std::cerr << "fastpath doctor --lock: " << s.message() << "\n";
    return kExitRuntime;
  }
  const std::vector<std::string> pinned = admission::PinnedComponents(lock);
  std::string pins;
  for (const std::string& p : pinned) pins += (pins.empty() ? "" : ", ") + p;
  std::cout << "fastpath doctor: wrote version lock " << path << " pinning "
            << (pins.empty() ? "nothing" : pins) << "\n";
  if (pinned.size() < 8) {
    std::cout << "  the components this machine lacks are null (not pinned); "
                 "write the lock on a node of the pool it is meant for\n";
  }
  return kExitOk;
}

// --- `doctor --record-gpu-trace FILE --seconds N` ---

// Set by the first SIGINT or SIGTERM during a recording, which then ends with what it has
// (renamed into place, summarized, exit 0); a second one kills (SA_RESETHAND), so a
// recording stuck in an NVML call can still be stopped.
std::atomic<bool> recording_stopped{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void OnRecordingStop(int) { recording_stopped.store(true); }

// Installs OnRecordingStop for SIGINT and SIGTERM while it lives.
class StopSignals {
 public:
  StopSignals() {
    struct sigaction action = {};
    action.sa_handler = OnRecordingStop;
    action.sa_flags = SA_RESETHAND;  // no SA_RESTART: the sleep returns EINTR
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous_int_);
    sigaction(SIGTERM, &action, &previous_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &previous_int_, nullptr);
    sigaction(SIGTERM, &previous_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction previous_int_ = {};
  struct sigaction previous_term_ = {};
};

using RecordClock = std::chrono::steady_clock;  // CLOCK_MONOTONIC, as clock_nanosleep below

// Sleeps until `deadline` or a stop signal, whichever comes first. std::this_thread's
// sleeps restart after EINTR, so a Ctrl-C would wait out the interval; clock_nanosleep
// returns. A signal between the caller's check and the call is noticed one interval late.
void SleepUntil(RecordClock::time_point deadline) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch());
  timespec at{};
  at.tv_sec = static_cast<time_t>(ns.count() / 1'000'000'000);
  at.tv_nsec = static_cast<long>(ns.count() % 1'000'000'000);
  while (!recording_stopped.load() &&
         clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr) == EINTR) {
  }
}

// What the recording saw, for its summary line.
struct RecordingSummary {
  int64_t passes = 0;
  size_t lines = 0;
  std::set<int> gpus;
  std::map<uint64_t, std::map<int, int>> xids;  // XID -> GPU -> events
  uint64_t reasons = 0;                         // every clock-event reason bit seen active
  std::chrono::milliseconds last_t{0};

  void Add(const std::vector<gpu::GpuSample>& samples, std::chrono::milliseconds t) {
    ++passes;
    last_t = t;
    for (const gpu::GpuSample& s : samples) {
      gpus.insert(s.gpu);
      for (uint64_t xid : s.xids) ++xids[xid][s.gpu];
      reasons |= s.clocks_event_reasons.value_or(0);
    }
  }

  std::string Render(const std::string& path, const std::string& source, bool interrupted) const {
    std::string xid_text;
    for (const auto& [xid, on] : xids) {
      std::string where;
      for (const auto& [gpu, count] : on) {
        where += (where.empty() ? "" : ", ") + std::string("GPU ") + std::to_string(gpu) +
                 (count > 1 ? " x" + std::to_string(count) : "");
      }
      xid_text += (xid_text.empty() ? "" : "; ") + std::to_string(xid) + " (" + where + ")";
    }
    std::string reason_text;
    for (const std::string& r : gpu::DecodeClockEventReasons(reasons))
      reason_text += (reason_text.empty() ? "" : ", ") + r;
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%.1f", last_t.count() / 1000.0);
    return "fastpath doctor: wrote GPU trace " + path + ": " + std::to_string(passes) + " sample" +
           (passes == 1 ? "" : "s") + " of " + std::to_string(gpus.size()) + " GPU" +
           (gpus.size() == 1 ? "" : "s") + " over " + seconds + " s (" + std::to_string(lines) +
           " lines, from " + source + (interrupted ? ", ended early by a signal" : "") +
           "); XIDs: " + (xid_text.empty() ? "none" : xid_text) +
           "; clock-event reasons: " + (reason_text.empty() ? "none" : reason_text) + "\n";
  }
};

// One pass's lines with one write(2), unbuffered: a recording killed between passes leaves
// whole lines only. A short write (a full disk) goes on from where it stopped.
Status WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;  // a stop signal: finish the pass first
    if (n < 0) return Internal(std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Samples at 0, M, 2M, ... up to N seconds inclusive (a pass that overruns the next tick
// skips it rather than bunching up), each pass's lines in one write into FILE.tmp; at the end, or
// at the first SIGINT/SIGTERM, FILE.tmp becomes FILE. A recording killed outright leaves FILE.tmp,
// whose complete lines replay as they are.
int RecordGpuTrace(const DoctorFlags& flags) {
  const std::string what = "fastpath doctor --record-gpu-trace";
  auto source = gpu::OpenNvmlSource(gpu::ProbeEnvironment::Host());
  if (!source.ok()) {
    std::cerr << what << ": no GPU to record: " << source.status().message()
              << " (a GPU trace is recorded from NVML, libnvidia-ml.so.1, on the GPU's node)\n";
    return kExitNvmlUnavailable;
  }
  const std::string& path = flags.trace_file;
  const std::string tmp = path + ".tmp";
  const int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    std::cerr << what << ": cannot write " << tmp << ": " << std::strerror(errno) << "\n";
    return kExitRuntime;
  }
  std::cerr << what << ": recording " << (*source)->Describe() << " every "
            << flags.trace_interval_ms << " ms for " << *flags.trace_seconds << " s into " << path
            << " (Ctrl-C ends it early and keeps what it has)\n";

  const std::chrono::milliseconds interval(flags.trace_interval_ms);
  const std::chrono::milliseconds duration = std::chrono::seconds(*flags.trace_seconds);
  RecordingSummary summary;
  recording_stopped.store(false);
  std::string write_error;
  {
    const StopSignals stop_signals;
    const RecordClock::time_point start = RecordClock::now();
    for (std::chrono::milliseconds next{0}; next <= duration;) {
      SleepUntil(start + next);
      if (recording_stopped.load()) break;
      const auto t =
          std::chrono::duration_cast<std::chrono::milliseconds>(RecordClock::now() - start);
      const std::vector<gpu::GpuSample> samples = (*source)->Sample(t);
      std::string text;
      for (const gpu::GpuSample& sample : samples) {
        const std::string lines = gpu::SampleToTraceLines(sample, t);
        text += lines + "\n";
        summary.lines += 1 + static_cast<size_t>(std::count(lines.begin(), lines.end(), '\n'));
      }
      summary.Add(samples, t);
      if (Status s = WriteAll(out, text); !s.ok()) {
        write_error = s.message();
        break;
      }
      next += interval;
      if (next <= t) next = (t / interval + 1) * interval;
    }
  }
  // fsync before the rename, so that FILE never names an empty file after a crash.
  if (write_error.empty() && ::fsync(out) != 0) write_error = std::strerror(errno);
  if (::close(out) != 0 && write_error.empty()) write_error = std::strerror(errno);
  if (!write_error.empty()) {
    std::cerr << what << ": cannot write " << tmp << ": " << write_error << " (after "
              << summary.passes << " samples; the complete lines in it replay)\n";
    return kExitRuntime;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::cerr << what << ": cannot rename " << tmp << " to " << path << ": " << std::strerror(errno)
              << "\n";
    return kExitRuntime;
  }
  std::cout << summary.Render(path, (*source)->Describe(), recording_stopped.load());
  return kExitOk;
}

}  // namespace

int Doctor(const std::vector<std::string>& args) {
  DoctorFlags flags;
  CLI::App app{
      "Probes the NVIDIA driver, NVML, the CUDA libraries on the library path and the "
      "container plumbing, and prints what the GPU fast path has and what it lacks.",
      "fastpath doctor"};
  UseHelpLayout(app, kDoctorUsage);
  app.footer(kDoctorExitCodes);
  const DoctorOptions options = DefineDoctorOptions(app, flags);
  if (auto exit_code = ParseCommandLine(app, args)) return *exit_code;
  if (*options.record && !flags.trace_seconds) {
    return UsageError(app, "--record-gpu-trace needs --seconds N (1 to 86400)");
  }
  flags.logging.name = "fastpath doctor";
  log::Configure(flags.logging);
  if (*options.record) return RecordGpuTrace(flags);
  if (!flags.diff_files.empty()) return Diff(flags.diff_files[0], flags.diff_files[1]);
  const gpu::CapabilitySnapshot snapshot = gpu::TakeNodeSnapshot(FASTPATH_VERSION);
  const std::vector<gpu::Finding> findings = gpu::Assess(snapshot);
  if (!flags.lock_file.empty()) {
    if (flags.require_gpu && !findings.empty()) {
      std::cerr << RenderTable(snapshot, findings);
      log::Error("no version lock written: the GPU fast path is unusable on this node");
      return static_cast<int>(findings.front().failure);
    }
    return WriteLock(flags.lock_file, snapshot);
  }
  if (flags.json) {
    std::cout << gpu::SnapshotToJson(snapshot, findings);
  } else {
    std::cout << RenderTable(snapshot, findings);
  }
  if (flags.require_gpu && !findings.empty()) return static_cast<int>(findings.front().failure);
  return kExitOk;
}

}  // namespace fastpath::cli
