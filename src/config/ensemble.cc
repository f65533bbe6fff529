// Ensemble config checks: the wiring (ValidateEnsembleGraph) and the agreement with the
// step models (ValidateEnsembleSteps).
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fastpath/config/ensemble_config.h"
#include "fastpath/config/model_config.h"
#include "internal.h"

namespace fastpath::config {
namespace {

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

// Where an ensemble tensor comes from: an ensemble input, or step `step`'s output.
struct Producer {
  int step = -1;  // -1: an ensemble input
  std::string model_output;
};

// Finds one cycle among `remaining` steps (each depends on `deps`) and spells it
// "step 1 (model 'a') -> step 2 (model 'b') -> step 1 (model 'a')".
std::string DescribeCycle(const inference::ModelConfig& config,
                          const std::vector<std::set<int>>& deps, const std::set<int>& remaining) {
  // Every remaining step has a remaining dependency (otherwise Kahn would have taken it),
  // so walking dependencies from any of them must revisit a step.
  std::vector<int> path;
  std::map<int, size_t> position;
  int current = *remaining.begin();
  while (position.find(current) == position.end()) {
    position[current] = path.size();
    path.push_back(current);
    int next = -1;
    for (const int d : deps[current]) {
      if (remaining.count(d) > 0) {
        next = d;
        break;
      }
    }
    if (next < 0) break;  // cannot happen; keep the message finite anyway
    current = next;
  }
  std::string out;
  const size_t start = position.count(current) > 0 ? position[current] : 0;
  for (size_t i = start; i < path.size(); ++i) out += DescribeStep(config, path[i]) + " -> ";
  return out + DescribeStep(config, path[start]);
}

// A tensor's datatype and shape as one side (the ensemble or a step model) declares it.
struct TensorView {
  inference::DataType type = inference::TYPE_INVALID;
  std::vector<int64_t> dims;       // without the batch dim
  std::vector<int64_t> full_dims;  // with -1 prepended when that side batches
  std::string source;              // "ensemble input 'x'", "step 1 (model 'm') output 'y'"
};

TensorView MakeView(const google::protobuf::RepeatedField<int64_t>& dims, inference::DataType type,
                    bool batching, std::string source) {
  TensorView view;
  view.type = type;
  view.dims.assign(dims.begin(), dims.end());
  if (batching) view.full_dims.push_back(-1);
  view.full_dims.insert(view.full_dims.end(), dims.begin(), dims.end());
  view.source = std::move(source);
  return view;
}

bool DimsAgree(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != -1 && b[i] != -1 && a[i] != b[i]) return false;
  }
  return true;
}

Status CheckConsistent(const std::string& ensemble, const std::string& tensor, const TensorView& a,
                       const TensorView& b) {
  const std::string what = "ensemble " + Quoted(ensemble) + ", tensor " + Quoted(tensor) + ": ";
  if (a.type != b.type) {
    return InvalidArgument(what + a.source + " is " + inference::DataType_Name(a.type) + " but " +
                           b.source + " is " + inference::DataType_Name(b.type));
  }
  // Full shapes, batch dim included: a step that does not batch may take [-1, d...] from
  // an ensemble that does (its dims then spell the -1), but never [d...], since the
  // tensor it gets has the batch dim.
  if (!DimsAgree(a.full_dims, b.full_dims)) {
    return InvalidArgument(what + a.source + " has shape " + ShapeToString(a.full_dims) + " but " +
                           b.source + " has shape " + ShapeToString(b.full_dims));
  }
  return Status::Ok();
}

// The models from `ensemble`, a step of the ensemble `name`, down to a step that is `name`
// again ("b -> a"), through the ensembles among its steps as `lookup` finds them now; empty
// when none leads back. Each ensemble is walked once (`walked`).
std::string PathBackTo(const std::string& name, const inference::ModelConfig& ensemble,
                       const StepModelLookup& lookup, std::set<std::string>* walked) {
  if (!IsEnsemble(ensemble) || !walked->insert(ensemble.name()).second) return "";
  for (const auto& step : ensemble.ensemble_scheduling().step()) {
    if (step.model_name() == name) return ensemble.name() + " -> " + name;
    auto found = lookup(step.model_name(), step.model_version());
    if (!found.ok()) continue;  // not there: nothing runs through it
    std::string rest = PathBackTo(name, *found, lookup, walked);
    if (!rest.empty()) return ensemble.name() + " -> " + rest;
  }
  return "";
}

}  // namespace

