// The capability snapshot: what this machine offers the GPU fast path, probed without a
// link-time dependency on CUDA, NVML or any NVIDIA library. Every probe dlopens the real
// library by soname, so the binary runs on any machine and names what is missing instead
// of failing to start with a loader error.
//
// Everything here is plain data. A library that is absent, a call that fails and a symbol
// that an older library lacks are all recorded in the snapshot, never returned as errors:
// deciding what is fatal is Assess()'s job (and the caller's, through the profile).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fastpath::gpu {

// Where the probes look, and what they read. Host() is the real machine; tests point the
// candidate lists at the fake libraries the test suite builds and `root` at a temporary
// directory, so the real loading, error mapping and decoding code runs.
struct ProbeEnvironment {
  // Reads an environment variable; nullopt when unset.
  std::function<std::optional<std::string>(const std::string&)> getenv;
  // Prefix for every file the probes read: /dev, /sys/fs/cgroup, /proc, /usr/local/cuda.
  std::string root = "/";
  // dlopen candidates, tried in order: a soname (searched on the library path) or a path.
  std::vector<std::string> driver = {"libcuda.so.1"};
  std::vector<std::string> nvml = {"libnvidia-ml.so.1"};
  std::vector<std::string> cudart = {"libcudart.so.13", "libcudart.so.12"};
  std::vector<std::string> cublas = {"libcublas.so.13", "libcublas.so.12"};
  std::vector<std::string> cudnn = {"libcudnn.so.9", "libcudnn.so.8"};
  std::vector<std::string> tensorrt = {"libnvinfer.so.10"};
  std::vector<std::string> nccl = {"libnccl.so.2"};

  // The process environment, the real file system and the standard sonames.
  static ProbeEnvironment Host();
};

// A CUDA version as the driver API encodes it: 1000 * major + 10 * minor (13000 = 13.0).
struct CudaVersion {
  int major = 0;
  int minor = 0;
  static CudaVersion FromEncoded(int encoded) { return {encoded / 1000, (encoded % 1000) / 10}; }
  bool known() const { return major > 0; }
  std::string ToString() const;  // "13.0", or "unknown"
  auto operator<=>(const CudaVersion&) const = default;
};

// --- driver API (libcuda) ---
struct DriverDevice {
  int ordinal = 0;
  std::string name;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  uint64_t total_memory_bytes = 0;
  std::string error;  // a per-device query that failed, e.g. "cuDeviceGetName: CUDA_ERROR_..."
};

struct DriverInfo {
  bool library_found = false;
  std::string library_path;  // where the loaded libcuda lives (may be a cuda-compat copy)
  std::string load_error;    // dlerror() of the last candidate, when not found
  bool initialized = false;  // cuInit(0) returned CUDA_SUCCESS
  int init_result = 0;       // CUresult of cuInit, 0 when it succeeded
  std::string init_error;    // its name, e.g. "CUDA_ERROR_NO_DEVICE"
  CudaVersion cuda_version;  // the newest CUDA version this driver supports
  int device_count = 0;
  std::vector<DriverDevice> devices;
  std::string error;  // any other failed call, e.g. a missing required symbol
};

// --- NVML (libnvidia-ml) ---
// A value NVML may not support on this device or library: nullopt = not supported.
struct NvmlDevice {
  int index = 0;
  std::string name;
  std::optional<bool> mig_enabled;              // current MIG mode
  std::optional<int> mig_instances;             // MIG devices present when MIG is enabled
  std::optional<bool> ecc_enabled;              // current ECC mode
  std::optional<uint64_t> ecc_corrected_volatile;
  std::optional<uint64_t> ecc_uncorrected_volatile;
  std::optional<uint32_t> power_limit_mw;
  std::optional<uint32_t> sm_clock_mhz;
  std::optional<uint32_t> mem_clock_mhz;
  std::optional<uint64_t> clock_event_reasons;  // raw bit mask
  std::vector<std::string> clock_event_reason_names;  // decoded, e.g. "HW thermal slowdown"
  std::string error;
};

struct NvmlInfo {
  bool library_found = false;
  std::string library_path;
  std::string load_error;
  bool initialized = false;
  std::string init_error;      // e.g. "NVML_ERROR_DRIVER_NOT_LOADED"
  std::string driver_version;  // e.g. "580.65.06"
  std::vector<NvmlDevice> devices;
  std::string error;
};

// Names of the bits of nvmlDeviceGetCurrentClocksEventReasons, lowest bit first.
// Unknown bits are named "unknown (0x...)".
std::vector<std::string> DecodeClockEventReasons(uint64_t reasons);

// --- CUDA libraries found on the library path ---
struct LibraryInfo {
  std::string name;  // "cudart", "cublas", "cudnn", "tensorrt", "nccl"
  bool found = false;
  std::string soname;  // the candidate that loaded
  std::string path;
  std::string version;  // "13.0", "9.10.2", ... or empty when the library cannot say
  // The CUDA version the library needs from the driver, when it says: cudart's own
  // major.minor; the CUDA major (minor 0) of cuBLAS and of cuDNN (cudnnGetCudartVersion),
  // which rely on minor-version compatibility. Unknown for TensorRT and NCCL.
  CudaVersion requires_cuda;
  std::string error;
};

