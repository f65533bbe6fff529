// Per-request checks against the completed config, reshapes, and instance options.
// Everything here runs before a request's tensors are allocated or copied, so it only
// reads shapes and sizes and never trusts a dim before bounding it.
#include <algorithm>
#include <string>

#include "fastpath/config/model_config.h"
#include "internal.h"

namespace fastpath::config {
namespace {

std::string InputNames(const inference::ModelConfig& config) {
  std::string out;
  for (const auto& input : config.input()) out += (out.empty() ? "'" : ", '") + input.name() + "'";
  return out.empty() ? "none" : out;
}

std::string OutputNames(const inference::ModelConfig& config) {
  std::string out;
  for (const auto& output : config.output()) {
    out += (out.empty() ? "'" : ", '") + output.name() + "'";
  }
  return out.empty() ? "none" : out;
}

// Maps `shape` (matching `from`, the -1s of which are filled by shape's values) onto
// `to`, whose -1s take those values in order. Validation guarantees equal -1 counts.
// `shape`, which must fit `from` (named `from_name` in messages), as `to`: its -1 dims take
// `shape`'s in order (config validation keeps the fixed dims' products equal).
StatusOr<std::vector<int64_t>> MapDynamicDims(const std::string& what, bool batched,
                                              const std::string& from_name,
                                              const google::protobuf::RepeatedField<int64_t>& from,
                                              const google::protobuf::RepeatedField<int64_t>& to,
                                              const std::vector<int64_t>& shape) {
  const size_t offset = batched ? 1 : 0;
  bool fits = shape.size() == static_cast<size_t>(from.size()) + offset;
  for (int i = 0; fits && i < from.size(); ++i)
    fits = from[i] == -1 || shape[offset + i] == from[i];
  if (!fits) {
    return InvalidArgument(what + ": shape " + ShapeToString(shape) + " does not fit " + from_name +
                           " " + internal::DimsString(from));
  }
  std::vector<int64_t> dynamic;
  for (int i = 0; i < from.size(); ++i) {
    if (from[i] == -1) dynamic.push_back(shape[offset + i]);
  }
  std::vector<int64_t> out;
  if (batched) out.push_back(shape[0]);
  size_t next = 0;
  for (const int64_t d : to) {
    if (d != -1) {
      out.push_back(d);
    } else if (next < dynamic.size()) {
      out.push_back(dynamic[next++]);
    } else {
      return InvalidArgument(what + ": reshape has more -1 dims than dims " +
                             internal::DimsString(from));
    }
  }
  return out;
}

// The reshape's shape, which a request may also send, for an error message.
std::string AlsoAccepted(const inference::ModelConfig& config, const inference::ModelInput& input) {
  if (!input.has_reshape()) return "";
  return " (or " + ShapeToString(ProtocolShape(config, input.reshape().shape())) +
         ", the shape it reshapes to)";
}

// True when `shape` is ProtocolShape(config, dims) but for its -1s (any): compared in
// place, since every request of every model comes through here.
bool Fits(const inference::ModelConfig& config, const std::vector<int64_t>& shape,
          const google::protobuf::RepeatedField<int64_t>& dims) {
  const size_t offset = config.max_batch_size() > 0 ? 1 : 0;
  if (shape.size() != static_cast<size_t>(dims.size()) + offset) return false;
  for (int i = 0; i < dims.size(); ++i) {
    if (dims[i] != -1 && shape[offset + i] != dims[i]) return false;
  }
  return true;
}

std::string InputWhat(const std::string& name) { return "input '" + name + "'"; }

// The request shape against the config's dims. A reshaped input may also come in the
// shape the model takes: a scalar as [] (per batch item) as readily as Triton's [1].
Status CheckInputShape(const inference::ModelConfig& config, const inference::ModelInput& input,
                       const std::vector<int64_t>& shape) {
  if (Fits(config, shape, input.dims())) return Status::Ok();
  if (input.has_reshape() && Fits(config, shape, input.reshape().shape())) {
    return Status::Ok();  // ReshapeForModel leaves it as it is
  }
  const std::string what = InputWhat(input.name());
  const std::vector<int64_t> expected = ProtocolShape(config, input.dims());
  if (shape.size() != expected.size()) {
    return InvalidArgument(what + ": shape " + ShapeToString(shape) + " has rank " +
                           std::to_string(shape.size()) + " but the model expects rank " +
                           std::to_string(expected.size()) + " " + ShapeToString(expected) +
                           AlsoAccepted(config, input));
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == -1 || shape[i] == expected[i]) continue;
    return InvalidArgument(what + ": shape " + ShapeToString(shape) + " has " +
                           std::to_string(shape[i]) + " at index " + std::to_string(i) +
                           " but the model expects " + std::to_string(expected[i]) + " " +
                           ShapeToString(expected) + AlsoAccepted(config, input));
  }
  return Status::Ok();
}

}  // namespace

