#include "ort_session.h"

#include <onnxruntime_session_options_config_keys.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cpu/cpu_provider.h"
#include "cuda/cuda_provider.h"
#include "fastpath/common/utf8.h"
#include "ort_environment.h"
#include "ort_types.h"
#include "tensorrt/tensorrt_provider.h"

namespace fastpath::onnxruntime {
namespace {

// A name the protocol can carry, once: KServe's JSON and gRPC's strings are UTF-8, and
// ORT cuts a name at a NUL, so two names that differ after one become the same.
Status CheckTensorName(const std::string& name, const char* kind, std::set<std::string>* seen) {
  if (name.empty()) {
    return InvalidArgument(std::string("the model has an ") + kind + " with no name");
  }
  if (!IsValidUtf8(name)) {
    return InvalidArgument(std::string(kind) + " '" + ToValidUtf8(name) +
                           "' of the model has a name that is not UTF-8 text, which the "
                           "protocol's JSON and gRPC strings cannot carry; rename it in the model");
  }
  if (!seen->insert(name).second) {
    return InvalidArgument("the model has two " + std::string(kind) + "s named '" + name +
                           "' (ONNX Runtime reads a name up to its first NUL byte)");
  }
  return Status::Ok();
}

StatusOr<backend::TensorSpec> ReadTensorSpec(const Ort::TypeInfo& type_info, std::string name,
                                             const char* kind) {
  if (type_info.GetONNXType() != ONNX_TYPE_TENSOR) {
    return Unimplemented(std::string(kind) + " '" + name +
                         "' is not a tensor (a sequence, map or optional); fastpath serves "
                         "tensors only");
  }
  const auto tensor_info = type_info.GetTensorTypeAndShapeInfo();
  const ONNXTensorElementDataType element_type = tensor_info.GetElementType();
  const auto dtype = FastpathDataType(element_type);
  if (!dtype) {
    return Unimplemented(std::string(kind) + " '" + name + "' has element type " +
                         OnnxElementTypeName(element_type) + ", which KServe has no datatype for");
  }
  backend::TensorSpec spec;
  spec.name = std::move(name);
  spec.dtype = *dtype;
  spec.dims = tensor_info.GetShape();
  // ORT reports dims it does not know (symbolic dim_param, or none at all) as -1 already;
  // normalise anything negative so that callers can test `== -1`.
  for (int64_t& dim : spec.dims) {
    if (dim < 0) dim = -1;
  }
  for (const char* symbol : tensor_info.GetSymbolicDimensions()) {
    spec.dim_names.emplace_back(symbol == nullptr ? "" : symbol);
  }
  return spec;
}

// Appends one GPU provider for options.device_id: through the plugin-EP interface (the
// OrtEpDevice with that CUDA ordinal) or, for a provider-bridge library, through the
// provider's own V2 options. A bridged provider enumerates no devices, so the ordinal goes
// in as its device_id, and a missing GPU fails the session's creation.
Status AppendGpuProvider(const backend::InstanceOptions& options,
                         backend::ExecutionProvider provider, OrtEnvironment* env,
                         Ort::SessionOptions* session_options) {
  const EpLibraryState& library = env->Library(provider);
  if (!library.status.ok()) return library.status;
  std::map<std::string, std::string> ep_options;
  if (const auto it = options.provider_options.find(provider);
      it != options.provider_options.end()) {
    ep_options = it->second;
  }
  if (provider == backend::ExecutionProvider::kCuda) {
    SetCudaInstanceOptions(options.memory_limit_bytes, &ep_options);
  }
  const std::string gpu = "GPU " + std::to_string(options.device_id);
  if (library.interface == EpLibraryInterface::kProviderBridge) {
    ep_options["device_id"] = std::to_string(options.device_id);
    return provider == backend::ExecutionProvider::kTensorRt
               ? AppendTensorRtBridge(ep_options, session_options)
               : AppendCudaBridge(ep_options, session_options);
  }
  std::string ordinals;
  const EpDeviceEntry* chosen = FindEpDevice(library, options.device_id, &ordinals);
  if (chosen == nullptr) {
    return FailedPrecondition(gpu + " is not among the devices " + OrtProviderName(provider) +
                              " enumerated (CUDA ordinals: " + ordinals +
                              "); check instance_group gpus and CUDA_VISIBLE_DEVICES");
  }
  const std::unordered_map<std::string, std::string> plugin_options(ep_options.begin(),
                                                                    ep_options.end());
  return CatchOrtExceptions(
      std::string("appending the ") + backend::ExecutionProviderName(provider) +
          " execution provider for " + gpu,
      [&]() -> Status {
        session_options->AppendExecutionProvider_V2(
            env->env(), {Ort::ConstEpDevice(chosen->device)}, plugin_options);
        return Status::Ok();
      });
}

}  // namespace

const EpDeviceEntry* FindEpDevice(const EpLibraryState& library, int device_id,
                                  std::string* ordinals) {
  const EpDeviceEntry* chosen = nullptr;
  for (size_t d = 0; d < library.devices.size(); ++d) {
    const EpDeviceEntry& entry = library.devices[d];
    // The provider's own "device_id" option is the CUDA ordinal; a provider that does not
    // state it gets the enumeration order.
    const int ordinal = entry.report.cuda_device_id.value_or(static_cast<int>(d));
    if (ordinals != nullptr) *ordinals += (ordinals->empty() ? "" : ", ") + std::to_string(ordinal);
    if (ordinal == device_id && chosen == nullptr) chosen = &entry;
  }
  return chosen;
}

Status ApplyExecutionProviders(const backend::InstanceOptions& options, OrtEnvironment* env,
                               Ort::SessionOptions* session_options, std::string* degraded) {
  if (options.providers.empty()) {
    return InvalidArgument("no execution provider given; fastpath never picks one itself");
  }
  // The list as a whole first, so that its mistakes are reported before any library is
  // loaded and whatever the machine has.
  const bool gpu =
      std::any_of(options.providers.begin(), options.providers.end(), backend::IsGpuProvider);
  bool cpu_listed = false;
  for (size_t i = 0; i < options.providers.size(); ++i) {
    const backend::ExecutionProvider provider = options.providers[i];
    if (std::find(options.providers.begin(), options.providers.begin() + i, provider) !=
        options.providers.begin() + i) {
      return InvalidArgument(std::string("execution provider '") +
                             backend::ExecutionProviderName(provider) + "' is listed twice");
    }
    if (provider != backend::ExecutionProvider::kCpu) continue;
    cpu_listed = true;
    // ORT places whatever the other providers decline onto its CPU provider, after all of
    // them; a list that names the CPU before another provider asks for an order ORT
    // cannot give.
    if (i + 1 != options.providers.size()) {
      return InvalidArgument("the cpu execution provider must come last in the provider list");
    }
    if (gpu && !options.allow_cpu_fallback_for_gpu) {
      return FailedPrecondition(
          "execution provider 'cpu' is listed for a GPU instance, and fastpath never runs a GPU "
          "model on the CPU unasked (remove \"cpu\" from gpu_execution_accelerator, or serve "
          "with --allow-cpu-fallback in the dev profile: DEGRADED)");
    }
  }

  for (const backend::ExecutionProvider provider : options.providers) {
    const std::string name = backend::ExecutionProviderName(provider);
    if (provider == backend::ExecutionProvider::kCpu) {
      // Beside plugin providers ORT adds its CPU provider behind them on its own.
      if (gpu) continue;
      FASTPATH_RETURN_IF_ERROR(AppendCpuProvider(session_options));
      continue;
    }
    if (env == nullptr) {
      return Internal("execution provider '" + name + "' needs the ONNX Runtime environment");
    }
    Status status = AppendGpuProvider(options, provider, env, session_options);
    if (status.ok()) continue;
    // The dev profile's explicit opt-in, and only when the config itself lists "cpu": the
    // provider is skipped and the instance is labelled DEGRADED with the reason.
    if (cpu_listed && options.allow_cpu_fallback_for_gpu && degraded != nullptr) {
      *degraded += (degraded->empty() ? "" : "; ") + status.message() +
                   " (the dev profile allows the cpu provider listed after it)";
      continue;
    }
    return status;
  }
  return Status::Ok();
}

StatusOr<backend::PlacementAudit> AuditPlacement(const Ort::Session& session,
                                                 const backend::InstanceOptions& options) {
  return CatchOrtExceptions(
      "reading where ONNX Runtime placed the nodes", [&]() -> StatusOr<backend::PlacementAudit> {
        backend::PlacementAudit audit;
        // Configured providers first, in their order, so that the summary reads as the
        // config does; ORT's implicit CPU provider (and anything else) after them.
        for (backend::ExecutionProvider provider : options.providers) {
          backend::ProviderPlacement placement;
          placement.provider = OrtProviderName(provider);
          audit.providers.push_back(std::move(placement));
        }
        for (const Ort::ConstEpAssignedSubgraph& subgraph : session.GetEpGraphAssignmentInfo()) {
          const std::string ep = subgraph.GetEpName();
          for (const Ort::ConstEpAssignedNode& node : subgraph.GetNodes()) {
            backend::AddPlacedNode(&audit, ep, node.GetOperatorType(), node.GetName());
          }
        }
        // A configured provider that received nothing stays listed with 0 nodes: that is
        // exactly what the audit is for. Providers ORT added on its own are listed only
        // when they received nodes (AddPlacedNode added them).
        audit.allowed_cpu_ops = options.allowed_cpu_ops;
        return audit;
      });
}

StatusOr<Ort::SessionOptions> MakeInstanceSessionOptions(const backend::InstanceOptions& options,
                                                         OrtEnvironment* env,
                                                         const std::string& log_id,
                                                         std::string* degraded) {
  return CatchOrtExceptions("configuring the session", [&]() -> StatusOr<Ort::SessionOptions> {
    Ort::SessionOptions so;
    so.SetLogId(log_id.c_str());
    so.SetGraphOptimizationLevel(GraphOptimizationLevel::ORT_ENABLE_ALL);
    // Costs a list of node names per session, kept for the session's life; what it buys is
    // the placement audit that admission control rests on.
    so.AddConfigEntry(kOrtSessionOptionsRecordEpGraphAssignmentInfo, "1");
    FASTPATH_RETURN_IF_ERROR(
        ConfigureCpuThreads(options, env != nullptr ? env->global_intra_op_threads() : 0, &so));
    FASTPATH_RETURN_IF_ERROR(ApplyExecutionProviders(options, env, &so, degraded));
    return so;
  });
}

StatusOr<Ort::SessionOptions> MakeInspectSessionOptions(const std::string& log_id) {
  return CatchOrtExceptions("configuring the session", [&]() -> StatusOr<Ort::SessionOptions> {
    Ort::SessionOptions so;
    so.SetLogId(log_id.c_str());
    so.SetGraphOptimizationLevel(GraphOptimizationLevel::ORT_DISABLE_ALL);
    backend::InstanceOptions one_thread;  // CPU, one intra-op and one inter-op thread
    FASTPATH_RETURN_IF_ERROR(ConfigureCpuThreads(one_thread, /*global_intra_op_threads=*/0, &so));
    FASTPATH_RETURN_IF_ERROR(ApplyExecutionProviders(one_thread, nullptr, &so, nullptr));
    return so;
  });
}

Status CheckModelFile(const std::filesystem::path& model_file) {
  std::error_code ec;
  const auto status = std::filesystem::status(model_file, ec);
  if (ec || !std::filesystem::exists(status)) {
    return NotFound("model file '" + model_file.string() + "' does not exist");
  }
  if (!std::filesystem::is_regular_file(status)) {
    return InvalidArgument("model file '" + model_file.string() + "' is not a regular file");
  }
  return Status::Ok();
}

StatusOr<Ort::Session> OpenSession(const Ort::Env& env, const std::filesystem::path& model_file,
                                   const Ort::SessionOptions& session_options) {
  FASTPATH_RETURN_IF_ERROR(CheckModelFile(model_file));
  const std::string context = "cannot load ONNX model '" + model_file.string() + "'";
  return CatchOrtExceptions(context, [&]() -> StatusOr<Ort::Session> {
    try {
      return Ort::Session(env, model_file.c_str(), session_options);
    } catch (const Ort::Exception& e) {
      // At load time ORT reports a file it cannot parse or resolve as ORT_FAIL as often as
      // with a specific code; from the caller's side the model file is what is wrong.
      Status status = StatusFromOrtException(e, context);
      if (status.code() == StatusCode::kInternal) return InvalidArgument(status.message());
      return status;
    }
  });
}

StatusOr<backend::ModelSignature> ReadSignature(const Ort::Session& session) {
  return CatchOrtExceptions(
      "reading the model signature", [&]() -> StatusOr<backend::ModelSignature> {
        backend::ModelSignature signature;
        const std::vector<std::string> input_names = session.GetInputNames();
        std::set<std::string> inputs_seen, outputs_seen;
        for (size_t i = 0; i < input_names.size(); ++i) {
          FASTPATH_RETURN_IF_ERROR(CheckTensorName(input_names[i], "input", &inputs_seen));
          FASTPATH_ASSIGN_OR_RETURN(
              auto spec, ReadTensorSpec(session.GetInputTypeInfo(i), input_names[i], "input"));
          signature.inputs.push_back(std::move(spec));
        }
        const std::vector<std::string> output_names = session.GetOutputNames();
        if (output_names.empty()) {
          return InvalidArgument("the model's graph has no outputs: a request could get nothing");
        }
        for (size_t i = 0; i < output_names.size(); ++i) {
          FASTPATH_RETURN_IF_ERROR(CheckTensorName(output_names[i], "output", &outputs_seen));
          FASTPATH_ASSIGN_OR_RETURN(
              auto spec, ReadTensorSpec(session.GetOutputTypeInfo(i), output_names[i], "output"));
          signature.outputs.push_back(std::move(spec));
        }
        return signature;
      });
}

}  // namespace fastpath::onnxruntime
