// ValidateModelConfig: the checks that need no model file. Every message names the
// entry and the field so that a user can fix config.pbtxt from the log line alone.
#include <algorithm>
#include <set>
#include <string>

#include "fastpath/backend/placement.h"
#include "fastpath/config/ensemble_config.h"
#include "fastpath/config/model_config.h"
#include "internal.h"

namespace fastpath::config {
namespace internal {

std::string DimsString(const google::protobuf::RepeatedField<int64_t>& dims) {
  return ShapeToString(ToVector(dims));
}

std::optional<DimsVolume> Volume(const google::protobuf::RepeatedField<int64_t>& dims) {
  DimsVolume v;
  for (const int64_t d : dims) {
    if (d == -1) {
      ++v.dynamic_count;
      continue;
    }
    if (d != 0 && v.fixed_product > INT64_MAX / d) return std::nullopt;
    v.fixed_product *= d;
  }
  return v;
}

bool IsPlainName(std::string_view name) {
  if (name.empty() || name == "." || name == "..") return false;
  for (const char c : name) {
    if (c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  return true;
}

std::optional<int> ParsePositiveInt(std::string_view text, int max) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  int value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  if (value < 1 || value > max) return std::nullopt;
  return value;
}

std::string KindName(int kind) {
  if (inference::ModelInstanceGroup::Kind_IsValid(kind)) {
    return inference::ModelInstanceGroup::Kind_Name(
        static_cast<inference::ModelInstanceGroup::Kind>(kind));
  }
  return std::to_string(kind);
}

}  // namespace internal

namespace {

using internal::DimsString;
using internal::IsPlainName;

std::string TypeName(int type) {
  if (inference::DataType_IsValid(type)) {
    return inference::DataType_Name(static_cast<inference::DataType>(type));
  }
  return std::to_string(type);
}

// Shared by inputs and outputs: `what` is "input 'x'" or "output 'y'".
Status ValidateTensorEntry(const std::string& what, int data_type,
                           const google::protobuf::RepeatedField<int64_t>& dims, bool has_reshape,
                           const inference::ModelTensorReshape& reshape, bool complete) {
  // Before completion an unwritten data_type or dims is filled from the model later.
  const bool data_type_pending = !complete && data_type == inference::TYPE_INVALID;
  if (!data_type_pending &&
      FromConfigDataType(static_cast<inference::DataType>(data_type)) == DataType::kInvalid) {
    return InvalidArgument(what + ": data_type " + TypeName(data_type) +
                           " is not a valid datatype (write e.g. data_type: TYPE_FP32)");
  }
  // Triton spells a per-batch-item scalar as dims [1] with reshape { shape: [] }; empty
  // dims would leave the protocol shape undefined.
  if (dims.empty() && !has_reshape && !complete) return Status::Ok();
  if (dims.empty()) {
    return InvalidArgument(what +
                           ": dims must not be empty (for a scalar write dims: [ 1 ] "
                           "and reshape: { shape: [ ] })");
  }
  for (int i = 0; i < dims.size(); ++i) {
    if (dims[i] < -1) {
      return InvalidArgument(what + ": dims " + DimsString(dims) + " has " +
                             std::to_string(dims[i]) + " at index " + std::to_string(i) +
                             "; a dim is -1 (dynamic) or >= 0");
    }
  }
  const auto volume = internal::Volume(dims);
  if (!volume) {
    return InvalidArgument(what + ": dims " + DimsString(dims) + " hold more than 2^63 elements");
  }
  if (!has_reshape) return Status::Ok();
  for (int i = 0; i < reshape.shape_size(); ++i) {
    if (reshape.shape(i) < -1) {
      return InvalidArgument(what + ": reshape shape " + DimsString(reshape.shape()) + " has " +
                             std::to_string(reshape.shape(i)) + " at index " + std::to_string(i) +
                             "; a dim is -1 (dynamic) or >= 0");
    }
  }
  const auto reshaped = internal::Volume(reshape.shape());
  if (!reshaped) {
    return InvalidArgument(what + ": reshape shape " + DimsString(reshape.shape()) +
                           " holds more than 2^63 elements");
  }
  // Each -1 of dims is carried to a -1 of the reshape, in order (ReshapeForModel), so the
  // counts must agree and the fixed parts must hold the same number of elements.
  if (volume->dynamic_count != reshaped->dynamic_count ||
      volume->fixed_product != reshaped->fixed_product) {
    return InvalidArgument(what + ": reshape shape " + DimsString(reshape.shape()) +
                           " does not hold the same elements as dims " + DimsString(dims) +
                           " (the fixed dims' products and the number of -1 dims must match)");
  }
  return Status::Ok();
}

Status ValidateInstanceGroups(const inference::ModelConfig& config) {
  for (int i = 0; i < config.instance_group_size(); ++i) {
    const auto& group = config.instance_group(i);
    const std::string what = "instance_group[" + std::to_string(i) + "]" +
                             (group.name().empty() ? "" : " '" + group.name() + "'");
    if (group.count() < 0 || group.count() > kMaxInstanceCount) {
      return InvalidArgument(what + ": count " + std::to_string(group.count()) +
                             " must be between 1 and " + std::to_string(kMaxInstanceCount) +
                             " (0 or absent means 1)");
    }
    switch (group.kind()) {
      case inference::ModelInstanceGroup::KIND_CPU:
      case inference::ModelInstanceGroup::KIND_GPU:
        break;
      case inference::ModelInstanceGroup::KIND_AUTO:
        return InvalidArgument(
            what +
            ": kind is KIND_AUTO (the default when kind is not written), which fastpath "
            "refuses: it never picks CPU or GPU on its own. Write kind: KIND_CPU or "
            "kind: KIND_GPU");
      case inference::ModelInstanceGroup::KIND_MODEL:
        return InvalidArgument(what +
                               ": kind KIND_MODEL is not supported (it lets the backend "
                               "place instances); write kind: KIND_CPU or kind: KIND_GPU");
      default:
        return InvalidArgument(what + ": kind " + internal::KindName(group.kind()) +
                               " is not a valid kind; write KIND_CPU or KIND_GPU");
    }
    if (group.kind() != inference::ModelInstanceGroup::KIND_GPU && group.gpus_size() > 0) {
      return InvalidArgument(what + ": gpus are only allowed with kind: KIND_GPU (kind is " +
                             internal::KindName(group.kind()) + ")");
    }
    std::set<int> gpus;
    for (const int gpu : group.gpus()) {
      if (gpu < 0) {
        return InvalidArgument(what + ": gpus lists " + std::to_string(gpu) +
                               "; a GPU index is >= 0");
      }
      if (!gpus.insert(gpu).second) {
        return InvalidArgument(what + ": gpus lists GPU " + std::to_string(gpu) + " twice");
      }
    }
  }
  return Status::Ok();
}

Status ValidateDynamicBatching(const inference::ModelConfig& config, bool complete) {
  if (!config.has_dynamic_batching()) return Status::Ok();
  const auto& db = config.dynamic_batching();
  // max_batch_size 0 may still be completed from the model's dims.
  const bool mbs_pending = !complete && config.max_batch_size() == 0;
  if (config.max_batch_size() <= 0 && !mbs_pending) {
    return InvalidArgument("dynamic_batching requires max_batch_size > 0 (it is " +
                           std::to_string(config.max_batch_size()) +
                           "): a model that cannot batch cannot be batched dynamically");
  }
  std::set<int> seen;
  for (const int size : db.preferred_batch_size()) {
    if (size < 1 || (!mbs_pending && size > config.max_batch_size())) {
      return InvalidArgument("dynamic_batching: preferred_batch_size " + std::to_string(size) +
                             " must be between 1 and max_batch_size " +
                             std::to_string(config.max_batch_size()));
    }
    if (!seen.insert(size).second) {
      return InvalidArgument("dynamic_batching: preferred_batch_size " + std::to_string(size) +
                             " is listed twice");
    }
  }
  if (db.priority_levels() == 0) {
    if (db.default_priority_level() != 0 || db.priority_queue_policy_size() > 0) {
      return InvalidArgument(
          "dynamic_batching: default_priority_level and priority_queue_policy need "
          "priority_levels > 0");
    }
  } else {
    // The batcher keeps one queue per level; Triton's configs use a handful.
    constexpr uint64_t kMaxPriorityLevels = 1024;
    if (db.priority_levels() > kMaxPriorityLevels) {
      return InvalidArgument("dynamic_batching: priority_levels " +
                             std::to_string(db.priority_levels()) + " is more than " +
                             std::to_string(kMaxPriorityLevels));
    }
    if (db.default_priority_level() < 1 || db.default_priority_level() > db.priority_levels()) {
      return InvalidArgument("dynamic_batching: default_priority_level " +
                             std::to_string(db.default_priority_level()) +
                             " must be between 1 and priority_levels " +
                             std::to_string(db.priority_levels()));
    }
    for (const auto& [level, policy] : db.priority_queue_policy()) {
      if (level < 1 || level > db.priority_levels()) {
        return InvalidArgument("dynamic_batching: priority_queue_policy key " +
                               std::to_string(level) + " must be between 1 and priority_levels " +
                               std::to_string(db.priority_levels()));
      }
    }
  }
  // As Triton refuses them: answers in arrival order cannot also let a later request of a
  // higher priority, or one not delayed, go first (its answer would wait behind the others).
  if (db.preserve_ordering()) {
    if (db.priority_levels() > 1) {
      return InvalidArgument(
          "dynamic_batching: preserve_ordering allows one priority level (priority_levels is " +
          std::to_string(db.priority_levels()) + ")");
    }
    auto delays = [](const inference::ModelQueuePolicy& policy) {
      return policy.default_timeout_microseconds() != 0 &&
             policy.timeout_action() == inference::ModelQueuePolicy::DELAY;
    };
    if (delays(db.default_queue_policy())) {
      return InvalidArgument(
          "dynamic_batching: preserve_ordering allows no queue policy with timeout_action "
          "DELAY (default_queue_policy)");
    }
    for (const auto& [level, policy] : db.priority_queue_policy()) {
      if (delays(policy)) {
        return InvalidArgument(
            "dynamic_batching: preserve_ordering allows no queue policy with timeout_action "
            "DELAY (priority_queue_policy " +
            std::to_string(level) + ")");
      }
    }
  }
  return Status::Ok();
}

Status ValidateVersionPolicy(const inference::ModelConfig& config) {
  if (!config.has_version_policy()) return Status::Ok();
  const auto& policy = config.version_policy();
  if (policy.has_latest() && policy.latest().num_versions() == 0) {
    return InvalidArgument("version_policy: latest { num_versions } must be >= 1");
  }
  if (policy.has_specific()) {
    if (policy.specific().versions_size() == 0) {
      return InvalidArgument("version_policy: specific { versions } lists no version");
    }
    for (const int64_t v : policy.specific().versions()) {
      if (v < 0) {
        return InvalidArgument("version_policy: specific version " + std::to_string(v) +
                               " is negative; versions are the numeric folder names");
      }
    }
  }
  return Status::Ok();
}

Status ValidateParameters(const inference::ModelConfig& config) {
  const std::vector<std::string>& known = KnownFastpathParameters();
  for (const auto& [key, value] : config.parameters()) {
    if (key.empty()) return InvalidArgument("parameters: a key is empty");
    if (key.rfind("fastpath.", 0) == 0 && !std::binary_search(known.begin(), known.end(), key)) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      return InvalidArgument("parameters: '" + key +
                             "' is not a fastpath parameter; the known ones are " + list);
    }
    if (key == "fastpath.canary.interval_s") {
      FASTPATH_RETURN_IF_ERROR(CanaryIntervalFor(config).status());
    }
    if (key == kMemoryLimitBytes) {
      FASTPATH_RETURN_IF_ERROR(MemoryLimitFor(config).status());
      for (const auto& accelerator :
           config.optimization().execution_accelerators().gpu_execution_accelerator()) {
        if (accelerator.name() == "tensorrt") {
          return InvalidArgument("parameters: '" + key +
                                 "' cannot cap a model that lists the tensorrt accelerator: "
                                 "TensorRT's allocator takes no limit from fastpath, and a cap "
                                 "shown but not enforced is worse than none");
        }
        if (accelerator.parameters().count("gpu_mem_limit") != 0) {
          return InvalidArgument("parameters: '" + key + "' and the " + accelerator.name() +
                                 " accelerator's 'gpu_mem_limit' both cap the instance's "
                                 "memory; keep one");
        }
      }
    }
    if (key == kExecutionMode) {
      const std::string& mode = value.string_value();
      if (mode != "0" && mode != "1") {
        return InvalidArgument("parameters: '" + key + "' is '" + mode +
                               "'; it must be 0 (sequential) or 1 (parallel)");
      }
      const auto inter = config.parameters().find(std::string(kInterOpThreadCount));
      if (mode == "1" &&
          (inter == config.parameters().end() ||
           internal::ParsePositiveInt(inter->second.string_value(), kMaxThreadCount) <= 1)) {
        return InvalidArgument("parameters: '" + key + "' 1 (parallel) needs '" +
                               std::string(kInterOpThreadCount) +
                               "' above 1: fastpath sizes the inter-op pool from it alone, and "
                               "never lets ONNX Runtime pick");
      }
    }
    if (key == kIntraOpThreadCount || key == kInterOpThreadCount) {
      if (!internal::ParsePositiveInt(value.string_value(), kMaxThreadCount)) {
        return InvalidArgument("parameters: '" + key + "' is '" + value.string_value() +
                               "'; it must be an integer between 1 and " +
                               std::to_string(kMaxThreadCount) +
                               " (fastpath never lets ONNX Runtime pick a thread count)");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

const std::vector<std::string>& KnownFastpathParameters() {
  static const std::vector<std::string> known = [] {
    std::vector<std::string> keys = {
        std::string(backend::kAllowCpuOpsParameter),
        "fastpath.accuracy.reference_model",
        "fastpath.accuracy.tolerance",
        "fastpath.canary.interval_s",
        std::string(kMemoryLimitBytes),
        "fastpath.memory.margin",
        "fastpath.rollout.canary_duration_s",
        "fastpath.rollout.canary_max_p95_ratio",
        "fastpath.rollout.canary_percent",
        "fastpath.rollout.gate",
        "fastpath.rollout.max_p95_ratio",
        "fastpath.rollout.min_throughput_ratio",
        "fastpath.rollout.output_tolerance",
        "fastpath.rollout.rounds",
        "fastpath.slo.batch_size",
        "fastpath.slo.iterations",
        "fastpath.slo.min_throughput",
        "fastpath.slo.p95_ms",
        "fastpath.slo.seed",
        "fastpath.slo.warmup_iterations",
    };
    std::sort(keys.begin(), keys.end());
    return keys;
  }();
  return known;
}

StatusOr<std::optional<uint64_t>> MemoryLimitFor(const inference::ModelConfig& config) {
  const auto it = config.parameters().find(std::string(kMemoryLimitBytes));
  if (it == config.parameters().end()) return std::optional<uint64_t>();
  const std::string& text = it->second.string_value();
  const auto bad = [&](const std::string& why) {
    return InvalidArgument("parameters: '" + std::string(kMemoryLimitBytes) + "' is '" + text +
                           "'; " + why);
  };
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string_view suffix = std::string_view(text).substr(digits);
  int shift = 0;
  if (suffix == "Ki") shift = 10;
  else if (suffix == "Mi") shift = 20;
  else if (suffix == "Gi") shift = 30;
  else if (suffix == "Ti") shift = 40;
  else if (!suffix.empty()) shift = -1;
  if (digits == 0 || digits > 15 || shift < 0) {
    return bad("it must be a number of bytes, optionally with a binary suffix (Ki, Mi, Gi, Ti), "
               "e.g. \"512Mi\"");
  }
  const uint64_t number = std::stoull(text.substr(0, digits));
  if (number > (uint64_t{1} << (62 - shift))) return bad("it is larger than any machine's memory");
  const uint64_t bytes = number << shift;
  if (bytes < kMinMemoryLimitBytes) {
    return bad("it must be at least 1Mi (1048576 bytes); no model serves in less");
  }
  return std::optional<uint64_t>(bytes);
}

StatusOr<std::optional<std::chrono::seconds>> CanaryIntervalFor(
    const inference::ModelConfig& config) {
  const auto it = config.parameters().find("fastpath.canary.interval_s");
  if (it == config.parameters().end()) return std::optional<std::chrono::seconds>();
  const std::optional<int> seconds = internal::ParsePositiveInt(it->second.string_value(), 86400);
  if (!seconds) {
    return InvalidArgument("parameters: 'fastpath.canary.interval_s' is '" +
                           it->second.string_value() +
                           "'; it must be a whole number of seconds from 1 to 86400");
  }
  return std::optional<std::chrono::seconds>(*seconds);
}

namespace {

Status ValidateWarmup(const inference::ModelConfig& config, bool complete) {
  for (int i = 0; i < config.model_warmup_size(); ++i) {
    const auto& warmup = config.model_warmup(i);
    const std::string what = "model_warmup[" + std::to_string(i) + "]" +
                             (warmup.name().empty() ? "" : " '" + warmup.name() + "'");
    const int64_t max_batch = config.max_batch_size() > 0 ? config.max_batch_size() : 1;
    const bool mbs_pending = !complete && config.max_batch_size() == 0;
    if (warmup.batch_size() < 1 || (!mbs_pending && warmup.batch_size() > max_batch)) {
      return InvalidArgument(
          what + ": batch_size " + std::to_string(warmup.batch_size()) + " must be between 1 and " +
          std::to_string(max_batch) +
          (config.max_batch_size() > 0 ? " (max_batch_size)" : " (the model does not batch)"));
    }
    for (const auto& [name, input] : warmup.inputs()) {
      const std::string in = what + " input '" + name + "'";
      const inference::ModelInput* model_input = FindInput(config, name);
      if (model_input == nullptr) {
        if (!complete) continue;  // completion may add it from the model
        return InvalidArgument(in + ": the model config has no such input");
      }
      if (model_input->data_type() != inference::TYPE_INVALID &&
          input.data_type() != model_input->data_type()) {
        return InvalidArgument(in + ": data_type " + TypeName(input.data_type()) +
                               " differs from the input's " + TypeName(model_input->data_type()));
      }
      if (!model_input->dims().empty() && input.dims_size() != model_input->dims_size()) {
        return InvalidArgument(in + ": dims " + DimsString(input.dims()) +
                               " have another rank than the input's dims " +
                               DimsString(model_input->dims()));
      }
      for (int d = 0; d < input.dims_size(); ++d) {
        const int64_t want = model_input->dims().empty() ? -1 : model_input->dims(d);
        if (input.dims(d) < 0 || (want != -1 && input.dims(d) != want)) {
          return InvalidArgument(in + ": dims " + DimsString(input.dims()) +
                                 " must be concrete and match the input's dims " +
                                 DimsString(model_input->dims()));
        }
      }
      switch (input.input_data_type_case()) {
        case inference::ModelWarmup::Input::kZeroData:
        case inference::ModelWarmup::Input::kRandomData:
          break;
        case inference::ModelWarmup::Input::kInputDataFile:
          // The file is read from <model>/warmup/; a path could escape the model folder.
          if (!IsPlainName(input.input_data_file())) {
            return InvalidArgument(in + ": input_data_file '" + input.input_data_file() +
                                   "' must be a plain file name inside the model's warmup folder");
          }
          break;
        default:
          return InvalidArgument(in + ": set one of zero_data, random_data or input_data_file");
      }
    }
    for (const auto& model_input : config.input()) {
      if (!complete) break;  // the input list is only known after completion
      if (!model_input.optional() && !warmup.inputs().contains(model_input.name())) {
        return InvalidArgument(what + ": inputs lack the model's input '" + model_input.name() +
                               "'");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

DataType FromConfigDataType(inference::DataType type) {
  switch (type) {
    case inference::TYPE_BOOL:
      return DataType::kBool;
    case inference::TYPE_UINT8:
      return DataType::kUint8;
    case inference::TYPE_UINT16:
      return DataType::kUint16;
    case inference::TYPE_UINT32:
      return DataType::kUint32;
    case inference::TYPE_UINT64:
      return DataType::kUint64;
    case inference::TYPE_INT8:
      return DataType::kInt8;
    case inference::TYPE_INT16:
      return DataType::kInt16;
    case inference::TYPE_INT32:
      return DataType::kInt32;
    case inference::TYPE_INT64:
      return DataType::kInt64;
    case inference::TYPE_FP16:
      return DataType::kFp16;
    case inference::TYPE_FP32:
      return DataType::kFp32;
    case inference::TYPE_FP64:
      return DataType::kFp64;
    case inference::TYPE_STRING:
      return DataType::kBytes;
    case inference::TYPE_BF16:
      return DataType::kBf16;
    default:
      return DataType::kInvalid;
  }
}

inference::DataType ToConfigDataType(DataType type) {
  switch (type) {
    case DataType::kBool:
      return inference::TYPE_BOOL;
    case DataType::kUint8:
      return inference::TYPE_UINT8;
    case DataType::kUint16:
      return inference::TYPE_UINT16;
    case DataType::kUint32:
      return inference::TYPE_UINT32;
    case DataType::kUint64:
      return inference::TYPE_UINT64;
    case DataType::kInt8:
      return inference::TYPE_INT8;
    case DataType::kInt16:
      return inference::TYPE_INT16;
    case DataType::kInt32:
      return inference::TYPE_INT32;
    case DataType::kInt64:
      return inference::TYPE_INT64;
    case DataType::kFp16:
      return inference::TYPE_FP16;
    case DataType::kFp32:
      return inference::TYPE_FP32;
    case DataType::kFp64:
      return inference::TYPE_FP64;
    case DataType::kBytes:
      return inference::TYPE_STRING;
    case DataType::kBf16:
      return inference::TYPE_BF16;
    case DataType::kInvalid:
      break;
  }
  return inference::TYPE_INVALID;
}

const inference::ModelInput* FindInput(const inference::ModelConfig& config,
                                       std::string_view name) {
  for (const auto& input : config.input()) {
    if (input.name() == name) return &input;
  }
  return nullptr;
}

const inference::ModelOutput* FindOutput(const inference::ModelConfig& config,
                                         std::string_view name) {
  for (const auto& output : config.output()) {
    if (output.name() == name) return &output;
  }
  return nullptr;
}

namespace {

// `complete` is false before CompleteAndValidate has run: what the model will supply
// (data_type, dims, max_batch_size, the full input list) may still be missing.
Status Validate(const inference::ModelConfig& config, bool complete) {
  // The name becomes a URL path segment and a folder name; empty means "the caller
  // sets it from the folder".
  if (!config.name().empty() && !IsPlainName(config.name())) {
    return InvalidArgument("name '" + config.name() +
                           "' must not contain '/', '\\' or control characters");
  }
  if (!config.platform().empty() && config.platform() != kPlatform && !IsEnsemble(config)) {
    return InvalidArgument("platform '" + config.platform() +
                           "' is not supported: fastpath runs ONNX models on ONNX Runtime "
                           "(platform: \"onnxruntime_onnx\" or backend: \"onnxruntime\") and "
                           "ensembles of them (platform: \"ensemble\")");
  }
  // An ensemble has no model file: nothing completes it later.
  if (IsEnsemble(config)) complete = true;
  if (!config.backend().empty() && config.backend() != kBackend) {
    return InvalidArgument("backend '" + config.backend() +
                           "' is not supported: fastpath runs ONNX models on ONNX Runtime "
                           "(backend: \"onnxruntime\")");
  }
  if (config.max_batch_size() < 0) {
    return InvalidArgument("max_batch_size " + std::to_string(config.max_batch_size()) +
                           " must be >= 0 (0 means the model does not batch)");
  }
  if (!config.default_model_filename().empty() && !IsPlainName(config.default_model_filename())) {
    return InvalidArgument("default_model_filename '" + config.default_model_filename() +
                           "' must be a plain file name inside the version folder");
  }

  std::set<std::string> names;
  for (int i = 0; i < config.input_size(); ++i) {
    const auto& input = config.input(i);
    if (input.name().empty()) {
      return InvalidArgument("input[" + std::to_string(i) + "]: name is empty");
    }
    if (!names.insert(input.name()).second) {
      return InvalidArgument("input '" + input.name() + "' is listed twice");
    }
    const std::string what = "input '" + input.name() + "'";
    FASTPATH_RETURN_IF_ERROR(ValidateTensorEntry(what, input.data_type(), input.dims(),
                                                 input.has_reshape(), input.reshape(), complete));
    if (input.format() != inference::ModelInput::FORMAT_NONE && input.dims_size() != 3) {
      return InvalidArgument(
          what + ": format " + inference::ModelInput::Format_Name(input.format()) +
          " needs 3 dims (without the batch dim), dims are " + DimsString(input.dims()));
    }
  }
  names.clear();
  for (int i = 0; i < config.output_size(); ++i) {
    const auto& output = config.output(i);
    if (output.name().empty()) {
      return InvalidArgument("output[" + std::to_string(i) + "]: name is empty");
    }
    if (!names.insert(output.name()).second) {
      return InvalidArgument("output '" + output.name() + "' is listed twice");
    }
    const std::string what = "output '" + output.name() + "'";
    FASTPATH_RETURN_IF_ERROR(ValidateTensorEntry(what, output.data_type(), output.dims(),
                                                 output.has_reshape(), output.reshape(), complete));
    if (!output.label_filename().empty() && !IsPlainName(output.label_filename())) {
      return InvalidArgument(what + ": label_filename '" + output.label_filename() +
                             "' must be a plain file name inside the model folder");
    }
  }

  FASTPATH_RETURN_IF_ERROR(ValidateEnsembleGraph(config));
  FASTPATH_RETURN_IF_ERROR(ValidateInstanceGroups(config));
  FASTPATH_RETURN_IF_ERROR(ValidateDynamicBatching(config, complete));
  FASTPATH_RETURN_IF_ERROR(ValidateVersionPolicy(config));
  FASTPATH_RETURN_IF_ERROR(ValidateParameters(config));
  FASTPATH_RETURN_IF_ERROR(ValidateExecutionAccelerators(config));
  FASTPATH_RETURN_IF_ERROR(ValidateWarmup(config, complete));
  return Status::Ok();
}

}  // namespace

Status ValidateModelConfig(const inference::ModelConfig& config) {
  return Validate(config, /*complete=*/false);
}

Status ValidateCompletedModelConfig(const inference::ModelConfig& config) {
  return Validate(config, /*complete=*/true);
}

}  // namespace fastpath::config
