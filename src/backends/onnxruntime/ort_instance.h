// One model instance on ONNX Runtime: one Ort::Session and what Run needs beside it.
// Private to the ORT backend.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "fastpath/backend/backend.h"
#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"

namespace fastpath::backends::onnxruntime {

class OrtEnvironment;

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
      const backend::InstanceOptions& options, const std::string& log_id);

  // Empty `output_names`: every output, in model order. Inputs are checked against the
  // model (names, datatypes, ranks, fixed dims, byte lengths) before ORT sees them, so a
  // request that slipped past the config check still gets a message in fastpath's words.
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                    const std::vector<std::string>& output_names) override;

  const backend::ModelSignature& signature() const { return signature_; }
  const backend::PlacementAudit* placement() const override { return &placement_; }

 private:
  OrtModelInstance(std::shared_ptr<OrtEnvironment> env, Ort::Session session,
                   backend::ModelSignature signature, backend::PlacementAudit placement,
                   std::string model_path);

  StatusOr<std::vector<Tensor>> RunUnchecked(const std::vector<Tensor>& inputs,
                                             const std::vector<std::string>& output_names);
  // Wraps or copies one request tensor into an Ort::Value. The Value may point into
  // `tensor.data`, which must outlive it.
  StatusOr<Ort::Value> MakeInputValue(const Tensor& tensor, const backend::TensorSpec& spec);
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
  std::string model_path_;                     // for messages
  Ort::MemoryInfo cpu_memory_;
  Ort::AllocatorWithDefaultOptions allocator_;  // ORT's default CPU allocator; not owned
};

}  // namespace fastpath::backends::onnxruntime
