#include "ort_instance.h"

#include <onnxruntime_run_options_config_keys.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string_view>
#include <optional>
#include <system_error>
#include <utility>

#include "ort_environment.h"
#include "ort_session.h"
#include "ort_types.h"
#include "tensorrt/tensorrt_provider.h"

namespace fastpath::onnxruntime {
namespace {

const backend::TensorSpec* FindSpec(const std::vector<backend::TensorSpec>& specs,
                                    const std::string& name, size_t* index) {
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name == name) {
      if (index != nullptr) *index = i;
      return &specs[i];
    }
  }
  return nullptr;
}

std::string NameList(const std::vector<backend::TensorSpec>& specs) {
  std::string out;
  for (const auto& spec : specs) {
    if (!out.empty()) out += ", ";
    out += "'" + spec.name + "'";
  }
  return out;
}

Status CheckInputAgainstSpec(const Tensor& tensor, const backend::TensorSpec& spec) {
  if (tensor.dtype != spec.dtype) {
    return InvalidArgument("input '" + tensor.name + "' has datatype " +
                           std::string(DataTypeName(tensor.dtype)) + " but the model expects " +
                           std::string(DataTypeName(spec.dtype)));
  }
  bool dims_match = tensor.shape.size() == spec.dims.size();
  for (size_t i = 0; dims_match && i < spec.dims.size(); ++i) {
    dims_match = spec.dims[i] == -1 || spec.dims[i] == tensor.shape[i];
  }
  if (!dims_match) {
    return InvalidArgument("input '" + tensor.name + "' has shape " + ShapeToString(tensor.shape) +
                           " but the model expects " + ShapeToString(spec.dims));
  }
  // Fixed-size types cost O(1) here (BOOL a pass over its bytes); BYTES are split (and so
  // checked) when converted.
  if (tensor.dtype != DataType::kBytes) FASTPATH_RETURN_IF_ERROR(ValidateTensorData(tensor));
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<OrtModelInstance>> OrtModelInstance::Create(
    std::shared_ptr<OrtEnvironment> env, const std::filesystem::path& model_file,
    const backend::InstanceOptions& options, const std::string& log_id, InputStaging staging) {
  std::string degraded;  // a GPU provider skipped under the dev profile's opt-in
  // TensorRT engines: the keyed folder becomes the EP's engine cache (when the provider
  // can be registered at all; otherwise ApplyExecutionProviders reports why it cannot).
  backend::InstanceOptions effective = options;
  std::optional<TrtEngineCachePlan> engines;
  const bool trt = std::find(options.providers.begin(), options.providers.end(),
                             backend::ExecutionProvider::kTensorRt) != options.providers.end();
  if (trt && env->Library(backend::ExecutionProvider::kTensorRt).status.ok()) {
    FASTPATH_ASSIGN_OR_RETURN(
        engines, PrepareTrtEngineCache(
                     options, model_file,
                     &effective.provider_options[backend::ExecutionProvider::kTensorRt]));
    if (engines) degraded = engines->decision.stale_reason;  // dev: rebuilt, and said so
  }
  FASTPATH_ASSIGN_OR_RETURN(Ort::SessionOptions session_options,
                            MakeInstanceSessionOptions(effective, env.get(), log_id, &degraded));
  const bool gpu =
      std::any_of(options.providers.begin(), options.providers.end(), backend::IsGpuProvider);
  // A capped CPU instance gets a CPU arena of its own; a GPU instance's cap went into its
  // provider's options (gpu_mem_limit).
  FASTPATH_ASSIGN_OR_RETURN(
      Ort::Session session,
      !gpu && options.memory_limit_bytes
          ? env->OpenSessionWithCpuArena(model_file, &session_options, *options.memory_limit_bytes)
          : OpenSession(env->env(), model_file, session_options));
  if (engines) FASTPATH_RETURN_IF_ERROR(RecordBuiltTrtEngines(*engines));
  auto signature = ReadSignature(session);
  if (!signature.ok()) {
    return signature.status().WithContext("model '" + model_file.string() + "'");
  }
  auto placement = AuditPlacement(session, options);
  if (!placement.ok()) {
    return placement.status().WithContext("model '" + model_file.string() + "'");
  }
  if (Status verdict = backend::CheckPlacement(*placement, options); !verdict.ok()) {
    if (!options.allow_cpu_fallback_for_gpu) {
      return verdict.WithContext("model '" + model_file.string() + "': placement refused");
    }
    degraded += (degraded.empty() ? "" : "; ") + verdict.message();
  }
  placement->degraded_reason = std::move(degraded);
  return CatchOrtExceptions(
      "creating the instance of '" + model_file.string() + "'",
      [&]() -> StatusOr<std::unique_ptr<OrtModelInstance>> {
        // The staged path's memory: for a GPU instance, the host-accessible (pinned) memory
        // of the EP device its first usable GPU provider was appended with.
        const OrtMemoryInfo* staging_memory = nullptr;  // null with an allocator: cpu_memory_
        OrtAllocator* staging_allocator = nullptr;
        if (staging == InputStaging::kHostMemory) {
          staging_allocator = Ort::AllocatorWithDefaultOptions();
        } else {
          for (const backend::ExecutionProvider provider : options.providers) {
            if (!backend::IsGpuProvider(provider)) continue;
            const EpLibraryState& library = env->Library(provider);
            const EpDeviceEntry* device =
                library.status.ok() ? FindEpDevice(library, options.device_id, nullptr) : nullptr;
            if (device == nullptr) continue;  // skipped under the dev profile's opt-in
            const OrtMemoryInfo* pinned = Ort::ConstEpDevice(device->device)
                                              .GetMemoryInfo(OrtDeviceMemoryType_HOST_ACCESSIBLE);
            if (pinned != nullptr) {
              OrtAllocator* allocator = env->env().GetSharedAllocator(pinned);
              if (allocator != nullptr) {
                staging_memory = pinned;
                staging_allocator = allocator;
              }
            }
            break;
          }
        }
        // The arena whose statistics memory_stats() reads, and the run options that shrink
        // it: the CPU's, or the device memory of the GPU provider the session was given (the
        // EP device's for a plugin EP; ORT's "Cuda" arena for a provider bridge, which
        // enumerates no device). A GPU arena that ORT does not give out leaves the instance
        // without statistics, and its shrink on the CPU's (harmless).
        Ort::MemoryInfo owned_memory{nullptr};
        const OrtMemoryInfo* arena_memory = nullptr;
        if (!gpu) {
          owned_memory = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
          arena_memory = owned_memory;
        } else {
          for (const backend::ExecutionProvider provider : options.providers) {
            if (!backend::IsGpuProvider(provider)) continue;
            const EpLibraryState& library = env->Library(provider);
            if (!library.status.ok()) continue;  // skipped under the dev profile's opt-in
            if (library.interface == EpLibraryInterface::kProviderBridge) {
              owned_memory = Ort::MemoryInfo("Cuda", OrtArenaAllocator, options.device_id,
                                             OrtMemTypeDefault);
              arena_memory = owned_memory;
              break;
            }
            const EpDeviceEntry* device = FindEpDevice(library, options.device_id, nullptr);
            if (device == nullptr) continue;
            arena_memory =
                Ort::ConstEpDevice(device->device).GetMemoryInfo(OrtDeviceMemoryType_DEFAULT);
            break;
          }
        }
        auto instance = std::unique_ptr<OrtModelInstance>(new OrtModelInstance(
            std::move(env), std::move(session), std::move(signature).value(),
            std::move(placement).value(), model_file.string(), staging_memory, staging_allocator));
        std::string shrink = "cpu:0";
        if (arena_memory != nullptr) {
          try {
            instance->arena_ = Ort::Allocator(instance->session_, arena_memory);
            instance->arena_device_ = gpu ? "gpu" + std::to_string(options.device_id) : "cpu";
            if (gpu) shrink = "gpu:" + std::to_string(options.device_id);
          } catch (const Ort::Exception&) {
            // Not every provider gives its allocator out; memory_stats() then says nothing.
          }
        }
        instance->memory_limit_bytes_ = options.memory_limit_bytes;
        instance->shrink_options_.AddConfigEntry(kOrtRunOptionsConfigEnableMemoryArenaShrinkage,
                                                 shrink.c_str());
        return instance;
      });
}

OrtModelInstance::OrtModelInstance(std::shared_ptr<OrtEnvironment> env, Ort::Session session,
                                   backend::ModelSignature signature,
                                   backend::PlacementAudit placement, std::string model_path,
                                   const OrtMemoryInfo* staging_memory,
                                   OrtAllocator* staging_allocator)
    : env_(std::move(env)),
      session_(std::move(session)),
      placement_(std::move(placement)),
      signature_(std::move(signature)),
      run_context_("running model '" + model_path + "'"),
      cpu_memory_(Ort::MemoryInfo::CreateCpu(OrtDeviceAllocator, OrtMemTypeDefault)),
      staging_memory_(staging_memory),
      staging_allocator_(staging_allocator) {
  for (const auto& spec : signature_.outputs) all_output_names_.push_back(spec.name.c_str());
  if (staging_allocator_ != nullptr) {
    if (staging_memory_ == nullptr) staging_memory_ = cpu_memory_;
    staging_.resize(signature_.inputs.size());
    binding_ = Ort::IoBinding(session_);
  }
}

OrtModelInstance::~OrtModelInstance() {
  if (binding_) binding_.ClearBoundInputs();
  for (StagingBuffer& buffer : staging_) {
    if (buffer.data != nullptr) staging_allocator_->Free(staging_allocator_, buffer.data);
  }
}

StatusOr<std::vector<Tensor>> OrtModelInstance::Run(const std::vector<Tensor>& inputs,
                                                    const std::vector<std::string>& output_names) {
  return CatchOrtExceptions(run_context_, [&] { return RunUnchecked(inputs, output_names); });
}

StatusOr<std::vector<Tensor>> OrtModelInstance::RunUnchecked(
    const std::vector<Tensor>& inputs, const std::vector<std::string>& output_names) {
  // Inputs: every model input exactly once, in any order.
  std::vector<const char*> input_names;
  std::vector<Ort::Value> input_values;
  input_names.reserve(inputs.size());
  input_values.reserve(inputs.size());
  std::vector<bool> seen(signature_.inputs.size(), false);
  for (const Tensor& tensor : inputs) {
    size_t index = 0;
    const backend::TensorSpec* spec = FindSpec(signature_.inputs, tensor.name, &index);
    if (spec == nullptr) {
      return NotFound("unknown input '" + tensor.name + "'; the model's inputs are " +
                      NameList(signature_.inputs));
    }
    if (seen[index]) return InvalidArgument("input '" + tensor.name + "' is given twice");
    seen[index] = true;
    FASTPATH_RETURN_IF_ERROR(CheckInputAgainstSpec(tensor, *spec));
    FASTPATH_ASSIGN_OR_RETURN(Ort::Value value, staged()
                                                    ? MakeStagedInputValue(tensor, *spec, index)
                                                    : MakeInputValue(tensor, *spec));
    input_names.push_back(spec->name.c_str());
    input_values.push_back(std::move(value));
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) return InvalidArgument("missing input '" + signature_.inputs[i].name + "'");
  }

  // Outputs: the ones asked for, in that order; all of them when none are named.
  std::vector<const char*> wanted;
  if (output_names.empty()) {
    wanted = all_output_names_;
  } else {
    std::vector<bool> requested(signature_.outputs.size(), false);
    for (const std::string& name : output_names) {
      size_t index = 0;
      const backend::TensorSpec* spec = FindSpec(signature_.outputs, name, &index);
      if (spec == nullptr) {
        return NotFound("unknown output '" + name + "'; the model's outputs are " +
                        NameList(signature_.outputs));
      }
      if (requested[index]) return InvalidArgument("output '" + name + "' is requested twice");
      requested[index] = true;
      wanted.push_back(spec->name.c_str());
    }
  }

  std::vector<Ort::Value> results;
  const auto run = [&](const Ort::RunOptions& run_options) -> Status {
    try {
      results = staged()
                    ? RunBound(run_options, input_names, input_values, wanted)
                    : session_.Run(run_options, input_names.data(), input_values.data(),
                                   input_values.size(), wanted.data(), wanted.size());
      return Status::Ok();
    } catch (const Ort::Exception& e) {
      // ORT validated something fastpath did not (a shape the graph cannot take, say) or a
      // kernel failed; its code tells which, and its message says what.
      return StatusFromOrtException(e, run_context_);
    }
  };
  Status status = run(Ort::RunOptions{nullptr});
  if (status.code() == StatusCode::kResourceExhausted) {
    // Out of memory. The arena may hold enough in free regions of the wrong sizes (they
    // count against its limit), and ORT gives them back only at the end of a run that asks
    // for it (OrtAllocator::Shrink is not implemented for a session's arena). So the run is
    // tried once more with the shrinkage option: it fails where it failed (rarely, it fits),
    // and the arena is shrunk when it ends, so that what runs next (the scheduler's retry in
    // halves, the client's retry) finds the memory free.
    // An ORT that cannot shrink this arena refuses the option before running: the first
    // error stands then.
    Status retry = run(shrink_options_);
    if (retry.ok() || retry.code() == StatusCode::kResourceExhausted) status = std::move(retry);
  }
  if (status.code() == StatusCode::kResourceExhausted) {
    out_of_memory_runs_.fetch_add(1, std::memory_order_relaxed);
    return ResourceExhausted(
        status.message() + "; " +
        (memory_limit_bytes_ ? "the instance's memory limit is " +
                                   std::to_string(*memory_limit_bytes_) + " bytes"
                             : std::string("the instance has no memory limit")) +
        " (parameters: fastpath.memory.limit_bytes)");
  }
  FASTPATH_RETURN_IF_ERROR(status);
  if (results.size() != wanted.size()) {
    return Internal("ORT returned " + std::to_string(results.size()) + " outputs for " +
                    std::to_string(wanted.size()) + " requested");
  }

  // Copy out while the inputs are alive: ORT may hand back an output that aliases an input
  // buffer (Identity does), and the request's bytes belong to the caller.
  std::vector<Tensor> outputs;
  outputs.reserve(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    FASTPATH_ASSIGN_OR_RETURN(Tensor tensor, MakeOutputTensor(wanted[i], results[i]));
    outputs.push_back(std::move(tensor));
  }
  return outputs;
}

