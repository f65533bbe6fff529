// The model configuration: config.pbtxt parsed against fastpath's schema (Triton's
// field names and numbers, proto/model_config.proto), checked, completed from the model
// file's signature, and used to check requests before anything big is allocated.
//
// Life of a config (the repository drives it):
//   ParseModelConfig(text)            -> a config exactly as written (unknown fields refused)
//   caller sets name from the folder  -> (a name mismatch is the repository's error)
//   CompleteAndValidate(signature, &c) -> the completed config that /config shows
//   SelectVersions(c.version_policy(), folders on disk)
//   InstanceOptionsFor(c, group, gpu)  -> one ORT session per instance
// and per request:
//   ValidateInferInputs / ValidateRequestedOutputs, then ReshapeForModel when an input
//   has a `reshape`.
//
// Every function is pure (no I/O, no globals) and thread-safe; none throws.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fastpath/backend/backend.h"
#include "fastpath/common/dtype.h"
#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"
#include "model_config.pb.h"

namespace fastpath::config {

// The max_batch_size given to a model that can batch (every input's and output's first
// dim is dynamic) when config.pbtxt leaves it unset. Triton's ORT backend uses 4 too
// (its --backend-config default-max-batch-size).
inline constexpr int kDefaultMaxBatchSize = 4;
// Upper bounds that keep a typo from creating thousands of sessions or threads.
inline constexpr int kMaxInstanceCount = 1024;
inline constexpr int kMaxThreadCount = 1024;
// Names of the per-model ORT thread parameters (Triton's ORT backend spells them so).
inline constexpr std::string_view kIntraOpThreadCount = "intra_op_thread_count";
inline constexpr std::string_view kInterOpThreadCount = "inter_op_thread_count";
// Triton's ONNX Runtime backend's "0" (sequential) or "1" (parallel); fastpath runs parallel
// exactly when the inter-op pool has more than one thread, so "1" needs
// inter_op_thread_count above 1 and "0" makes the inter-op pool one thread.
inline constexpr std::string_view kExecutionMode = "execution_mode";

// The config's parameters that are neither fastpath.* nor one fastpath reads (the thread
// counts, execution_mode), in key order: Triton hands parameters to its backend, so they
// are accepted, and the load's log names those that change nothing here.
std::vector<std::string> UnreadParameters(const inference::ModelConfig& config);
inline constexpr std::string_view kPlatform = "onnxruntime_onnx";
inline constexpr std::string_view kBackend = "onnxruntime";

// What the text itself said, beyond the values: proto3 cannot tell "max_batch_size: 0"
// from an absent field, and only the former means "never batch".
struct ParseDetails {
  bool max_batch_size_set = false;
};

// Parses config.pbtxt (protobuf text format). Any error is InvalidArgument with
// "<source_name>:<line>:<column>: ..." (1-based); a field the schema lacks reads
// "config.pbtxt:3:1: unsupported field 'sequence_batching' in ModelConfig". Duplicate
// map keys (parameters, model_warmup inputs) are errors too: nothing is silently dropped.
StatusOr<inference::ModelConfig> ParseModelConfig(std::string_view text,
                                                  std::string_view source_name);
// Same, also reporting which fields were written. `details` may be null.
StatusOr<inference::ModelConfig> ParseModelConfig(std::string_view text,
                                                  std::string_view source_name,
                                                  ParseDetails* details);
// The same config as JSON (protobuf's mapping of ModelConfig, proto or JSON field names),
// as a load request's "config" parameter gives it. Refused alike: an unsupported field
// (named with its path), a field or map key written twice, an enum number outside its
// enum. Errors are InvalidArgument starting with `source_name`.
StatusOr<inference::ModelConfig> ParseModelConfigJson(std::string_view json,
                                                      std::string_view source_name,
                                                      ParseDetails* details);

// Semantic checks that need no model file, on the config as written: what
// CompleteAndValidate would fill from the model (an entry's data_type or dims, a
// max_batch_size of 0 under dynamic_batching, inputs a warmup sample names but the
// config does not list) is accepted here and checked after completion.
Status ValidateModelConfig(const inference::ModelConfig& config);
// The same checks on a completed config, where nothing may be missing: every entry has
// a data_type and dims, dynamic_batching needs max_batch_size > 0, and warmup samples
// name listed inputs and cover every required one. CompleteAndValidate ends with it.
Status ValidateCompletedModelConfig(const inference::ModelConfig& config);

struct CompletionOptions {
  // True when config.pbtxt wrote max_batch_size (ParseDetails::max_batch_size_set): an
  // explicit 0 then disables batching instead of letting the model's dims decide.
  bool max_batch_size_set = false;
  int default_max_batch_size = kDefaultMaxBatchSize;
};

// What CompleteAndValidate filled in that changes how the model is served, for the load's
// log (Triton's backend logs the max_batch_size it fills in).
struct CompletionNotes {
  bool max_batch_size_filled = false;
  bool dynamic_batching_added = false;
  // Why a model that batches got no dynamic_batching where Triton's backend would add it;
  // "" when none was withheld.
  std::string dynamic_batching_withheld;
};

// Triton-style auto-complete, then ValidateModelConfig, then a consistency check
// against the model file's signature:
// - platform "onnxruntime_onnx" and backend "onnxruntime" when empty;
// - max_batch_size when 0 and not written: kDefaultMaxBatchSize when every input's and
//   output's first dim is -1 and no config entry spells the full (batch-included) rank;
//   otherwise 0;
// - dynamic_batching {} when the config lists no inputs or no outputs, max_batch_size
//   (written or filled) is above 1, the model batches and the config has none, as
//   Triton's ONNX Runtime backend adds it (a config that lists both is taken as written);
//   unlike Triton's, only where every input's and output's first dim has one name in the
//   model (TensorSpec::dim_names): an output whose first dim is another size would hand
//   one request another's rows once requests are batched together;
// - inputs missing from the config, outputs when it lists none (as Triton's, a config that
//   lists some outputs serves those only), and data_type/dims missing from listed ones,
//   from the signature (the batch dim dropped when max_batch_size > 0; a scalar
//   becomes dims [1] with reshape { shape: [] }, as Triton does);
// - instance_group when none: one {KIND_CPU, count 1} (a GPU must be asked for); a
//   group's count 0 becomes 1 and an unnamed group is named "<model>_<index>" when the
//   model name is known;
// - version_policy when none: latest { num_versions: 1 }.
// Contradictions (an entry the model lacks, datatype, rank, fixed dim, batching a model
// whose first dim is fixed) are InvalidArgument naming the tensor and both values.
// On error *config may be partly completed; discard it.
Status CompleteAndValidate(const backend::ModelSignature& signature,
                           inference::ModelConfig* config);
Status CompleteAndValidate(const backend::ModelSignature& signature, inference::ModelConfig* config,
                           const CompletionOptions& options, CompletionNotes* notes = nullptr);

// Applies the version policy (latest{num_versions}, default 1 / all / specific) to the
// numeric version folders found on disk. Returns the selected versions ascending. A
// specific version missing on disk is NotFound naming it; no versions on disk at all
// is NotFound as well.
StatusOr<std::vector<int64_t>> SelectVersions(const inference::ModelVersionPolicy& policy,
                                              std::vector<int64_t> available);

// kInvalid for TYPE_INVALID and values outside the enum.
DataType FromConfigDataType(inference::DataType type);
inference::DataType ToConfigDataType(DataType type);

// The full shape the protocol shows for an input/output: dims with -1 prepended when
// max_batch_size > 0.
std::vector<int64_t> ProtocolShape(const inference::ModelConfig& config,
                                   const google::protobuf::RepeatedField<int64_t>& dims);

// Triton's spelling of a tensor the model sees as a scalar (per batch item): dims [1] with
// reshape { shape: [ ] }. Requests may send it as [] ([batch]) or [1] ([batch, 1]);
// responses and metadata show the scalar as it is.
bool IsScalarReshape(const inference::ModelInput& input);
bool IsScalarReshape(const inference::ModelOutput& output);

// What a config without instance_group gets: one KIND_CPU instance. A GPU is asked for in
// config.pbtxt, never assumed (Triton would pick the GPU); completion and build-engines
// both use this.
inference::ModelInstanceGroup DefaultInstanceGroup();

// nullptr when absent. The pointers point into `config`.
const inference::ModelInput* FindInput(const inference::ModelConfig& config,
                                       std::string_view name);
const inference::ModelOutput* FindOutput(const inference::ModelConfig& config,
                                         std::string_view name);

// Checks a request's inputs against the completed config before anything big is
// allocated or the model runs: each non-optional input present exactly once, no unknown
// input, datatype, rank, fixed dims, batch size in [1, max_batch_size] and shared by all
// inputs, element count <= max_elements (PayloadTooLarge), and the data's byte length.
// Messages name the tensor and the field.
Status ValidateInferInputs(const inference::ModelConfig& config,
                           const std::vector<Tensor>& inputs, int64_t max_elements);
// Requested output names must be outputs of the config, each at most once
// (InvalidArgument, HTTP 400, as KServe answers).
Status ValidateRequestedOutputs(const inference::ModelConfig& config,
                                const std::vector<std::string>& names);

// The shape the model sees for a validated request input of shape `shape`: unchanged
// without a reshape or when it already has the reshape's shape; otherwise [batch] +
// reshape.shape with its -1 dims taken, in order, from the request's -1 dims.
StatusOr<std::vector<int64_t>> ReshapeForModel(const inference::ModelConfig& config,
                                               const inference::ModelInput& input,
                                               const std::vector<int64_t>& shape);
// The shape the client sees for an output the model produced with `model_shape`:
// unchanged without a reshape or for a scalar reshape (IsScalarReshape); otherwise
// [batch] + dims with -1s filled from the model's shape at reshape's -1 positions.
StatusOr<std::vector<int64_t>> ReshapeForClient(const inference::ModelConfig& config,
                                                const inference::ModelOutput& output,
                                                const std::vector<int64_t>& model_shape);
// Every output of `outputs` with a reshape in `config`, as the protocol shows it (`dims`
// where the model produced `reshape`). InvalidArgument naming the output when what the model
// returned does not fit its reshape.
Status ReshapeOutputsForClient(const inference::ModelConfig& config, std::vector<Tensor>* outputs);

// One execution provider of a KIND_GPU instance, with its ORT provider options.
struct ProviderChoice {
  backend::ExecutionProvider provider = backend::ExecutionProvider::kCuda;
  std::map<std::string, std::string> options;
};

// The providers of a KIND_GPU instance, in priority order: the names of
// optimization { execution_accelerators { gpu_execution_accelerator [...] } } ("tensorrt",
// "cuda", "cpu"), or [cuda] when none is listed. Each accelerator's `parameters` become
// that provider's options, unchanged (ORT's provider option names, e.g. "trt_fp16_enable").
// An unknown or repeated name, "cpu" anywhere but last or alone, parameters on "cpu", an
// empty parameter key, and any cpu_execution_accelerator (no CPU accelerator is built in)
// are InvalidArgument naming the entry. Whether "cpu" may be used at all is the profile's
// decision (InstanceOptions::allow_cpu_fallback_for_gpu), not the config's.
StatusOr<std::vector<ProviderChoice>> GpuExecutionProviders(const inference::ModelConfig& config);
// The checks of GpuExecutionProviders, and the "fastpath.allow_cpu_ops" parameter's syntax;
// ValidateModelConfig runs them.
Status ValidateExecutionAccelerators(const inference::ModelConfig& config);

// Every `parameters` key in the "fastpath." namespace that some module reads: the
// placement allowance (backend/placement.h), the self-test budget (admission/self_test.h)
// and the accuracy guard (admission/accuracy_guard.h), sorted. ValidateModelConfig refuses
// any other "fastpath." key, so that a misspelled or not yet supported one is an error at
// load rather than a setting silently ignored.
const std::vector<std::string>& KnownFastpathParameters();

// parameters { key: "fastpath.memory.limit_bytes" value { string_value: "N" } }: the most
// one instance's memory arena may hold. N is a count of bytes, optionally with a binary
// suffix: "268435456", "256Mi", "1Gi" (Ki, Mi, Gi, Ti); at least 1 MiB. nullopt when the
// key is absent; a bad value is InvalidArgument naming the key and the value.
inline constexpr std::string_view kMemoryLimitBytes = "fastpath.memory.limit_bytes";
inline constexpr uint64_t kMinMemoryLimitBytes = uint64_t{1} << 20;
StatusOr<std::optional<uint64_t>> MemoryLimitFor(const inference::ModelConfig& config);

// Parameters "fastpath.canary.interval_s": how often the model's canary (the self-test's
// seeded request, through the normal path) runs while it serves, 1 to 86400 seconds;
// nullopt when the parameter is absent (no canary). InvalidArgument naming the parameter for
// anything else.
StatusOr<std::optional<std::chrono::seconds>> CanaryIntervalFor(const inference::ModelConfig& config);

// Where the CPU instances of a model that names neither thread count run their operators
// (serve's --ort-thread-pool, issue 11 §1): kPerSession, pools of their own sized by
// DefaultIntraOpThreads; kGlobal, the backend's one process-wide intra-op pool, sized to the
// usable cores and shared by every such session. An explicit intra_op_thread_count or
// inter_op_thread_count always gets pools of its own; GPU instances always do.
enum class ThreadPoolMode { kPerSession, kGlobal };
const char* ThreadPoolModeName(ThreadPoolMode mode);  // "per-session" | "global"
StatusOr<ThreadPoolMode> ParseThreadPoolMode(std::string_view text);

// Whether the CPU instances of `config` run on the process-wide pool under `mode`: kGlobal,
// and the config sets neither thread count.
bool UsesGlobalThreadPool(const inference::ModelConfig& config, ThreadPoolMode mode);

// ORT session options for one instance of `group` (kind KIND_CPU -> {kCpu}; KIND_GPU ->
// GpuExecutionProviders on device `gpu_id`), threads from the parameters "intra_op_thread_count"
// and "inter_op_thread_count" (positive integers up to kMaxThreadCount, default 1 each: never 0,
// which would let ORT pick), and the op types a GPU instance may run on the CPU from
// "fastpath.allow_cpu_ops". A bad value is InvalidArgument naming the key and value.
// allow_cpu_fallback_for_gpu stays false: the caller sets it from the profile.
// The instance's memory cap from MemoryLimitFor. Without "intra_op_thread_count", a
// KIND_CPU instance takes usable_cpu_cores / DefaultThreadsShare(config) threads (at
// least 1): the cores the process may use, shared by the model's CPU instances; 0 (not
// known) keeps 1. With `thread_pool` kGlobal and no thread count in the config, a KIND_CPU
// instance runs on the process-wide pool instead (InstanceOptions::global_thread_pool).
StatusOr<backend::InstanceOptions> InstanceOptionsFor(
    const inference::ModelConfig& config, const inference::ModelInstanceGroup& group, int gpu_id,
    uint32_t usable_cpu_cores = 0, ThreadPoolMode thread_pool = ThreadPoolMode::kPerSession);

// The intra-op threads a CPU instance of `config` gets by default from `usable_cpu_cores`
// (see InstanceOptionsFor); nullopt when the config sets them, has no CPU instance, or the
// cores are not known. For the start-up log and the tools that must choose as serve does.
std::optional<int> DefaultIntraOpThreads(const inference::ModelConfig& config,
                                         uint32_t usable_cpu_cores);

}  // namespace fastpath::config
