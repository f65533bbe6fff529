// Ensembles (platform "ensemble"): a config whose ensemble_scheduling steps name other
// models of the repository and wire their inputs and outputs through ensemble tensor
// names. There is no model file; the version folder (e.g. 1/) is empty.
//
// Two checks, at two moments:
//   ValidateEnsembleGraph(config)          on the config alone (ValidateModelConfig calls
//                                          it for platform "ensemble"): the wiring.
//   ValidateEnsembleSteps(config, lookup)  at load time, against the completed configs of
//                                          the step models the repository has READY.
// Every message names the ensemble step ("step 2 (model 'cnn')") and the tensor.
//
// Pure functions; no I/O; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "fastpath/common/status.h"
#include "model_config.pb.h"

namespace fastpath::config {

inline constexpr std::string_view kEnsemblePlatform = "ensemble";

inline bool IsEnsemble(const inference::ModelConfig& config) {
  return config.platform() == kEnsemblePlatform;
}

// "step 2 (model 'cnn_classifier')": how every message names a step (1-based, as a user
// counts the entries of `step [ ... ]`).
std::string DescribeStep(const inference::ModelConfig& ensemble, int index);

// The wiring of an ensemble, on the config alone:
// - ensemble_scheduling is present with at least one step (and only with platform
//   "ensemble"); inputs and outputs are complete (data_type and dims: there is no model
//   file to complete them from); no instance_group, model_warmup, default_model_filename
//   or backend (the steps' models have those);
// - each step names a model (not the ensemble itself), a model_version >= -1, and maps
//   at least one output;
// - every ensemble input is read by some step and produced by none;
// - every tensor a step reads is an ensemble input or produced by a step;
// - every ensemble tensor is produced by at most one step output, and every ensemble
//   output by exactly one;
// - the steps form no cycle.
Status ValidateEnsembleGraph(const inference::ModelConfig& config);

// The completed config of a step's model: NotFound for an unknown model or version,
// Unavailable (with the reason) for one that is not READY. `version` -1: the highest
// READY version.
using StepModelLookup =
    std::function<StatusOr<inference::ModelConfig>(const std::string& model, int64_t version)>;

// Load-time checks against the step models (after ValidateEnsembleGraph):
// - each step's model is READY (the lookup's code is kept, so a step model that is not
//   ready makes the ensemble UNAVAILABLE with that reason);
// - a step model that batches allows at least the ensemble's max_batch_size;
// - input_map keys are inputs of the step model and cover its required inputs;
// - output_map keys are outputs of the step model;
// - every ensemble tensor has one datatype wherever it appears, and shapes that agree
//   where both sides fix a dim, compared with the batch dim (so a step that does not
//   batch may take [-1, d...] from a batching ensemble, but not [d...]).
Status ValidateEnsembleSteps(const inference::ModelConfig& config, const StepModelLookup& lookup);

// What completion means for an ensemble (there is no model file): the default
// version_policy, then ValidateCompletedModelConfig.
Status CompleteEnsembleConfig(inference::ModelConfig* config);

}  // namespace fastpath::config