StatusOr<Ort::Value> OrtModelInstance::MakeInputValue(const Tensor& tensor,
                                                      const backend::TensorSpec& spec) {
  const ONNXTensorElementDataType onnx_type = *OnnxElementType(spec.dtype);
  const int64_t* shape = tensor.shape.data();
  const size_t rank = tensor.shape.size();

  if (tensor.dtype == DataType::kBytes) {
    FASTPATH_ASSIGN_OR_RETURN(const int64_t count, ElementCount(tensor.shape));
    FASTPATH_ASSIGN_OR_RETURN(auto elements, SplitBytesElements(tensor.data, count, tensor.name));
    Ort::Value value = Ort::Value::CreateTensor(allocator_, shape, rank, onnx_type);
    for (size_t i = 0; i < elements.size(); ++i) {
      // Length-delimited, not NUL-terminated: elements may hold NULs and may be empty,
      // which FillStringTensor (C strings) would get wrong.
      char* buffer = value.GetResizedStringTensorElementBuffer(i, elements[i].size());
      if (!elements[i].empty()) std::memcpy(buffer, elements[i].data(), elements[i].size());
    }
    return value;
  }

  const size_t element_size = ElementSize(tensor.dtype);
  const auto address = reinterpret_cast<uintptr_t>(tensor.data.data());
  if (address % element_size == 0) {
    // Zero copy: the Value borrows the request's bytes. ORT never writes to a session's
    // input tensors, so casting away const here cannot change the caller's data.
    return Ort::Value::CreateTensor(cpu_memory_, const_cast<char*>(tensor.data.data()),
                                    tensor.data.size(), shape, rank, onnx_type);
  }
  // A buffer that is not aligned to its element size would break kernels that load whole
  // elements; copy it into ORT's (aligned) memory instead. std::string's buffers are
  // aligned in practice, so this is the rare path.
  Ort::Value value = Ort::Value::CreateTensor(allocator_, shape, rank, onnx_type);
  if (!tensor.data.empty()) {
    std::memcpy(value.GetTensorMutableRawData(), tensor.data.data(), tensor.data.size());
  }
  return value;
}

