// The canary phase of a rollout (issue 12 §2; model_repository.h CanaryPhase): a new load
// published in place of a serving one first gets a share of that one's requests, the old
// load serving the rest beside it, until the server promotes it or rolls it back.
#include <algorithm>

#include "fastpath/common/log.h"
#include "fastpath/config/ensemble_config.h"
#include "fastpath/repository/model_repository.h"

namespace fastpath::repository {

void ModelRepository::StartCanary(const std::string& name, ModelState& given_up,
                                  ModelState& fresh) const {
  // What a request without a version reaches from now on, and before.
  auto top = [](ModelState& state) -> VersionStatus* {
    for (auto v = state.versions.rbegin(); v != state.versions.rend(); ++v) {
      if (v->runtime) return &*v;
    }
    return nullptr;
  };
  VersionStatus* next = top(fresh);
  const ModelVersion::CanaryPlan plan =
      next ? next->runtime->canary_plan : ModelVersion::CanaryPlan();
  // Each plan is for the publish that follows its admission: a load kept from before has
  // had its phase.
  for (VersionStatus& v : fresh.versions) {
    if (v.runtime) v.runtime->canary_plan = {};
  }
  if (plan.percent == 0) return;
  VersionStatus* before = top(given_up);
  // Nothing served it (a first load), or what served is gone from disk with a higher
  // number (then nothing the new load replaces served the same requests).
  if (before == nullptr || before->version > next->version) return;
  std::shared_ptr<ModelVersion>& stable = before->runtime;
  if (!stable->scheduler || config::IsEnsemble(stable->config) ||
      !stable->scheduler->Health().ok()) {
    log::Warn("model '" + name + "' version " + std::to_string(next->version) +
              ": no canary phase, the load it replaces cannot serve the rest of the requests; "
              "traffic moves at once");
    return;
  }
  Clock* clock = OrSteadyClock(options_.clock);
  auto canary = std::make_shared<ModelState::Canary>();
  canary->phase.model = name;
  canary->phase.candidate = next->runtime;
  canary->phase.percent = plan.percent;
  canary->phase.began = clock->Now();
  canary->phase.ends = canary->phase.began + plan.duration;
  canary->phase.stable = std::move(stable);  // out of given_up: it is not retired
  canary->phase.stable_start = canary->phase.stable->stats.Snapshot(name, "");
  canary->phase.candidate_start = canary->phase.candidate->stats.Snapshot(name, "");
  canary->phase.stable->stats.KeepLatencies(kCanaryKeptLatencies * (100 - plan.percent) / 100);
  canary->phase.candidate->stats.KeepLatencies(kCanaryKeptLatencies * plan.percent / 100);
  log::Info("model '" + name + "' version " + std::to_string(next->version) +
            ": canary phase: " + std::to_string(plan.percent) + "% of its requests for " +
            std::to_string(plan.duration.count()) + " s, the previous load (version " +
            std::to_string(canary->phase.stable->version) + ") serving the rest");
  fresh.canary = std::move(canary);
}

StatusOr<std::shared_ptr<ModelVersion>> ModelRepository::Route(const std::string& name,
                                                               const std::string& version) const {
  std::lock_guard lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return NotFound("unknown model '" + name + "'");
  const ModelState& state = it->second;
  StatusOr<std::shared_ptr<ModelVersion>> found = FindLocked(name, state, version);
  if (!state.canary) return found;
  const CanaryPhase& phase = state.canary->phase;
  const bool same_number = phase.stable->version == phase.candidate->version;
  if (!found.ok()) {
    // The old load's number is no longer published (a version policy that keeps one), or
    // the new load cannot serve (its instances out of service): the requests that reached
    // the old load still do.
    if ((version.empty() || version == std::to_string(phase.stable->version)) &&
        phase.stable->scheduler->Health().ok()) {
      return phase.stable;
    }
    return found;
  }
  // Only the requests that reached the old load are split: those without a version, and
  // those naming its number. A request that names the new version gets it.
  if (found->get() != phase.candidate.get() || (!version.empty() && !same_number)) return found;
  const uint64_t n = state.canary->routed.fetch_add(1, std::memory_order_relaxed);
  // Request n goes to the candidate when floor((n + 1) * p / 100) steps up: p of every 100,
  // evenly spread.
  const bool to_candidate = ((n + 1) * phase.percent) / 100 != (n * phase.percent) / 100;
  if (to_candidate || !phase.stable->scheduler->Health().ok()) return found;
  return phase.stable;
}

std::vector<CanaryPhase> ModelRepository::Canaries() const {
  std::vector<CanaryPhase> out;
  std::lock_guard lock(mu_);
  for (const auto& [name, state] : models_) {
    if (state.canary) out.push_back(state.canary->phase);
  }
  return out;
}

Status ModelRepository::EndCanary(const std::string& name, const ModelVersion* candidate,
                                  bool promote, const std::string& why) {
  std::vector<std::shared_ptr<ModelVersion>> retire;
  {
    std::lock_guard lock(mu_);
    auto it = models_.find(name);
    if (it == models_.end() || !it->second.canary ||
        it->second.canary->phase.candidate.get() != candidate) {
      return NotFound("model '" + name + "' has no such canary phase (a later load ended it)");
    }
    ModelState& state = it->second;
    CanaryPhase phase = std::move(state.canary->phase);
    state.canary.reset();
    // The old load may serve its own number too (a version kept unchanged beside the new
    // one): then it stays.
    const bool published =
        std::any_of(state.versions.begin(), state.versions.end(),
                    [&](const VersionStatus& v) { return v.runtime == phase.stable; });
    if (promote) {
      if (!published) retire.push_back(std::move(phase.stable));
    } else {
      retire.push_back(phase.candidate);
      const int64_t number = phase.stable->version;
      if (phase.candidate->version != number) {
        // A new version number leaves the index, as a refused load does (KeepServing): it
        // never served alone, and an UNAVAILABLE entry would take readiness down while the
        // old version serves. The reason is the model's.
        std::erase_if(state.versions,
                      [&](const VersionStatus& v) { return v.runtime == phase.candidate; });
        state.reload_failure = why;
      }
      auto slot = std::find_if(state.versions.begin(), state.versions.end(),
                               [&](const VersionStatus& v) { return v.version == number; });
      if (slot == state.versions.end()) {
        // Its number was no longer published: it is again.
        VersionStatus v;
        v.version = number;
        v.state = server::ModelState::kReady;
        v.runtime = std::move(phase.stable);
        const auto at = std::find_if(state.versions.begin(), state.versions.end(),
                                     [&](const VersionStatus& s) { return s.version > number; });
        state.versions.insert(at, std::move(v));
      } else if (!slot->runtime || slot->runtime == phase.candidate) {
        slot->runtime = std::move(phase.stable);
        slot->state = server::ModelState::kReady;
        slot->reason = slot->version == phase.candidate->version ? why : "";
      } else if (!published) {
        retire.push_back(std::move(phase.stable));  // a newer load of its number serves
      }
    }
  }
  Retire(std::move(retire));
  log::Info("model '" + name + "': canary phase " + (promote ? "promoted: " : "rolled back: ") +
            why);
  return Status::Ok();
}

}  // namespace fastpath::repository