bool IsScalarReshape(const inference::ModelInput& input) {
  return input.has_reshape() && input.reshape().shape_size() == 0;
}
bool IsScalarReshape(const inference::ModelOutput& output) {
  return output.has_reshape() && output.reshape().shape_size() == 0;
}

std::vector<int64_t> ProtocolShape(const inference::ModelConfig& config,
                                   const google::protobuf::RepeatedField<int64_t>& dims) {
  std::vector<int64_t> shape;
  shape.reserve(dims.size() + 1);
  if (config.max_batch_size() > 0) shape.push_back(-1);
  shape.insert(shape.end(), dims.begin(), dims.end());
  return shape;
}

Status ValidateInferInputs(const inference::ModelConfig& config, const std::vector<Tensor>& inputs,
                           int64_t max_elements) {
  const bool batched = config.max_batch_size() > 0;
  int64_t batch_size = -1;
  const Tensor* batch_source = nullptr;
  // The error messages' names are built only on error: this runs for every request.
  for (auto it = inputs.begin(); it != inputs.end(); ++it) {
    const Tensor& tensor = *it;
    const inference::ModelInput* input = FindInput(config, tensor.name);
    if (input == nullptr) {
      return InvalidArgument("unexpected input '" + tensor.name + "' for model '" +
                             config.name() + "' (its inputs: " + InputNames(config) + ")");
    }
    const auto same_name = [&](const Tensor& other) { return other.name == tensor.name; };
    if (std::any_of(inputs.begin(), it, same_name)) {
      return InvalidArgument(InputWhat(tensor.name) + " appears more than once in the request");
    }
    const auto what = [&tensor] { return InputWhat(tensor.name); };
    const DataType want = FromConfigDataType(input->data_type());
    if (tensor.dtype != want) {
      return InvalidArgument(what() + ": datatype is " + std::string(DataTypeName(tensor.dtype)) +
                             " but the model expects " + std::string(DataTypeName(want)));
    }
    for (size_t i = 0; i < tensor.shape.size(); ++i) {
      if (tensor.shape[i] < 0) {
        return InvalidArgument(what() + ": shape " + ShapeToString(tensor.shape) +
                               " has negative dim " + std::to_string(tensor.shape[i]) +
                               " at index " + std::to_string(i));
      }
    }
    FASTPATH_RETURN_IF_ERROR(CheckInputShape(config, *input, tensor.shape));
    if (batched) {
      const int64_t batch = tensor.shape[0];
      if (batch < 1 || batch > config.max_batch_size()) {
        return InvalidArgument(what() + ": batch size " + std::to_string(batch) +
                               " (shape[0]) must be between 1 and max_batch_size " +
                               std::to_string(config.max_batch_size()));
      }
      if (batch_source != nullptr && batch != batch_size) {
        return InvalidArgument(what() + ": batch size " + std::to_string(batch) + " differs from " +
                               std::to_string(batch_size) + " of input '" + batch_source->name +
                               "'; all inputs of a request share one batch size");
      }
      batch_size = batch;
      batch_source = &tensor;
    }
    // Bounded before ValidateTensorData multiplies anything out.
    auto count = ElementCount(tensor.shape, max_elements);
    if (!count.ok()) return count.status().WithContext(what());
    FASTPATH_RETURN_IF_ERROR(ValidateTensorData(tensor));
  }
  for (const auto& input : config.input()) {
    const auto sent = [&](const Tensor& tensor) { return tensor.name == input.name(); };
    if (!input.optional() && std::none_of(inputs.begin(), inputs.end(), sent)) {
      return InvalidArgument(
          "missing input '" + input.name() + "' (datatype " +
          std::string(DataTypeName(FromConfigDataType(input.data_type()))) + ", shape " +
          ShapeToString(ProtocolShape(config, input.dims())) + ")");
    }
  }
  return Status::Ok();
}

