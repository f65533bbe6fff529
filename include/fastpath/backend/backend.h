// The backend interface: what the repository and scheduler need from an
// inference runtime. The ONNX Runtime implementation lives in src/onnxruntime;
// tests use fakes. The choice of execution provider is always explicit: a backend never
// picks or falls back to a provider on its own.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fastpath/backend/placement.h"
#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"

namespace fastpath::backend {

enum class ExecutionProvider { kCpu, kCuda, kTensorRt };
// "cpu", "cuda", "tensorrt": the names config.pbtxt and the logs use.
inline const char* ExecutionProviderName(ExecutionProvider ep) {
  switch (ep) {
    case ExecutionProvider::kCpu: return "cpu";
    case ExecutionProvider::kCuda: return "cuda";
    case ExecutionProvider::kTensorRt: return "tensorrt";
  }
  return "unknown";
}

// One tensor of a model's signature, as the model file declares it. dims include the
// batch dimension if the model has one; -1 marks a dynamic dimension.
struct TensorSpec {
  std::string name;
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> dims;
  // The model's name for each dim (ONNX's dim_param, such as "batch"), "" where it gives
  // none; empty when the backend does not read them. Two dynamic dims with one name are
  // the same size in every run.
  std::vector<std::string> dim_names;
};

struct ModelSignature {
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
};

// Where an instance keeps the engines its runtime compiles ahead of serving (TensorRT's,
// keyed and checked by the ONNX Runtime backend: onnxruntime/tensorrt/engine_cache.h);
// set by the repository from the serve flags and the capability snapshot. An empty root:
// fastpath manages no engine cache.
struct EngineCacheOptions {
  std::filesystem::path root;
  std::string model_name;
  int64_t model_version = 0;
  std::string tensorrt_version;    // empty when libnvinfer was not found
  std::string compute_capability;  // of options.device_id; empty when unknown
  // Dev: engines built under another key are rebuilt (the instance is DEGRADED with the
  // reason). Production (false): they are refused.
  bool rebuild_stale = false;
};

struct InstanceOptions {
  // Ordered providers; the session uses exactly these, in this order. Never empty.
  std::vector<ExecutionProvider> providers = {ExecutionProvider::kCpu};
  int device_id = 0;         // for GPU providers
  int intra_op_threads = 1;  // explicit: 0 would let the runtime pick, which we never do
  int inter_op_threads = 1;
  // Run on the backend's process-wide intra-op pool (shared by every instance that sets
  // this) instead of pools of its own; the two counts above are then unused. The backend
  // refuses it when it was created without that pool.
  bool global_thread_pool = false;
  // Per-provider options, passed to the runtime as given (config.pbtxt's execution
  // accelerator parameters). A provider without an entry gets the runtime's defaults.
  std::map<ExecutionProvider, std::map<std::string, std::string>> provider_options;
  // Op types a GPU instance may run on the CPU without being refused
  // (parameters "fastpath.allow_cpu_ops"; see placement.h).
  std::vector<std::string> allowed_cpu_ops;
  // The dev profile's explicit opt-in: a GPU instance may list "cpu" among its providers,
  // and a placement the policy refuses serves anyway, labelled DEGRADED. False (the
  // production profile): "cpu" beside a GPU provider is refused, and so is any GPU
  // instance whose compute landed on the CPU.
  bool allow_cpu_fallback_for_gpu = false;
  // Where a "tensorrt" instance keeps its engines; an empty root leaves
  // the TensorRT EP's own cache options alone (the config cannot set them).
  EngineCacheOptions engine_cache;
  // The most the instance's memory arena may hold (parameters "fastpath.memory.limit_bytes"):
  // on a CPU instance its own CPU arena, on a CUDA instance the device arena. Beyond it a
  // run fails with ResourceExhausted ("out of memory ..."), never the process. nullopt: no
  // cap beyond the machine's.
  std::optional<uint64_t> memory_limit_bytes;
};

// What an instance's memory arena holds, read from the runtime's allocator statistics.
struct MemoryStats {
  std::string device;           // "cpu", "gpu0", ...: where the arena's memory is
  uint64_t in_use_bytes = 0;    // held by live tensors (weights included) now
  uint64_t reserved_bytes = 0;  // taken from the system by the arena (in use or not)
  uint64_t peak_bytes = 0;      // the most in use at once since the instance was created
  std::optional<uint64_t> limit_bytes;  // the cap (memory_limit_bytes); nullopt: none
  uint64_t arena_extensions = 0;        // times the arena grew
  uint64_t arena_shrinkages = 0;        // times it gave memory back
  uint64_t out_of_memory_runs = 0;      // runs that failed for lack of memory
};

inline bool IsGpuProvider(ExecutionProvider ep) { return ep != ExecutionProvider::kCpu; }

// One loaded copy of a model (one ORT session). Thread-compatible: the scheduler
// calls Run from one thread at a time (the instance's own execution thread).
class ModelInstance {
 public:
  virtual ~ModelInstance() = default;
  // Runs the model. `inputs` have been validated against the model config (names,
  // datatypes, shapes, byte sizes). Returns the outputs named in `output_names`, in
  // that order, each owning its bytes.
  virtual StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                            const std::vector<std::string>& output_names) = 0;
  // Where the instance's nodes were placed when it was created; nullptr when the backend
  // does not audit placement. Owned by the instance and unchanged for its lifetime.
  virtual const PlacementAudit* placement() const { return nullptr; }
  // Runs that went through the instance's staging memory (IO binding into the GPU
  // provider's pinned host memory), counted since it was created; nullopt for an instance
  // that does not stage (a CPU instance, a backend without binding). Safe to read from any
  // thread while Run goes on.
  virtual std::optional<uint64_t> staged_runs() const { return std::nullopt; }
  // The instance's memory arena now; nullopt when the backend cannot tell. Safe to read
  // from any thread while Run goes on (the stats thread reads it, never the request path).
  virtual std::optional<MemoryStats> memory_stats() const { return std::nullopt; }
  // Called by the scheduler, on the instance's own thread and before the instance takes
  // more work, after a run of it failed for lack of memory (ResourceExhausted). Ok: the
  // instance may serve again. An error: it is out of service, and the scheduler calls
  // again after a pause. The default trusts the instance (a backend with nothing to check).
  virtual Status RecoverFromOutOfMemory() { return Status::Ok(); }
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Short name, e.g. "onnxruntime"; matches config.pbtxt `backend`.
  virtual std::string Name() const = 0;
  // Reads the model file's inputs and outputs without running it. A corrupt or
  // unreadable file is an error that says what is wrong with it.
  virtual StatusOr<ModelSignature> Inspect(const std::filesystem::path& model_file) = 0;
  // Creates one instance. The caller owns it. A GPU instance whose placement the policy
  // refuses (placement.h) is FailedPrecondition with the reason, unless
  // options.allow_cpu_fallback_for_gpu, when it is created with placement()->degraded_reason.
  virtual StatusOr<std::unique_ptr<ModelInstance>> CreateInstance(
      const std::filesystem::path& model_file, const InstanceOptions& options) = 0;
};

}  // namespace fastpath::backend