// --- container plumbing ---
struct ContainerInfo {
  std::vector<std::string> device_nodes;  // /dev/nvidia* entries, e.g. "/dev/nvidia0"
  std::optional<std::string> nvidia_visible_devices;
  std::optional<std::string> cuda_visible_devices;
  std::optional<std::string> mig_device;  // the first MIG-... UUID the environment selects
  std::string cgroup_version;             // "v2", "v1" or "" when no memory controller found
  std::optional<uint64_t> cgroup_memory_limit_bytes;  // nullopt = unlimited or unknown
  // The CPUs the process may run on (Cpus_allowed_list of /proc/self/status: the affinity
  // mask, as taskset and cpusets set it); nullopt when unknown.
  std::optional<uint32_t> allowed_cpus;
  // The cgroup's CPU quota in cores (cpu.max, or v1's cfs_quota_us / cfs_period_us);
  // nullopt = unlimited or unknown.
  std::optional<double> cgroup_cpu_quota;
};

// The cores the process can really use: the allowed CPUs, capped by the cgroup quota
// (rounded up: a quota of 1.5 cores runs 2 threads at 75%); 0 when neither is known.
uint32_t UsableCores(const ContainerInfo& container);

// --- compatibility ---
struct CompatibilityInfo {
  // cuda-compat forward-compatibility libraries present, e.g. /usr/local/cuda/compat/libcuda.so.580.65.06
  std::vector<std::string> compat_libraries;
  bool compat_driver_loaded = false;  // the libcuda in use is a cuda-compat copy
  // One line per library whose CUDA need exceeds what the driver supports.
  std::vector<std::string> problems;
};

// --- ONNX Runtime execution providers (filled in by the caller: fastpath::gpu does not
// link ORT; the cli copies onnxruntime::ProbeOrtRuntime()'s report here) ---
struct EpDeviceInfo {
  std::string ep_name;      // "CUDAExecutionProvider"
  std::string ep_vendor;    // "Microsoft"
  std::string device_type;  // "cpu", "gpu", "npu"
  std::string vendor;       // the hardware vendor
  uint32_t vendor_id = 0;   // PCI vendor id
  uint32_t device_id = 0;   // PCI device id
  std::optional<int> cuda_device_id;            // the provider's "device_id" option
  std::map<std::string, std::string> metadata;  // the hardware device's metadata
};

struct EpLibraryInfo {
  std::string provider;  // "cuda", "tensorrt"
  std::string path;
  bool registered = false;  // RegisterExecutionProviderLibrary succeeded
  std::string interface;    // how it plugs into ORT: plugin EP or provider bridge
  std::string error;        // empty when usable
  std::vector<EpDeviceInfo> devices;
};

struct OnnxRuntimeInfo {
  bool probed = false;  // false: the caller did not probe ORT
  std::string version;
  std::string ep_library_dir;
  std::vector<EpLibraryInfo> libraries;
  std::vector<EpDeviceInfo> devices;  // every EP device ORT enumerates, the CPU's included
  std::string error;
};

struct CapabilitySnapshot {
  std::string fastpath_version;  // filled in by the caller
  std::string ort_version;       // filled in by the caller (fastpath::gpu does not link ORT)
  OnnxRuntimeInfo onnxruntime;   // filled in by the caller, like ort_version
  DriverInfo driver;
  NvmlInfo nvml;
  std::vector<LibraryInfo> libraries;
  ContainerInfo container;
  CompatibilityInfo compatibility;
};

DriverInfo ProbeDriver(const ProbeEnvironment& env);
NvmlInfo ProbeNvml(const ProbeEnvironment& env);
std::vector<LibraryInfo> ProbeLibraries(const ProbeEnvironment& env);
ContainerInfo ProbeContainer(const ProbeEnvironment& env);
// Needs the driver and libraries already probed.
CompatibilityInfo CheckCompatibility(const ProbeEnvironment& env, const DriverInfo& driver,
                                     const std::vector<LibraryInfo>& libraries);

// Runs every probe. Never fails: what cannot be probed is recorded as missing.
CapabilitySnapshot TakeSnapshot(const ProbeEnvironment& env);

// What keeps the GPU fast path from working, one class per distinct remedy. The numeric
// values are `fastpath doctor`'s exit codes (src/cli/cli.h); kNone is 0.
enum class FailureClass {
  kNone = 0,
  kNoDriverLibrary = 10,    // libcuda.so.1 cannot be loaded
  kNoDevice = 11,           // the driver loads but sees no device (none mounted, or hidden)
  kDriverTooOld = 12,       // the driver supports an older CUDA than a runtime library needs
  kNvmlUnavailable = 13,    // libnvidia-ml cannot be loaded or initialized
  kDriverInitFailed = 14,   // cuInit failed for another reason (stub library, mismatch, ...)
  kNoCudaRuntime = 15,      // no libcudart on the library path
  kDeviceUnhealthy = 16,    // uncorrected ECC errors, or hardware slowdown asserted
  kNoGpuExecutionProvider = 17,  // ORT's CUDA EP library cannot be registered or sees no device
};

struct Finding {
  FailureClass failure = FailureClass::kNone;
  std::string message;  // what is wrong and what to do about it
};

// Every problem in the snapshot, most fundamental first: the first finding's class is the
// one to report when only one can be (an exit code).
std::vector<Finding> Assess(const CapabilitySnapshot& snapshot);

// "no-driver-library", ... stable names for JSON and logs.
const char* FailureClassName(FailureClass failure);

}  // namespace fastpath::gpu
