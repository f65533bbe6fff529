// The repository's side of ensembles: loading a version (validating it against the step
// models that are READY now, and building its EnsembleScheduler), and keeping ensembles
// true to their step models as those load, reload and unload.
//
// Step models are looked up again for every request (through the step binder, when the
// request is accepted), so an ensemble runs on the step models' versions current then; what
// a reload of a step model changes here is only whether the ensemble is still valid, and
// so READY.
#include <algorithm>
#include <fstream>
#include <sstream>

#include "fastpath/common/log.h"
#include "fastpath/config/ensemble_config.h"
#include "fastpath/repository/model_repository.h"

namespace fastpath::repository {
namespace fs = std::filesystem;

StatusOr<std::shared_ptr<ModelVersion>> ModelRepository::LoadEnsembleVersion(
    const std::string& name, int64_t version, const inference::ModelConfig& base) const {
  auto runtime = std::make_shared<ModelVersion>();
  runtime->model_name = name;
  runtime->version = version;
  runtime->config = base;
  FASTPATH_RETURN_IF_ERROR(config::CompleteEnsembleConfig(&runtime->config));
  auto lookup = [this](const std::string& model,
                       int64_t step_version) -> StatusOr<inference::ModelConfig> {
    auto found = FindReady(model, step_version < 0 ? "" : std::to_string(step_version));
    if (!found.ok()) {
      // A step that failed its own load fails the ensemble's the same way: a broken file
      // (fix the step) or one that may pass when tried again (memory, a copy in progress,
      // instances out of service until memory frees), which stays UNAVAILABLE.
      if (found.status().code() == StatusCode::kUnavailable && !StepMayRecover(model)) {
        return FailedPrecondition(found.status().message());
      }
      return found.status();
    }
    return (*found)->config;
  };
  FASTPATH_RETURN_IF_ERROR(config::ValidateEnsembleSteps(runtime->config, lookup));

  scheduler::EnsemblePlan plan;
  plan.name = name;
  for (const auto& in : runtime->config.input()) plan.inputs.push_back(in.name());
  for (const auto& step : runtime->config.ensemble_scheduling().step()) {
    scheduler::EnsembleStep s;
    s.model_name = step.model_name();
    if (step.model_version() >= 0) s.model_version = std::to_string(step.model_version());
    s.inputs.assign(step.input_map().begin(), step.input_map().end());
    s.outputs.assign(step.output_map().begin(), step.output_map().end());
    plan.steps.push_back(std::move(s));
  }
  plan.shape_outputs = OutputShaperFor(runtime->config);
  FASTPATH_ASSIGN_OR_RETURN(auto ensemble,
                            scheduler::EnsembleScheduler::Create(std::move(plan), step_binder_,
                                                                 &runtime->stats, options_.clock));
  runtime->ensemble = ensemble.get();
  runtime->scheduler = std::move(ensemble);
  return runtime;
}

bool ModelRepository::StepMayRecover(const std::string& model) const {
  std::lock_guard lock(mu_);
  auto it = models_.find(model);
  if (it == models_.end()) return true;
  const ModelState& state = it->second;
  // Loaded, but no instance can serve now: they recover once memory frees.
  if (std::any_of(state.versions.begin(), state.versions.end(),
                  [](const VersionStatus& v) { return v.runtime != nullptr; })) {
    return true;
  }
  return LoadFailureCode(state) != StatusCode::kInvalidArgument;
}

std::vector<std::string> ModelRepository::StepModelsOnDisk(const std::string& name) const {
  const std::vector<fs::path> folders = FoldersOf(name);
  if (folders.size() != 1) return {};  // none, or not unique: it fails its own load
  std::ifstream in(folders[0] / "config.pbtxt", std::ios::binary);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  auto config = config::ParseModelConfig(text.str(), "config.pbtxt");
  if (!config.ok() || !config::IsEnsemble(*config)) return {};
  std::vector<std::string> steps;
  for (const auto& step : config->ensemble_scheduling().step()) {
    steps.push_back(step.model_name());
  }
  return steps;
}

void ModelRepository::IndexSteps(const std::string& name, const std::vector<std::string>& before,
                                 const std::vector<std::string>& after) {
  for (const std::string& step : before) {
    auto it = dependents_.find(step);
    if (it == dependents_.end()) continue;
    it->second.erase(name);
    if (it->second.empty()) dependents_.erase(it);
  }
  for (const std::string& step : after) dependents_[step].insert(name);
}

void ModelRepository::ReloadDependents(const std::string& name, std::set<std::string>* touched) {
  std::vector<std::string> dependents;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    if (auto it = dependents_.find(name); it != dependents_.end()) {
      for (const std::string& model : it->second) {
        if (touched->count(model) == 0) dependents.push_back(model);
      }
    }
  }
  for (const auto& ensemble : dependents) {
    if (touched->count(ensemble) > 0) continue;  // reloaded meanwhile, further down
    Revalidate(ensemble, touched);
  }
}

void ModelRepository::Revalidate(const std::string& ensemble, std::set<std::string>* touched) {
  touched->insert(ensemble);
  // The ensemble as it was loaded, not as its folder is now: an edit on disk is for its own
  // load (or the next poll, which sees it by the fingerprint kept here) to publish, with a
  // failure keeping what serves. A config that never parsed has nothing a step could mend.
  ModelState fresh;
  std::vector<int64_t> versions;
  {
    std::lock_guard lock(mu_);
    auto it = models_.find(ensemble);
    if (it == models_.end() || !it->second.config) return;
    const ModelState& loaded = it->second;
    fresh.dir = loaded.dir;
    fresh.folder = loaded.folder;
    fresh.config = loaded.config;
    fresh.parse_details = loaded.parse_details;
    fresh.overridden = loaded.overridden;
    fresh.fingerprint = loaded.fingerprint;
    fresh.reload_failure = loaded.reload_failure;
    fresh.step_models = loaded.step_models;
    fresh.loaded_as_step = loaded.loaded_as_step;
    for (const VersionStatus& v : loaded.versions) versions.push_back(v.version);
  }
  log::Info("re-validating ensemble '" + ensemble + "' after a change to one of its steps");
  LoadVersions(ensemble, versions, fresh, /*unchanged=*/{});
  // Published even when it fails: an ensemble whose step is gone cannot serve, whatever it
  // did before. Never loads a missing step model: after an explicit unload the ensemble must
  // turn UNAVAILABLE, not bring the model back.
  (void)Publish(ensemble, std::move(fresh), /*keep_serving=*/false, touched);
}

}  // namespace fastpath::repository