std::string DescribeStep(const inference::ModelConfig& ensemble, int index) {
  std::string model;
  if (index >= 0 && index < ensemble.ensemble_scheduling().step_size()) {
    model = ensemble.ensemble_scheduling().step(index).model_name();
  }
  return "step " + std::to_string(index + 1) + " (model " + Quoted(model) + ")";
}

Status ValidateEnsembleGraph(const inference::ModelConfig& config) {
  if (!IsEnsemble(config)) {
    if (config.has_ensemble_scheduling()) {
      return InvalidArgument("ensemble_scheduling needs platform: \"ensemble\" (platform is '" +
                             config.platform() + "')");
    }
    return Status::Ok();
  }
  if (!config.backend().empty()) {
    return InvalidArgument("an ensemble has no backend of its own (backend is '" +
                           config.backend() + "'); its steps' models have theirs");
  }
  if (config.instance_group_size() > 0) {
    return InvalidArgument(
        "an ensemble has no instance_group: its steps run on their own models' instances "
        "(scale those instead)");
  }
  if (config.model_warmup_size() > 0) {
    return InvalidArgument("an ensemble takes no model_warmup; warm up its steps' models");
  }
  if (!config.default_model_filename().empty()) {
    return InvalidArgument("an ensemble has no model file, so no default_model_filename ('" +
                           config.default_model_filename() + "')");
  }
  if (!config.has_ensemble_scheduling() || config.ensemble_scheduling().step_size() == 0) {
    return InvalidArgument(
        "platform \"ensemble\" needs ensemble_scheduling { step [ ... ] } with at least one "
        "step");
  }
  if (config.input_size() == 0) return InvalidArgument("an ensemble needs at least one input");
  if (config.output_size() == 0) return InvalidArgument("an ensemble needs at least one output");
  // Nothing completes an ensemble's entries: they must be written out.
  for (const auto& in : config.input()) {
    if (in.data_type() == inference::TYPE_INVALID || (in.dims().empty() && !in.has_reshape())) {
      return InvalidArgument("ensemble input '" + in.name() +
                             "': write data_type and dims (an ensemble has no model file to "
                             "complete them from)");
    }
  }
  for (const auto& out : config.output()) {
    if (out.data_type() == inference::TYPE_INVALID || (out.dims().empty() && !out.has_reshape())) {
      return InvalidArgument("ensemble output '" + out.name() +
                             "': write data_type and dims (an ensemble has no model file to "
                             "complete them from)");
    }
  }

  const auto& steps = config.ensemble_scheduling().step();
  std::map<std::string, Producer> producers;
  std::set<std::string> inputs;
  for (const auto& in : config.input()) {
    inputs.insert(in.name());
    producers[in.name()] = Producer{};
  }
  for (int i = 0; i < steps.size(); ++i) {
    const auto& step = steps[i];
    const std::string what = DescribeStep(config, i);
    if (step.model_name().empty()) {
      return InvalidArgument("step " + std::to_string(i + 1) + ": model_name is empty");
    }
    if (!internal::IsPlainName(step.model_name())) {
      return InvalidArgument(what +
                             ": model_name must not contain '/', '\\' or control "
                             "characters");
    }
    if (!config.name().empty() && step.model_name() == config.name()) {
      return InvalidArgument(what + ": an ensemble cannot run itself");
    }
    if (step.model_version() < -1) {
      return InvalidArgument(what + ": model_version " + std::to_string(step.model_version()) +
                             " must be -1 (the latest ready version) or a version number");
    }
    if (step.output_map().empty()) {
      return InvalidArgument(what + ": output_map is empty, so the step's results go nowhere");
    }
    for (const auto& [model_input, tensor] : step.input_map()) {
      if (model_input.empty() || tensor.empty()) {
        return InvalidArgument(what + ": input_map has an empty key or value ('" + model_input +
                               "' -> '" + tensor + "')");
      }
    }
    // Map keys are unique, values need not be: sort for stable messages.
    std::vector<std::pair<std::string, std::string>> outputs(step.output_map().begin(),
                                                             step.output_map().end());
    std::sort(outputs.begin(), outputs.end());
    for (const auto& [model_output, tensor] : outputs) {
      if (model_output.empty() || tensor.empty()) {
        return InvalidArgument(what + ": output_map has an empty key or value ('" + model_output +
                               "' -> '" + tensor + "')");
      }
      auto [it, inserted] = producers.emplace(tensor, Producer{i, model_output});
      if (inserted) continue;
      if (it->second.step < 0) {
        return InvalidArgument(what + ": output '" + model_output + "' writes ensemble tensor '" +
                               tensor + "', which is an ensemble input");
      }
      return InvalidArgument("ensemble tensor '" + tensor + "' is produced twice: by " +
                             DescribeStep(config, it->second.step) + " output '" +
                             it->second.model_output + "' and by " + what + " output '" +
                             model_output + "'");
    }
  }

  // Every read tensor has a producer; every ensemble input is read.
  std::set<std::string> read;
  std::vector<std::set<int>> deps(steps.size());
  for (int i = 0; i < steps.size(); ++i) {
    std::vector<std::pair<std::string, std::string>> ins(steps[i].input_map().begin(),
                                                         steps[i].input_map().end());
    std::sort(ins.begin(), ins.end());
    for (const auto& [model_input, tensor] : ins) {
      read.insert(tensor);
      auto it = producers.find(tensor);
      if (it == producers.end()) {
        return InvalidArgument(DescribeStep(config, i) + ": input '" + model_input +
                               "' reads ensemble tensor '" + tensor +
                               "', which is neither an ensemble input nor any step's output");
      }
      if (it->second.step >= 0) deps[i].insert(it->second.step);
    }
  }
  for (const auto& in : config.input()) {
    if (read.count(in.name()) == 0) {
      return InvalidArgument("ensemble input '" + in.name() + "' is not read by any step");
    }
  }
  std::set<std::string> outputs;
  for (const auto& out : config.output()) {
    auto it = producers.find(out.name());
    if (it == producers.end() || it->second.step < 0) {
      return InvalidArgument("ensemble output '" + out.name() +
                             "' is not produced by any step (map a step output to it in "
                             "output_map)");
    }
    outputs.insert(out.name());
  }
  // As Triton refuses it: a step output nothing reads is a wiring mistake, and its step
  // would still run on every request (and fail requests whose outputs need none of it).
  for (const auto& [tensor, producer] : producers) {
    if (producer.step >= 0 && read.count(tensor) == 0 && outputs.count(tensor) == 0) {
      const bool only = steps[producer.step].output_map_size() == 1;
      return InvalidArgument(
          "ensemble tensor '" + tensor + "' (" + DescribeStep(config, producer.step) + " output '" +
          producer.model_output + "') is unused: no step reads it and it is no ensemble output (" +
          (only ? "it is the step's only output: remove the step"
                : "leave the step output out of output_map") +
          ")");
    }
  }

  // Kahn's algorithm: what cannot be ordered is on (or behind) a cycle.
  std::set<int> remaining;
  for (int i = 0; i < steps.size(); ++i) remaining.insert(i);
  bool progress = true;
  while (progress && !remaining.empty()) {
    progress = false;
    for (auto it = remaining.begin(); it != remaining.end();) {
      const bool ready = std::none_of(deps[*it].begin(), deps[*it].end(),
                                      [&](int d) { return remaining.count(d) > 0; });
      if (ready) {
        it = remaining.erase(it);
        progress = true;
      } else {
        ++it;
      }
    }
  }
  if (!remaining.empty()) {
    return InvalidArgument(
        "ensemble steps form a cycle: " + DescribeCycle(config, deps, remaining) +
        " (each needs a tensor the next one produces)");
  }
  return Status::Ok();
}

