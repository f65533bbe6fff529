// The process's ONNX Runtime environment and the execution-provider libraries registered
// in it. Private to the ORT backend.
//
// ORT keeps one OrtEnv per process and registers a plugin EP library in it once per
// registration name, so both live here, shared (by shared_ptr) by every backend and
// instance: the environment is released, and with it the registrations, only when the
// last of them is gone. A provider library is registered lazily, the first time an
// instance or a probe asks for it, and the outcome (devices, or the error that names
// what is missing) is kept for the life of the environment.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fastpath/backend/backend.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/common/status.h"
#include "ep_library.h"

namespace fastpath::onnxruntime {

// One device an EP library enumerated.
struct EpDeviceEntry {
  const OrtEpDevice* device = nullptr;  // owned by the environment
  EpDeviceReport report;
};

struct EpLibraryState {
  backend::ExecutionProvider provider = backend::ExecutionProvider::kCuda;
  std::filesystem::path path;
  // OK when the library registered and enumerated at least one device; otherwise what
  // went wrong (the missing file, the loader's error naming the missing dependency, or
  // "no device").
  Status status;
  // Registered with ORT (plugin EP), or accepted by a core with the provider's bridge.
  bool registered = false;
  // How the library plugs into ORT, once its file was read.
  std::optional<EpLibraryInterface> interface;
  // Devices are known only for a plugin EP; a provider-bridge EP enumerates none.
  std::vector<EpDeviceEntry> devices;
};

class OrtEnvironment {
 public:
  // The process's environment: the live one when there is one (its logging options
  // stay), otherwise a new one made from `options`.
  [[nodiscard]] static StatusOr<std::shared_ptr<OrtEnvironment>> Get(
      const OrtBackendOptions& options);

  Ort::Env& env() { return env_; }
  const Ort::Env& env() const { return env_; }

  // Registers the provider's plugin library (once) and returns what came of it. Not for
  // kCpu, which is built into ORT. Thread-safe; the result lives as long as *this.
  const EpLibraryState& Library(backend::ExecutionProvider provider);

  // Every EP device ORT knows now (the CPU provider's, and those of the libraries
  // registered so far).
  std::vector<EpDeviceReport> AllDevices();

  const std::filesystem::path& library_dir() const { return library_dir_; }

  // The threads of the process-wide intra-op pool that sessions created with
  // DisablePerSessionThreads share (OrtBackendOptions::global_intra_op_threads); 0: none.
  int global_intra_op_threads() const { return global_intra_op_threads_; }

  // Opens `model_file` (OpenSession) with a CPU memory arena of its own that never holds
  // more than `limit_bytes`, growing by what is asked (kSameAsRequested) so that the limit
  // is what tensors need rather than the next power of two. ORT's CPU provider takes no
  // per-session arena limit; an arena registered in the environment is used by the
  // sessions that ask for the environment's allocators, each taking a reference when it is
  // created. So the arena is registered for this session's creation alone and unregistered
  // after it, under a lock: every capped session has its own.
  [[nodiscard]] StatusOr<Ort::Session> OpenSessionWithCpuArena(
      const std::filesystem::path& model_file, Ort::SessionOptions* session_options,
      uint64_t limit_bytes);

 private:
  OrtEnvironment(Ort::Env env, std::filesystem::path library_dir, int global_intra_op_threads);
  EpLibraryState Register(backend::ExecutionProvider provider);

  Ort::Env env_;
  std::filesystem::path library_dir_;
  int global_intra_op_threads_ = 0;
  std::mutex mu_;
  std::mutex arena_mu_;  // one capped session at a time (OpenSessionWithCpuArena)
  std::map<backend::ExecutionProvider, std::unique_ptr<EpLibraryState>> libraries_;  // by mu_
};

// The file name of a provider's library, e.g. "libonnxruntime_providers_cuda.so".
std::string EpLibraryFileName(backend::ExecutionProvider provider);
// ORT's name for the provider, e.g. "CUDAExecutionProvider".
std::string OrtProviderName(backend::ExecutionProvider provider);
// Reads one OrtEpDevice into plain data.
EpDeviceReport DescribeEpDevice(const OrtEpDevice* device);

}  // namespace fastpath::onnxruntime
