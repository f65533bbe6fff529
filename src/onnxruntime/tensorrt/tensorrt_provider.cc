#include "tensorrt/tensorrt_provider.h"

#include <memory>
#include <system_error>
#include <utility>
#include <vector>

#include "ort_types.h"

namespace fastpath::onnxruntime {

Status AppendTensorRtBridge(const std::map<std::string, std::string>& options,
                            Ort::SessionOptions* session_options) {
  const BridgeOptionArrays arrays("tensorrt", options);
  return CatchOrtExceptions(arrays.context, [&] {
    const OrtApi& api = Ort::GetApi();
    OrtTensorRTProviderOptionsV2* raw = nullptr;
    Ort::ThrowOnError(api.CreateTensorRTProviderOptions(&raw));
    std::unique_ptr<OrtTensorRTProviderOptionsV2, decltype(api.ReleaseTensorRTProviderOptions)> trt(
        raw, api.ReleaseTensorRTProviderOptions);
    Ort::ThrowOnError(api.UpdateTensorRTProviderOptions(trt.get(), arrays.keys.data(),
                                                        arrays.values.data(), arrays.keys.size()));
    session_options->AppendExecutionProvider_TensorRT_V2(*trt);
    return Status::Ok();
  });
}

StatusOr<std::optional<TrtEngineCachePlan>> PrepareTrtEngineCache(
    const backend::InstanceOptions& options, const std::filesystem::path& model_file,
    std::map<std::string, std::string>* trt_options) {
  if (options.engine_cache.root.empty()) return std::optional<TrtEngineCachePlan>();
  auto plan = PlanTrtEngineCache(options, model_file);
  if (!plan.ok()) return plan.status().WithContext("model '" + model_file.string() + "'");
  std::error_code ec;
  std::filesystem::create_directories(plan->decision.dir, ec);
  if (ec) {
    return Internal("cannot create the TensorRT engine folder '" + plan->decision.dir.string() +
                    "': " + ec.message());
  }
  (*trt_options)[std::string(kTrtEngineCacheEnable)] = "1";
  (*trt_options)[std::string(kTrtEngineCachePath)] = plan->decision.dir.string();
  return std::optional<TrtEngineCachePlan>(std::move(plan).value());
}

Status RecordBuiltTrtEngines(const TrtEngineCachePlan& plan) {
  if (plan.decision.found || CountEngineFiles(plan.decision.dir) == 0) return Status::Ok();
  return WriteManifest(plan.decision.dir, plan.key);
}

}  // namespace fastpath::onnxruntime
