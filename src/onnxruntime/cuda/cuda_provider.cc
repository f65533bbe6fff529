#include "cuda/cuda_provider.h"

#include <memory>
#include <vector>

#include "ort_types.h"

namespace fastpath::onnxruntime {

void SetCudaInstanceOptions(std::map<std::string, std::string>* options) {
  // Without a user stream the CUDA EP creates its own compute stream for each session, and
  // fastpath creates one session per instance.
  (*options)["has_user_compute_stream"] = "0";
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
