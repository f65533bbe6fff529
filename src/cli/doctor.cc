// `fastpath doctor`: the capability snapshot of this machine, for people (a table) or for
// machines (--json), with one exit code per class of failure (cli.h).
#include <cstdio>
#include <fstream>
#include <iostream>
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
   2  bad command line                   21  --diff: a snapshot is unreadable or not JSON)";

struct DoctorFlags {
  bool json = false;
  bool require_gpu = false;
  std::string lock_file;                // --lock FILE
  std::vector<std::string> diff_files;  // --diff A B
  log::Options logging;
};

void DefineDoctorOptions(CLI::App& app, DoctorFlags& flags) {
  AddSwitch(app, "--json", &flags.json, "print the snapshot as JSON instead of a table");
  AddSwitch(app, "--require-gpu", &flags.require_gpu,
            "exit non-zero when the GPU fast path is unusable (default: report only)");
  AddText(app, "--lock", "FILE", &flags.lock_file,
          "write the version lock of this machine (driver branch, CUDA, cuDNN, TensorRT, ONNX "
          "Runtime, GPU) to FILE, for `fastpath serve --version-lock`");
  app.add_option("--diff", flags.diff_files,
                 "compare two snapshots (`doctor --json` outputs) and list what changed; exit 0 "
                 "when they agree, 1 when they differ, 21 when one is unreadable")
      ->type_name("A B")
      ->expected(2);
  AddLogOptions(app, &flags.logging);
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
  Row(out, "driver vs libraries", s.compatibility.problems.empty() ? "ok" : "MISMATCH (see below)");

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

StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// `doctor --diff A B`: 0 same, 1 different, 21 unreadable.
int Diff(const std::string& a, const std::string& b) {
  auto text_a = ReadText(a);
  auto text_b = ReadText(b);
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

}  // namespace

int Doctor(const std::vector<std::string>& args) {
  DoctorFlags flags;
  CLI::App app{
      "Probes the NVIDIA driver, NVML, the CUDA libraries on the library path and the "
      "container plumbing, and prints what the GPU fast path has and what it lacks.",
      "fastpath doctor"};
  UseHelpLayout(app, "usage: fastpath doctor [options]");
  app.footer(kDoctorExitCodes);
  DefineDoctorOptions(app, flags);
  if (auto exit_code = ParseCommandLine(app, args)) return *exit_code;
  flags.logging.name = "fastpath doctor";
  log::Configure(flags.logging);
  if (!flags.diff_files.empty()) return Diff(flags.diff_files[0], flags.diff_files[1]);
  const gpu::CapabilitySnapshot snapshot = gpu::TakeNodeSnapshot(FASTPATH_VERSION);
  const std::vector<gpu::Finding> findings = gpu::Assess(snapshot);
  if (!flags.lock_file.empty()) return WriteLock(flags.lock_file, snapshot);
  if (flags.json) {
    std::cout << gpu::SnapshotToJson(snapshot, findings);
  } else {
    std::cout << RenderTable(snapshot, findings);
  }
  if (flags.require_gpu && !findings.empty()) return static_cast<int>(findings.front().failure);
  return kExitOk;
}

}  // namespace fastpath::cli
