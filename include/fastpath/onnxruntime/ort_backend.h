// The ONNX Runtime backend: backend::Backend over ORT's C++ API, one Ort::Session per
// model instance. This header deliberately includes no ORT header, so that only this
// module compiles against ORT and a mismatched runtime is caught in one place.
//
// Execution providers are explicit (see backend.h): an instance runs on exactly the
// providers its InstanceOptions name, and a provider that cannot be used is an error,
// never a silent fall back to the CPU.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fastpath/backend/backend.h"
#include "fastpath/common/status.h"

namespace fastpath::onnxruntime {

// Severity below which ORT's own log lines are dropped; mirrors OrtLoggingLevel.
enum class OrtLogSeverity { kVerbose, kInfo, kWarning, kError, kFatal };

struct OrtBackendOptions {
  // Tag on ORT's log lines (the Ort::Env's log id).
  std::string log_id = "fastpath";
  // Warning by default: ORT logs node placement and fallback decisions as warnings, and
  // a silent fallback is exactly what fastpath must never hide.
  OrtLogSeverity log_severity = OrtLogSeverity::kWarning;
  // Where the CUDA and TensorRT execution-provider libraries
  // (libonnxruntime_providers_cuda.so, libonnxruntime_providers_tensorrt.so) are. Empty:
  // $FASTPATH_ORT_EP_LIBRARY_DIR when set, otherwise the folder libonnxruntime was loaded
  // from (where the GPU package puts them).
  std::filesystem::path ep_library_dir;
  // The process-wide intra-op pool's threads (ORT's global thread pools, serve's
  // --ort-thread-pool global), shared by the instances whose
  // InstanceOptions::global_thread_pool is set; 0: no such pool, every session has its own.
  int global_intra_op_threads = 0;
};

// The environment variable that overrides where the EP libraries are looked for.
inline constexpr const char* kEpLibraryDirEnv = "FASTPATH_ORT_EP_LIBRARY_DIR";

// One OrtEpDevice: an execution provider paired with a hardware device.
struct EpDeviceReport {
  std::string ep_name;      // "CUDAExecutionProvider"
  std::string ep_vendor;    // "Microsoft"
  std::string device_type;  // "cpu", "gpu", "npu"
  std::string vendor;       // the hardware vendor, e.g. "NVIDIA"
  uint32_t vendor_id = 0;   // PCI vendor id (0x10de for NVIDIA)
  uint32_t device_id = 0;   // PCI device id (identifies the model, not the ordinal)
  // The CUDA ordinal the provider will use (its "device_id" option), when it says.
  std::optional<int> cuda_device_id;
  std::map<std::string, std::string> metadata;  // the hardware device's metadata
  std::map<std::string, std::string> ep_metadata;
};

// One plugin EP library: whether it registered, and what it enumerated.
struct EpLibraryReport {
  std::string provider;  // "cuda", "tensorrt"
  std::string path;
  bool registered = false;
  // "plugin EP (CreateEpFactories)", "provider bridge (GetProvider)", ...; empty when the
  // file was not read (missing).
  std::string interface;
  std::string error;  // empty when usable
  std::vector<EpDeviceReport> devices;
};

// The ONNX Runtime half of `fastpath doctor`: the version, each GPU EP library's
// registration, and every EP device ORT enumerates.
struct OrtRuntimeReport {
  std::string version;
  std::string ep_library_dir;
  std::vector<EpLibraryReport> libraries;
  std::vector<EpDeviceReport> devices;  // all of them, the CPU provider's included
  std::string error;                    // the environment itself could not be created
};

// Registers the CUDA and TensorRT EP libraries (as CreateInstance would) and reports the
// outcome. Never fails: what cannot be done is recorded in the report.
OrtRuntimeReport ProbeOrtRuntime(const OrtBackendOptions& options = {});

// Creates the backend and its Ort::Env. The backend owns the Env; every instance it
// creates keeps the Env alive through a shared reference, so instances may outlive the
// backend object. ORT keeps one environment per process underneath: a second backend
// shares it, and the first backend's logging options, EP library folder and process-wide
// pool win (asking for a different ep_library_dir or global_intra_op_threads while the
// first lives is FailedPrecondition).
//
// Fails with FailedPrecondition when the loaded libonnxruntime is older than the headers
// fastpath was built with, and with Internal when ORT cannot create its environment.
[[nodiscard]] StatusOr<std::unique_ptr<backend::Backend>> CreateOrtBackend(
    const OrtBackendOptions& options = {});

// The version of the ONNX Runtime library loaded at run time, e.g. "1.29.0".
std::string OrtVersion();

}  // namespace fastpath::onnxruntime
