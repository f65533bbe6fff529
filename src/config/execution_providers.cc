// The execution providers a model's instances use: Triton's
// optimization.execution_accelerators, read the fastpath way (the list is the list, in
// order; nothing is added behind the config's back), and the CPU-op allowance.
#include <set>
#include <string>

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
      choice.options.emplace(key, value);
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
