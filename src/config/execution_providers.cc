// The execution providers a model's instances use: Triton's
// optimization.execution_accelerators, read the fastpath way (the list is the list, in
// order; nothing is added behind the config's back), and the CPU-op allowance.
#include <charconv>
#include <cstdint>
#include <limits>
#include <set>
#include <string>

#include "fastpath/onnxruntime/tensorrt/engine_cache.h"
#include "fastpath/backend/placement.h"
#include "fastpath/config/model_config.h"

namespace fastpath::config {
namespace {

constexpr std::string_view kGpuAcceleratorField =
    "optimization.execution_accelerators.gpu_execution_accelerator";
constexpr std::string_view kCpuAcceleratorField =
    "optimization.execution_accelerators.cpu_execution_accelerator";

std::optional<backend::ExecutionProvider> ProviderByName(std::string_view name) {
  for (auto ep : {backend::ExecutionProvider::kTensorRt, backend::ExecutionProvider::kCuda,
                  backend::ExecutionProvider::kCpu}) {
    if (name == backend::ExecutionProviderName(ep)) return ep;
  }
  return std::nullopt;
}

// The CUDA EP options fastpath checks itself, so that a typo is refused when the config is
// loaded rather than by ORT (or not at all) when the first instance is created.
Status CheckCudaOption(const std::string& what, const std::string& key, const std::string& value) {
  const auto bad = [&](const std::string& allowed) {
    return InvalidArgument(what + ": parameter '" + key + "' is '" + value + "'; " + allowed);
  };
  if (key == "arena_extend_strategy") {
    if (value != "kNextPowerOfTwo" && value != "kSameAsRequested") {
      return bad("it must be \"kNextPowerOfTwo\" or \"kSameAsRequested\"");
    }
  } else if (key == "gpu_mem_limit") {
    // Bytes, as ORT reads them: a decimal size_t. 0 and anything unparsable are refused.
    uint64_t bytes = 0;
    const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), bytes);
    if (value.empty() || ec != std::errc() || ptr != value.data() + value.size() || bytes == 0) {
      return bad("it must be the arena's limit in bytes, an integer between 1 and " +
                 std::to_string(std::numeric_limits<uint64_t>::max()));
    }
  } else if (key == "user_compute_stream" || key == "has_user_compute_stream") {
    return bad(
        "fastpath gives every instance its own CUDA stream (its session creates it), and a "
        "stream shared between instances would serialize them; remove the parameter");
  } else if (key == "device_id") {
    return bad("the GPU comes from instance_group's gpus; remove the parameter");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<ProviderChoice>> GpuExecutionProviders(const inference::ModelConfig& config) {
  const auto& accelerators = config.optimization().execution_accelerators();
  if (accelerators.cpu_execution_accelerator_size() > 0) {
    return InvalidArgument(std::string(kCpuAcceleratorField) + "[0]: '" +
                           accelerators.cpu_execution_accelerator(0).name() +
                           "' is not available: KIND_CPU instances run on ONNX Runtime's CPU "
                           "provider, and fastpath has no CPU accelerator built in");
  }
  std::vector<ProviderChoice> out;
  const auto& listed = accelerators.gpu_execution_accelerator();
  if (listed.empty()) {
    out.push_back(ProviderChoice{backend::ExecutionProvider::kCuda, {}});
    return out;
  }
  std::set<backend::ExecutionProvider> seen;
  for (int i = 0; i < listed.size(); ++i) {
    const auto& accelerator = listed.Get(i);
    const std::string what = std::string(kGpuAcceleratorField) + "[" + std::to_string(i) + "]";
    const auto provider = ProviderByName(accelerator.name());
    if (!provider) {
      return InvalidArgument(what + ": unknown execution accelerator '" + accelerator.name() +
                             "'; fastpath knows \"tensorrt\", \"cuda\" and \"cpu\"");
    }
    if (!seen.insert(*provider).second) {
      return InvalidArgument(what + ": '" + accelerator.name() + "' is listed twice");
    }
    if (*provider == backend::ExecutionProvider::kCpu) {
      if (i + 1 != listed.size()) {
        return InvalidArgument(what +
                               ": \"cpu\" must come last (ONNX Runtime places on the CPU "
                               "only what the providers before it decline)");
      }
      if (listed.size() == 1) {
        return InvalidArgument(what + ": \"cpu\" alone is not a GPU instance; use kind: KIND_CPU");
      }
      if (!accelerator.parameters().empty()) {
        return InvalidArgument(what + ": \"cpu\" takes no parameters");
      }
    }
    ProviderChoice choice{*provider, {}};
    for (const auto& [key, value] : accelerator.parameters()) {
      if (key.empty()) return InvalidArgument(what + ": a parameter key is empty");
      if (*provider == backend::ExecutionProvider::kCuda) {
        FASTPATH_RETURN_IF_ERROR(CheckCudaOption(what, key, value));
      }
      if (key == onnxruntime::kTrtEngineCacheEnable || key == onnxruntime::kTrtEngineCachePath) {
        return InvalidArgument(what + ": parameter '" + key +
                               "' is set by fastpath, which keys the TensorRT engine cache "
                               "itself (serve and build-engines --engine-cache DIR); remove it");
      }
      choice.options.emplace(key, value);
    }
    if (*provider == backend::ExecutionProvider::kTensorRt) {
      // The options that make up the engine cache's key must be readable.
      for (const Status& status : {onnxruntime::TrtPrecision(choice.options).status(),
                                   onnxruntime::TrtShapeProfile(choice.options).status()}) {
        if (!status.ok()) return InvalidArgument(what + ": " + status.message());
      }
    }
    out.push_back(std::move(choice));
  }
  return out;
}

Status ValidateExecutionAccelerators(const inference::ModelConfig& config) {
  FASTPATH_RETURN_IF_ERROR(GpuExecutionProviders(config).status());
  const auto it = config.parameters().find(std::string(backend::kAllowCpuOpsParameter));
  if (it != config.parameters().end()) {
    FASTPATH_RETURN_IF_ERROR(backend::ParseAllowedCpuOps(it->second.string_value()).status());
  }
  return Status::Ok();
}

}  // namespace fastpath::config
