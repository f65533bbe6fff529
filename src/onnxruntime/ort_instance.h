// One model instance on ONNX Runtime: one Ort::Session and what Run needs beside it.
// Private to the ORT backend.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <filesystem>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "fastpath/backend/backend.h"
#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"

namespace fastpath::onnxruntime {

class OrtEnvironment;

// How Run hands tensors to ORT.
//   direct: the request's bytes are wrapped in place and ORT allocates the outputs in CPU
//     memory (CPU instances; a GPU instance whose EP device offers no host-accessible
//     memory).
//   staged: an Ort::IoBinding per instance; each input is copied into a per-instance
//     staging buffer of host-accessible (pinned) memory, reused across runs and grown when
//     a request is larger, and the outputs are bound to that memory, so the EP's copies to
//     and from the GPU are DMA from pinned pages rather than staged through pageable ones.
//     GPU instances: the memory is the EP device's OrtDeviceMemoryType_HOST_ACCESSIBLE, its
//     allocator the environment's shared one. BYTES inputs stay CPU values.
enum class InputStaging {
  kAuto,        // staged for a GPU instance whose EP device has host-accessible memory
  kHostMemory,  // staged through ORT's CPU allocator: the binding path without a GPU (tests)
};

class OrtModelInstance final : public backend::ModelInstance {
 public:
  // Loads `model_file` with exactly the providers and threads `options` names, audits
  // where ORT placed the nodes, and applies the placement policy (placement.h) to a GPU
  // instance: a refused placement is FailedPrecondition naming the model file, unless
  // options.allow_cpu_fallback_for_gpu, when the audit carries the reason as
  // degraded_reason. The instance shares ownership of `env`, so it may outlive the
  // backend that made it.
  [[nodiscard]] static StatusOr<std::unique_ptr<OrtModelInstance>> Create(
      std::shared_ptr<OrtEnvironment> env, const std::filesystem::path& model_file,
      const backend::InstanceOptions& options, const std::string& log_id,
      InputStaging staging = InputStaging::kAuto);
  ~OrtModelInstance() override;

  // Empty `output_names`: every output, in model order. Inputs are checked against the
  // model (names, datatypes, ranks, fixed dims, byte lengths) before ORT sees them, so a
  // request that slipped past the config check still gets a message in fastpath's words.
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                    const std::vector<std::string>& output_names) override;

  const backend::ModelSignature& signature() const { return signature_; }
  const backend::PlacementAudit* placement() const override { return &placement_; }
  bool staged() const { return staging_allocator_ != nullptr; }
  std::optional<uint64_t> staged_runs() const override {
    if (!staged()) return std::nullopt;
    return staged_runs_.load(std::memory_order_relaxed);
  }
  // The statistics of the session's arena for the instance's device (the CPU, or the GPU of
  // its first GPU provider); nullopt when ORT does not give that allocator out.
  std::optional<backend::MemoryStats> memory_stats() const override;

 private:
  OrtModelInstance(std::shared_ptr<OrtEnvironment> env, Ort::Session session,
                   backend::ModelSignature signature, backend::PlacementAudit placement,
                   std::string model_path, const OrtMemoryInfo* staging_memory,
                   OrtAllocator* staging_allocator);

  StatusOr<std::vector<Tensor>> RunUnchecked(const std::vector<Tensor>& inputs,
                                             const std::vector<std::string>& output_names);
  // Wraps or copies one request tensor into an Ort::Value. The Value may point into
  // `tensor.data`, which must outlive it.
  StatusOr<Ort::Value> MakeInputValue(const Tensor& tensor, const backend::TensorSpec& spec);
  // Copies one request tensor into input `index`'s staging buffer (growing it when too
  // small) and wraps it; BYTES go through MakeInputValue.
  StatusOr<Ort::Value> MakeStagedInputValue(const Tensor& tensor, const backend::TensorSpec& spec,
                                            size_t index);
  // The session run on the staged path: inputs and outputs bound, outputs synchronized.
  std::vector<Ort::Value> RunBound(const Ort::RunOptions& run_options,
                                   const std::vector<const char*>& input_names,
                                   std::vector<Ort::Value>& input_values,
                                   const std::vector<const char*>& output_names);
  // Copies one ORT output into an owning Tensor.
  static StatusOr<Tensor> MakeOutputTensor(const std::string& name, const Ort::Value& value);

  // Declared first so that it is destroyed last: ORT requires the environment to outlive
  // every session created in it.
  std::shared_ptr<OrtEnvironment> env_;
  Ort::Session session_;
  backend::PlacementAudit placement_;
  // Names and types cached at load time; ORT would otherwise allocate them on every call.
  backend::ModelSignature signature_;
  std::vector<const char*> all_output_names_;  // point into signature_.outputs
  std::string run_context_;  // "running model 'PATH'", for messages; built once, not per run
  Ort::MemoryInfo cpu_memory_;
  Ort::AllocatorWithDefaultOptions allocator_;  // ORT's default CPU allocator; not owned
  // The staged path (InputStaging); both null on the direct path. Neither is owned: the
  // memory info belongs to the EP device (or is cpu_memory_), the allocator to the
  // environment (or is ORT's default).
  const OrtMemoryInfo* staging_memory_ = nullptr;
  OrtAllocator* staging_allocator_ = nullptr;
  struct StagingBuffer {
    void* data = nullptr;
    size_t capacity = 0;
  };
  std::vector<StagingBuffer> staging_;  // one per model input, by signature index
  std::atomic<uint64_t> staged_runs_{0};
  Ort::IoBinding binding_{nullptr};
  // Memory: the session's arena (for its statistics; null when ORT does not give it out),
  // the cap, and the options of a run that shrinks the arena (gives back its free regions)
  // at its end: a run that ran out of memory is tried once more with them.
  Ort::Allocator arena_{nullptr};
  std::string arena_device_;  // MemoryStats::device
  std::optional<uint64_t> memory_limit_bytes_;
  Ort::RunOptions shrink_options_;
  std::atomic<uint64_t> out_of_memory_runs_{0};
};

}  // namespace fastpath::onnxruntime