StatusOr<Ort::Value> OrtModelInstance::MakeStagedInputValue(const Tensor& tensor,
                                                            const backend::TensorSpec& spec,
                                                            size_t index) {
  if (tensor.dtype == DataType::kBytes) return MakeInputValue(tensor, spec);
  StagingBuffer& buffer = staging_[index];
  const size_t bytes = tensor.data.size();
  if (buffer.data == nullptr || bytes > buffer.capacity) {
    // Grown to the largest request seen, then reused: a steady load allocates nothing.
    if (buffer.data != nullptr) staging_allocator_->Free(staging_allocator_, buffer.data);
    buffer = StagingBuffer{};
    const size_t capacity = std::max<size_t>(bytes, 1);
    void* data = staging_allocator_->Alloc(staging_allocator_, capacity);
    if (data == nullptr) {
      return ResourceExhausted("out of memory: cannot allocate " + std::to_string(capacity) +
                               " bytes of staging memory for input '" + tensor.name + "'");
    }
    buffer = StagingBuffer{data, capacity};
  }
  if (bytes > 0) std::memcpy(buffer.data, tensor.data.data(), bytes);
  return Ort::Value::CreateTensor(staging_memory_, buffer.data, bytes, tensor.shape.data(),
                                  tensor.shape.size(), *OnnxElementType(spec.dtype));
}

