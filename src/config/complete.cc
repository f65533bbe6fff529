// CompleteAndValidate (Triton's auto-complete, then the checks against the model file)
// and SelectVersions.
#include <algorithm>
#include <string>

#include "fastpath/config/model_config.h"
#include "internal.h"

namespace fastpath::config {
namespace {

using backend::ModelSignature;
using backend::TensorSpec;

const TensorSpec* FindSpec(const std::vector<TensorSpec>& specs, const std::string& name) {
  for (const auto& spec : specs) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

std::string Names(const std::vector<TensorSpec>& specs) {
  if (specs.empty()) return "none";
  std::string out;
  for (const auto& spec : specs) out += (out.empty() ? "'" : ", '") + spec.name + "'";
  return out;
}

std::string ConfigTypeName(DataType type) {
  return inference::DataType_Name(ToConfigDataType(type));
}

// Triton's test for "the model can batch": every input and output has a dynamic first dim.
bool ModelCanBatch(const ModelSignature& signature) {
  if (signature.inputs.empty() && signature.outputs.empty()) return false;
  const auto dynamic_first = [](const TensorSpec& s) { return !s.dims.empty() && s.dims[0] == -1; };
  return std::all_of(signature.inputs.begin(), signature.inputs.end(), dynamic_first) &&
         std::all_of(signature.outputs.begin(), signature.outputs.end(), dynamic_first);
}

// Why the rows of a batch may not stay rows through the model, "" when they do: every
// input's and output's first dim must carry one name. An output whose first dim is another
// size (a sum over the rows, NonZero's count) would give one request another's rows.
std::string WhyRowsMayNotStayRows(const ModelSignature& signature) {
  const TensorSpec* first = nullptr;
  for (const auto* specs : {&signature.inputs, &signature.outputs}) {
    for (const TensorSpec& spec : *specs) {
      const std::string& name = spec.dim_names.empty() ? std::string() : spec.dim_names[0];
      if (name.empty()) {
        return "the first dim of '" + spec.name + "' has no name in the model, so it cannot " +
               "be told to be the batch";
      }
      if (first == nullptr) {
        first = &spec;
      } else if (name != first->dim_names[0]) {
        return "the first dim of '" + spec.name + "' is '" + name + "' in the model, not '" +
               first->dim_names[0] + "' as that of '" + first->name + "'";
      }
    }
  }
  return "";
}

// The dims the model sees for a config entry: reshape.shape when there is one.
template <typename Entry>
const google::protobuf::RepeatedField<int64_t>& ModelSideDims(const Entry& entry) {
  return entry.has_reshape() ? entry.reshape().shape() : entry.dims();
}

// True when some listed entry writes dims with the model's full rank, batch dim included:
// its author means "no batching", even though proto3 cannot show max_batch_size: 0.
template <typename Entries>
bool SpellsFullRank(const Entries& entries, const std::vector<TensorSpec>& specs) {
  for (const auto& entry : entries) {
    const TensorSpec* spec = FindSpec(specs, entry.name());
    if (spec == nullptr || (entry.dims().empty() && !entry.has_reshape())) continue;
    if (static_cast<size_t>(ModelSideDims(entry).size()) == spec->dims.size()) return true;
  }
  return false;
}

// Fills data_type and dims of `entry` from the model where the config left them out.
template <typename Entry>
void FillFromSpec(const TensorSpec& spec, int max_batch_size, Entry* entry) {
  if (entry->data_type() == inference::TYPE_INVALID) {
    entry->set_data_type(ToConfigDataType(spec.dtype));
  }
  if (!entry->dims().empty() || entry->has_reshape()) return;
  // A model that cannot batch leaves the batch dim to the contradiction check; do not
  // strip a dim that is not there.
  const size_t skip = (max_batch_size > 0 && !spec.dims.empty()) ? 1 : 0;
  for (size_t i = skip; i < spec.dims.size(); ++i) entry->add_dims(spec.dims[i]);
  if (entry->dims().empty()) {
    // A scalar per batch item: Triton writes dims [1] and reshape { shape: [] }.
    entry->add_dims(1);
    entry->mutable_reshape();
  }
}

template <typename Entry>
Status CheckAgainstModel(const std::string& kind, const Entry& entry, const TensorSpec& spec,
                         int max_batch_size) {
  const std::string what = kind + " '" + entry.name() + "'";
  const DataType dtype = FromConfigDataType(entry.data_type());
  if (dtype != spec.dtype) {
    return InvalidArgument(what + ": data_type is " + inference::DataType_Name(entry.data_type()) +
                           " in the config but " + ConfigTypeName(spec.dtype) + " in the model");
  }
  const std::string model_shape = ShapeToString(spec.dims);
  std::vector<int64_t> seen;  // the full shape the model is given, batch dim included
  if (max_batch_size > 0) {
    if (spec.dims.empty() || spec.dims[0] != -1) {
      return InvalidArgument(what + ": max_batch_size is " + std::to_string(max_batch_size) +
                             " but the model's shape " + model_shape +
                             " has no dynamic (-1) first dim to batch along; set "
                             "max_batch_size: 0 and write the full shape in dims");
    }
    seen.push_back(-1);
  }
  for (const int64_t d : ModelSideDims(entry)) seen.push_back(d);
  const std::string config_dims =
      (entry.has_reshape() ? "reshape shape " : "dims ") + internal::DimsString(ModelSideDims(entry));
  if (seen.size() != spec.dims.size()) {
    std::string hint;
    if (max_batch_size > 0 && seen.size() == spec.dims.size() + 1) {
      hint = " (with max_batch_size > 0, dims leave out the batch dim)";
    } else if (max_batch_size == 0 && seen.size() + 1 == spec.dims.size()) {
      hint = " (with max_batch_size: 0, dims include the model's first dim)";
    }
    return InvalidArgument(what + ": the config's " + config_dims + " give the model shape " +
                           ShapeToString(seen) + " (rank " + std::to_string(seen.size()) +
                           ") but the model's shape is " + model_shape + " (rank " +
                           std::to_string(spec.dims.size()) + ")" + hint);
  }
  for (size_t i = (max_batch_size > 0 ? 1 : 0); i < seen.size(); ++i) {
    // A dynamic model dim accepts whatever the config fixes; a fixed one must be matched
    // exactly (a config -1 would let requests through that the model rejects).
    if (spec.dims[i] != -1 && seen[i] != spec.dims[i]) {
      return InvalidArgument(what + ": dim " + std::to_string(i) + " is " +
                             std::to_string(seen[i]) + " in the config (" + config_dims +
                             ", model shape " + ShapeToString(seen) + ") but " +
                             std::to_string(spec.dims[i]) + " in the model (" + model_shape + ")");
    }
  }
  return Status::Ok();
}

}  // namespace

Status CompleteAndValidate(const ModelSignature& signature, inference::ModelConfig* config) {
  return CompleteAndValidate(signature, config, CompletionOptions{});
}

Status CompleteAndValidate(const ModelSignature& signature, inference::ModelConfig* config,
                           const CompletionOptions& options, CompletionNotes* notes) {
  if (config == nullptr) return Internal("CompleteAndValidate: config is null");
  CompletionNotes ignored;
  if (notes == nullptr) notes = &ignored;
  for (const auto* specs : {&signature.inputs, &signature.outputs}) {
    for (const auto& spec : *specs) {
      if (spec.dtype == DataType::kInvalid) {
        return InvalidArgument("model tensor '" + spec.name +
                               "' has an element type that fastpath cannot serve");
      }
    }
  }
  // Entries the model lacks are the user's mistake: report them before completion
  // mixes in entries of our own.
  for (const auto& input : config->input()) {
    if (FindSpec(signature.inputs, input.name()) == nullptr) {
      return InvalidArgument("input '" + input.name() + "' is in the config but not in the model " +
                             "(the model's inputs: " + Names(signature.inputs) + ")");
    }
  }
  for (const auto& output : config->output()) {
    if (FindSpec(signature.outputs, output.name()) == nullptr) {
      return InvalidArgument("output '" + output.name() +
                             "' is in the config but not in the model (the model's outputs: " +
                             Names(signature.outputs) + ")");
    }
  }

  // Triton's ONNX Runtime backend completes a config only when it leaves the inputs or the
  // outputs to the model (one that lists both is taken as written), and then turns on its
  // dynamic batcher for a model that batches.
  const bool tensors_left_to_model = config->input_size() == 0 || config->output_size() == 0;

  if (config->platform().empty()) config->set_platform(std::string(kPlatform));
  if (config->backend().empty()) config->set_backend(std::string(kBackend));

  if (config->max_batch_size() == 0 && !options.max_batch_size_set &&
      options.default_max_batch_size > 0 && ModelCanBatch(signature) &&
      !SpellsFullRank(config->input(), signature.inputs) &&
      !SpellsFullRank(config->output(), signature.outputs)) {
    config->set_max_batch_size(options.default_max_batch_size);
    notes->max_batch_size_filled = true;
  }
  const int max_batch_size = config->max_batch_size();
  if (tensors_left_to_model && max_batch_size > 1 && ModelCanBatch(signature) &&
      !config->has_dynamic_batching()) {
    notes->dynamic_batching_withheld = WhyRowsMayNotStayRows(signature);
    if (notes->dynamic_batching_withheld.empty()) {
      config->mutable_dynamic_batching();
      notes->dynamic_batching_added = true;
    }
  }

  for (const auto& spec : signature.inputs) {
    inference::ModelInput* entry = nullptr;
    for (auto& input : *config->mutable_input()) {
      if (input.name() == spec.name) entry = &input;
    }
    if (entry == nullptr) {
      entry = config->add_input();
      entry->set_name(spec.name);
    }
    FillFromSpec(spec, max_batch_size, entry);
  }
  // Outputs the config lists are all it serves, as Triton's: a model's other outputs are
  // neither computed for clients nor shown in its metadata. Only a config that lists none
  // takes every output of the model.
  const bool outputs_listed = config->output_size() > 0;
  for (const auto& spec : signature.outputs) {
    inference::ModelOutput* entry = nullptr;
    for (auto& output : *config->mutable_output()) {
      if (output.name() == spec.name) entry = &output;
    }
    if (entry == nullptr) {
      if (outputs_listed) continue;
      entry = config->add_output();
      entry->set_name(spec.name);
    }
    FillFromSpec(spec, max_batch_size, entry);
  }

  if (config->instance_group().empty()) *config->add_instance_group() = DefaultInstanceGroup();
  for (int i = 0; i < config->instance_group_size(); ++i) {
    auto* group = config->mutable_instance_group(i);
    if (group->count() == 0) group->set_count(1);
    if (group->name().empty() && !config->name().empty()) {
      group->set_name(config->name() + "_" + std::to_string(i));
    }
  }
  if (!config->has_version_policy()) {
    config->mutable_version_policy()->mutable_latest()->set_num_versions(1);
  }

  // Triton's spelling of a scalar in a model that does not batch: dims [1] and no reshape,
  // which its own auto-complete writes when max_batch_size is 0. Read as the scalar it is
  // (dims [1] with reshape { shape: [] }), as Triton's ONNX Runtime backend reads it.
  if (max_batch_size == 0) {
    auto scalar = [](auto& entry, const TensorSpec& spec) {
      if (spec.dims.empty() && !entry.has_reshape() && entry.dims_size() == 1 &&
          entry.dims(0) == 1) {
        entry.mutable_reshape();
      }
    };
    for (auto& input : *config->mutable_input()) {
      scalar(input, *FindSpec(signature.inputs, input.name()));
    }
    for (auto& output : *config->mutable_output()) {
      scalar(output, *FindSpec(signature.outputs, output.name()));
    }
  }

  FASTPATH_RETURN_IF_ERROR(ValidateCompletedModelConfig(*config));

  for (const auto& input : config->input()) {
    FASTPATH_RETURN_IF_ERROR(
        CheckAgainstModel("input", input, *FindSpec(signature.inputs, input.name()), max_batch_size));
  }
  for (const auto& output : config->output()) {
    FASTPATH_RETURN_IF_ERROR(CheckAgainstModel(
        "output", output, *FindSpec(signature.outputs, output.name()), max_batch_size));
  }
  return Status::Ok();
}

inference::ModelInstanceGroup DefaultInstanceGroup() {
  inference::ModelInstanceGroup group;
  group.set_kind(inference::ModelInstanceGroup::KIND_CPU);
  group.set_count(1);
  return group;
}

StatusOr<std::vector<int64_t>> SelectVersions(const inference::ModelVersionPolicy& policy,
                                              std::vector<int64_t> available) {
  std::sort(available.begin(), available.end());
  available.erase(std::unique(available.begin(), available.end()), available.end());
  const auto list = [](const std::vector<int64_t>& versions) {
    if (versions.empty()) return std::string("none");
    std::string out;
    for (const int64_t v : versions) out += (out.empty() ? "" : ", ") + std::to_string(v);
    return out;
  };

  if (policy.has_specific()) {
    std::vector<int64_t> wanted(policy.specific().versions().begin(),
                                policy.specific().versions().end());
    std::sort(wanted.begin(), wanted.end());
    wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
    if (wanted.empty()) return InvalidArgument("version_policy specific lists no version");
    for (const int64_t v : wanted) {
      if (!std::binary_search(available.begin(), available.end(), v)) {
        return NotFound("version " + std::to_string(v) +
                        " named by version_policy specific has no folder on disk (found: " +
                        list(available) + ")");
      }
    }
    return wanted;
  }
  if (available.empty()) {
    return NotFound("no numeric version folder found (a model holds <version>/model.onnx)");
  }
  if (policy.has_all()) return available;
  // latest, and the default when no policy is set.
  const size_t n = policy.has_latest() && policy.latest().num_versions() > 0
                       ? policy.latest().num_versions()
                       : 1;
  if (available.size() > n) available.erase(available.begin(), available.end() - n);
  return available;
}

}  // namespace fastpath::config
