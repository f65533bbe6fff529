#include "tensorrt/tensorrt_provider.h"

#include <memory>
#include <system_error>
#include <utility>
#include <vector>

#include "ort_types.h"

namespace fastpath::onnxruntime {

Status AppendTensorRtBridge(const std::map<std::string, std::string>& options,
                            Ort::SessionOptions* session_options) {
  std::vector<const char*> keys;
  std::vector<const char*> values;
  for (const auto& [key, value] : options) {
    keys.push_back(key.c_str());
    values.push_back(value.c_str());
  }
  const auto device = options.find("device_id");
  const std::string context =
      "appending the tensorrt execution provider (provider bridge) for GPU " +
      (device != options.end() ? device->second : std::string("0"));
  return CatchOrtExceptions(context, [&] {
    const OrtApi& api = Ort::GetApi();
    OrtTensorRTProviderOptionsV2* raw = nullptr;
    Ort::ThrowOnError(api.CreateTensorRTProviderOptions(&raw));
    std::unique_ptr<OrtTensorRTProviderOptionsV2, decltype(api.ReleaseTensorRTProviderOptions)> trt(
        raw, api.ReleaseTensorRTProviderOptions);
    Ort::ThrowOnError(
        api.UpdateTensorRTProviderOptions(trt.get(), keys.data(), values.data(), keys.size()));
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