std::vector<Ort::Value> OrtModelInstance::RunBound(const Ort::RunOptions& run_options,
                                                   const std::vector<const char*>& input_names,
                                                   std::vector<Ort::Value>& input_values,
                                                   const std::vector<const char*>& output_names) {
  binding_.ClearBoundInputs();
  binding_.ClearBoundOutputs();
  for (size_t i = 0; i < input_names.size(); ++i)
    binding_.BindInput(input_names[i], input_values[i]);
  // Outputs land in the staging memory too (pinned on a GPU instance), allocated by the
  // session's allocator for it; MakeOutputTensor reads them from the host. String
  // (BYTES) tensors live in CPU memory only in ORT, so those are bound there.
  for (const char* name : output_names) {
    const backend::TensorSpec* spec = FindSpec(signature_.outputs, name, nullptr);
    const bool bytes = spec != nullptr && spec->dtype == DataType::kBytes;
    binding_.BindOutput(name, bytes ? static_cast<const OrtMemoryInfo*>(cpu_memory_)
                                    : staging_memory_);
  }
  session_.Run(run_options, binding_);
  binding_.SynchronizeOutputs();
  staged_runs_.fetch_add(1, std::memory_order_relaxed);
  return binding_.GetOutputValues();
}

std::optional<backend::MemoryStats> OrtModelInstance::memory_stats() const {
  if (!arena_) return std::nullopt;
  OrtKeyValuePairs* raw = nullptr;
  if (OrtStatus* status = Ort::GetApi().AllocatorGetStats(arena_, &raw); status != nullptr) {
    Ort::GetApi().ReleaseStatus(status);
    return std::nullopt;
  }
  const Ort::KeyValuePairs stats(raw);
  // ORT writes each figure as a decimal; a missing or unreadable one stays 0 (-1 is
  // "no limit").
  const auto read = [&](const char* key) -> std::optional<uint64_t> {
    const char* text = stats.GetValue(key);
    if (text == nullptr) return std::nullopt;
    uint64_t value = 0;
    const std::string_view view(text);
    const auto [end, ec] = std::from_chars(view.data(), view.data() + view.size(), value);
    if (ec != std::errc() || end != view.data() + view.size()) return std::nullopt;
    return value;
  };
  backend::MemoryStats out;
  out.device = arena_device_;
  out.in_use_bytes = read("InUse").value_or(0);
  out.reserved_bytes = read("TotalAllocated").value_or(0);
  out.peak_bytes = read("MaxInUse").value_or(0);
  out.limit_bytes = read("Limit");
  out.arena_extensions = read("NumArenaExtensions").value_or(0);
  out.arena_shrinkages = read("NumArenaShrinkages").value_or(0);
  out.out_of_memory_runs = out_of_memory_runs_.load(std::memory_order_relaxed);
  return out;
}