Status ValidateEnsembleSteps(const inference::ModelConfig& config, const StepModelLookup& lookup) {
  FASTPATH_RETURN_IF_ERROR(ValidateEnsembleGraph(config));
  if (!IsEnsemble(config)) return Status::Ok();
  const std::string& name = config.name();
  const bool batching = config.max_batch_size() > 0;

  std::map<std::string, TensorView> seen;
  auto meet = [&](const std::string& tensor, TensorView view) -> Status {
    auto [it, inserted] = seen.emplace(tensor, view);
    if (inserted) return Status::Ok();
    return CheckConsistent(name, tensor, it->second, view);
  };
  for (const auto& in : config.input()) {
    const auto& dims = in.has_reshape() ? in.reshape().shape() : in.dims();
    FASTPATH_RETURN_IF_ERROR(meet(
        in.name(), MakeView(dims, in.data_type(), batching, "ensemble input '" + in.name() + "'")));
  }
  for (const auto& out : config.output()) {
    const auto& dims = out.has_reshape() ? out.reshape().shape() : out.dims();
    FASTPATH_RETURN_IF_ERROR(meet(out.name(), MakeView(dims, out.data_type(), batching,
                                                       "ensemble output '" + out.name() + "'")));
  }

  const auto& steps = config.ensemble_scheduling().step();
  for (int i = 0; i < steps.size(); ++i) {
    const auto& step = steps[i];
    const std::string what = DescribeStep(config, i);
    auto found = lookup(step.model_name(), step.model_version());
    if (!found.ok()) {
      std::string hint;
      if (step.model_version() == 0 && found.status().code() == StatusCode::kNotFound) {
        hint = " (model_version is 0 when not written; write model_version: -1 for the latest)";
      }
      return Status(found.status().code(),
                    "ensemble '" + name + "' " + what + ": " + found.status().message() + hint);
    }
    const inference::ModelConfig& model = *found;
    // A request would run the ensembles in a ring for ever (one reloaded to name as its
    // step an ensemble that runs it).
    std::set<std::string> walked;
    if (std::string ring = PathBackTo(name, model, lookup, &walked); !ring.empty()) {
      return InvalidArgument("ensemble '" + name + "' " + what + " runs '" + name + "' again (" +
                             name + " -> " + ring + "): an ensemble cannot run itself");
    }
    const bool step_batching = model.max_batch_size() > 0;
    if (step_batching && model.max_batch_size() < config.max_batch_size()) {
      return InvalidArgument("ensemble '" + name + "' allows batches of " +
                             std::to_string(config.max_batch_size()) + " but " + what +
                             " allows only " + std::to_string(model.max_batch_size()) +
                             " (lower the ensemble's max_batch_size)");
    }
    std::vector<std::pair<std::string, std::string>> ins(step.input_map().begin(),
                                                         step.input_map().end());
    std::sort(ins.begin(), ins.end());
    for (const auto& [model_input, tensor] : ins) {
      const inference::ModelInput* in = FindInput(model, model_input);
      if (in == nullptr) {
        std::string names;
        for (const auto& mi : model.input())
          names += (names.empty() ? "'" : ", '") + mi.name() + "'";
        return InvalidArgument("ensemble '" + name + "' " + what + ": input_map names input '" +
                               model_input +
                               "', which the model does not have (its inputs: " + names + ")");
      }
      FASTPATH_RETURN_IF_ERROR(meet(tensor, MakeView(in->dims(), in->data_type(), step_batching,
                                                     what + " input '" + model_input + "'")));
    }
    for (const auto& in : model.input()) {
      if (!in.optional() && step.input_map().count(in.name()) == 0) {
        return InvalidArgument("ensemble '" + name + "' " + what + ": the model's input '" +
                               in.name() +
                               "' is not in input_map (every required input must "
                               "be fed from an ensemble tensor)");
      }
    }
    std::vector<std::pair<std::string, std::string>> outs(step.output_map().begin(),
                                                          step.output_map().end());
    std::sort(outs.begin(), outs.end());
    for (const auto& [model_output, tensor] : outs) {
      const inference::ModelOutput* out = FindOutput(model, model_output);
      if (out == nullptr) {
        std::string names;
        for (const auto& mo : model.output())
          names += (names.empty() ? "'" : ", '") + mo.name() + "'";
        return InvalidArgument("ensemble '" + name + "' " + what + ": output_map names output '" +
                               model_output +
                               "', which the model does not have (its outputs: " + names + ")");
      }
      FASTPATH_RETURN_IF_ERROR(meet(tensor, MakeView(out->dims(), out->data_type(), step_batching,
                                                     what + " output '" + model_output + "'")));
    }
  }
  return Status::Ok();
}

Status CompleteEnsembleConfig(inference::ModelConfig* config) {
  if (config == nullptr) return Internal("CompleteEnsembleConfig: config is null");
  if (!config->has_version_policy()) {
    config->mutable_version_policy()->mutable_latest()->set_num_versions(1);
  }
  return ValidateCompletedModelConfig(*config);
}

}  // namespace fastpath::config
