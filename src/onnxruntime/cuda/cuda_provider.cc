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
  std::vector<const char*> keys;
  std::vector<const char*> values;
  for (const auto& [key, value] : options) {
    keys.push_back(key.c_str());
    values.push_back(value.c_str());
  }
  const auto device = options.find("device_id");
  const std::string context = "appending the cuda execution provider (provider bridge) for GPU " +
                              (device != options.end() ? device->second : std::string("0"));
  return CatchOrtExceptions(context, [&] {
    const OrtApi& api = Ort::GetApi();
    OrtCUDAProviderOptionsV2* raw = nullptr;
    Ort::ThrowOnError(api.CreateCUDAProviderOptions(&raw));
    std::unique_ptr<OrtCUDAProviderOptionsV2, decltype(api.ReleaseCUDAProviderOptions)> cuda(
        raw, api.ReleaseCUDAProviderOptions);
    Ort::ThrowOnError(
        api.UpdateCUDAProviderOptions(cuda.get(), keys.data(), values.data(), keys.size()));
    session_options->AppendExecutionProvider_CUDA_V2(*cuda);
    return Status::Ok();
  });
}

}  // namespace fastpath::onnxruntime
