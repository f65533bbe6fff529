#include "cuda/cuda_provider.h"

#include <memory>
#include <vector>

#include "ort_types.h"

namespace fastpath::onnxruntime {

void SetCudaInstanceOptions(std::optional<uint64_t> memory_limit_bytes,
                            std::map<std::string, std::string>* options) {
  // Without a user stream the CUDA EP creates its own compute stream for each session, and
  // fastpath creates one session per instance.
  options->insert_or_assign("has_user_compute_stream", std::string("0"));
  if (memory_limit_bytes) {
    options->insert_or_assign("gpu_mem_limit", std::to_string(*memory_limit_bytes));
  }
}

Status AppendCudaBridge(const std::map<std::string, std::string>& options,
                        Ort::SessionOptions* session_options) {
  const BridgeOptionArrays arrays("cuda", options);
  return CatchOrtExceptions(arrays.context, [&] {
    const OrtApi& api = Ort::GetApi();
    OrtCUDAProviderOptionsV2* raw = nullptr;
    Ort::ThrowOnError(api.CreateCUDAProviderOptions(&raw));
    std::unique_ptr<OrtCUDAProviderOptionsV2, decltype(api.ReleaseCUDAProviderOptions)> cuda(
        raw, api.ReleaseCUDAProviderOptions);
    Ort::ThrowOnError(api.UpdateCUDAProviderOptions(cuda.get(), arrays.keys.data(),
                                                    arrays.values.data(), arrays.keys.size()));
    session_options->AppendExecutionProvider_CUDA_V2(*cuda);
    return Status::Ok();
  });
}

}  // namespace fastpath::onnxruntime