StatusOr<Tensor> OrtModelInstance::MakeOutputTensor(const std::string& name,
                                                    const Ort::Value& value) {
  if (!value.IsTensor()) {
    return Unimplemented("output '" + name + "' is not a tensor; fastpath serves tensors only");
  }
  const auto info = value.GetTensorTypeAndShapeInfo();
  const ONNXTensorElementDataType onnx_type = info.GetElementType();
  const auto dtype = FastpathDataType(onnx_type);
  if (!dtype) {
    return Unimplemented("output '" + name + "' has element type " +
                         OnnxElementTypeName(onnx_type) + ", which KServe has no datatype for");
  }
  Tensor tensor;
  tensor.name = name;
  tensor.dtype = *dtype;
  tensor.shape = info.GetShape();
  const size_t count = info.GetElementCount();

  if (*dtype == DataType::kBytes) {
    if (count == 0) return tensor;
    const size_t total = value.GetStringTensorDataLength();
    std::string content(total, '\0');
    std::vector<size_t> offsets(count);
    value.GetStringTensorContent(content.data(), content.size(), offsets.data(), offsets.size());
    tensor.data.reserve(total + 4 * count);
    for (size_t i = 0; i < count; ++i) {
      const size_t end = i + 1 < count ? offsets[i + 1] : total;
      AppendBytesElement(&tensor.data,
                         std::string_view(content).substr(offsets[i], end - offsets[i]));
    }
    return tensor;
  }

  const size_t bytes = value.GetTensorSizeInBytes();
  if (bytes != count * ElementSize(*dtype)) {
    return Internal("output '" + name + "' has " + std::to_string(bytes) + " bytes for " +
                    std::to_string(count) + " elements of " + std::string(DataTypeName(*dtype)));
  }
  if (bytes > 0) tensor.data.assign(static_cast<const char*>(value.GetTensorRawData()), bytes);
  return tensor;
}

}  // namespace fastpath::onnxruntime