Status ValidateRequestedOutputs(const inference::ModelConfig& config,
                                const std::vector<std::string>& names) {
  for (auto it = names.begin(); it != names.end(); ++it) {
    const std::string& name = *it;
    if (FindOutput(config, name) == nullptr) {
      return InvalidArgument("unexpected output '" + name + "' requested from model '" +
                             config.name() + "' (its outputs: " + OutputNames(config) + ")");
    }
    if (std::find(names.begin(), it, name) != it) {
      return InvalidArgument("output '" + name + "' is requested more than once");
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<int64_t>> ReshapeForModel(const inference::ModelConfig& config,
                                               const inference::ModelInput& input,
                                               const std::vector<int64_t>& shape) {
  if (!input.has_reshape()) return shape;
  // Sent in the model's own shape (ValidateInferInputs accepted it as such).
  if (!Fits(config, shape, input.dims()) && Fits(config, shape, input.reshape().shape())) {
    return shape;
  }
  return MapDynamicDims(InputWhat(input.name()), config.max_batch_size() > 0, "dims", input.dims(),
                        input.reshape().shape(), shape);
}

StatusOr<std::vector<int64_t>> ReshapeForClient(const inference::ModelConfig& config,
                                                const inference::ModelOutput& output,
                                                const std::vector<int64_t>& model_shape) {
  // A scalar comes back as the scalar it is ([] or [batch]), not as Triton's dims [1].
  if (!output.has_reshape() || IsScalarReshape(output)) return model_shape;
  return MapDynamicDims("output '" + output.name() + "' as the model returned it",
                        config.max_batch_size() > 0, "reshape", output.reshape().shape(),
                        output.dims(), model_shape);
}

Status ReshapeOutputsForClient(const inference::ModelConfig& config, std::vector<Tensor>* outputs) {
  for (auto& tensor : *outputs) {
    const inference::ModelOutput* out = FindOutput(config, tensor.name);
    if (out == nullptr || !out->has_reshape()) continue;
    FASTPATH_ASSIGN_OR_RETURN(tensor.shape, ReshapeForClient(config, *out, tensor.shape));
  }
  return Status::Ok();
}

const char* ThreadPoolModeName(ThreadPoolMode mode) {
  return mode == ThreadPoolMode::kGlobal ? "global" : "per-session";
}

StatusOr<ThreadPoolMode> ParseThreadPoolMode(std::string_view text) {
  if (text == "per-session") return ThreadPoolMode::kPerSession;
  if (text == "global") return ThreadPoolMode::kGlobal;
  return InvalidArgument("--ort-thread-pool must be per-session or global, not '" +
                         std::string(text) + "'");
}

std::vector<std::string> UnreadParameters(const inference::ModelConfig& config) {
  std::vector<std::string> unread;
  for (const auto& [key, value] : config.parameters()) {
    if (key.rfind("fastpath.", 0) == 0 || key == kIntraOpThreadCount ||
        key == kInterOpThreadCount || key == kExecutionMode) {
      continue;
    }
    unread.push_back(key);
  }
  std::sort(unread.begin(), unread.end());
  return unread;
}

bool UsesGlobalThreadPool(const inference::ModelConfig& config, ThreadPoolMode mode) {
  return mode == ThreadPoolMode::kGlobal &&
         config.parameters().count(std::string(kIntraOpThreadCount)) == 0 &&
         config.parameters().count(std::string(kInterOpThreadCount)) == 0;
}

std::optional<int> DefaultIntraOpThreads(const inference::ModelConfig& config,
                                         uint32_t usable_cpu_cores) {
  if (usable_cpu_cores == 0 || config.parameters().count(std::string(kIntraOpThreadCount)) > 0) {
    return std::nullopt;
  }
  int cpu_instances = 0;
  for (const auto& group : config.instance_group()) {
    if (group.kind() == inference::ModelInstanceGroup::KIND_CPU) {
      cpu_instances += std::max(1, group.count());
    }
  }
  if (cpu_instances == 0) return std::nullopt;
  return std::max(1, static_cast<int>(usable_cpu_cores) / cpu_instances);
}

StatusOr<backend::InstanceOptions> InstanceOptionsFor(const inference::ModelConfig& config,
                                                      const inference::ModelInstanceGroup& group,
                                                      int gpu_id, uint32_t usable_cpu_cores,
                                                      ThreadPoolMode thread_pool) {
  backend::InstanceOptions options;
  if (group.kind() == inference::ModelInstanceGroup::KIND_CPU) {
    options.intra_op_threads = DefaultIntraOpThreads(config, usable_cpu_cores).value_or(1);
    options.global_thread_pool = UsesGlobalThreadPool(config, thread_pool);
  }
  switch (group.kind()) {
    case inference::ModelInstanceGroup::KIND_CPU:
      options.providers = {backend::ExecutionProvider::kCpu};
      options.device_id = 0;
      break;
    case inference::ModelInstanceGroup::KIND_GPU:
      if (gpu_id < 0) {
        return InvalidArgument("instance_group '" + group.name() + "': GPU index " +
                               std::to_string(gpu_id) + " is not a GPU");
      }
      {
        FASTPATH_ASSIGN_OR_RETURN(const auto choices, GpuExecutionProviders(config));
        options.providers.clear();
        for (const auto& choice : choices) {
          options.providers.push_back(choice.provider);
          if (!choice.options.empty()) options.provider_options[choice.provider] = choice.options;
        }
      }
      options.device_id = gpu_id;
      break;
    default:
      return InvalidArgument("instance_group '" + group.name() + "': kind " +
                             internal::KindName(group.kind()) +
                             " gives no execution provider; write KIND_CPU or KIND_GPU");
  }
  const auto threads = [&](std::string_view key, int* out) -> Status {
    const auto it = config.parameters().find(std::string(key));
    if (it == config.parameters().end()) return Status::Ok();  // keep the default of 1
    const auto value = internal::ParsePositiveInt(it->second.string_value(), kMaxThreadCount);
    if (!value) {
      return InvalidArgument("parameters: '" + std::string(key) + "' is '" +
                             it->second.string_value() + "'; it must be an integer between 1 and " +
                             std::to_string(kMaxThreadCount));
    }
    *out = *value;
    return Status::Ok();
  };
  FASTPATH_RETURN_IF_ERROR(threads(kIntraOpThreadCount, &options.intra_op_threads));
  FASTPATH_RETURN_IF_ERROR(threads(kInterOpThreadCount, &options.inter_op_threads));
  // Sequential, as Triton's backend runs it: ONNX Runtime uses no inter-op pool then.
  const auto mode = config.parameters().find(std::string(kExecutionMode));
  if (mode != config.parameters().end() && mode->second.string_value() == "0") {
    options.inter_op_threads = 1;
  }
  const auto allowed = config.parameters().find(std::string(backend::kAllowCpuOpsParameter));
  if (allowed != config.parameters().end()) {
    FASTPATH_ASSIGN_OR_RETURN(options.allowed_cpu_ops,
                              backend::ParseAllowedCpuOps(allowed->second.string_value()));
  }
  FASTPATH_ASSIGN_OR_RETURN(options.memory_limit_bytes, MemoryLimitFor(config));
  return options;
}

}  // namespace fastpath::config
