// The canary phase of a rollout (issue 12 §2): after the gate lets a candidate through, with
// fastpath.rollout.canary_percent the repository sends it only that share of the requests
// for canary_duration_s, the load it replaces serving the rest (repository::CanaryPhase).
// Here the server watches both sides on the canary thread: their failures since the phase
// began, and their end-to-end latencies, judged by admission::JudgeCanary. A regression
// rolls the candidate back at once; at the end of the phase it is promoted.
#include <algorithm>

#include "fastpath/common/log.h"
#include "fastpath/server/server_impl.h"

namespace fastpath::server {
namespace {

// What a side counted since `start`.
admission::CanaryCounts Since(const repository::ModelVersion& version,
                              const ModelStatistics& start) {
  const ModelStatistics now = version.stats.Snapshot(version.model_name, "");
  auto failed = [](const ModelStatistics& s) {
    return s.failures[static_cast<size_t>(FailureReason::kBackend)] +
           s.failures[static_cast<size_t>(FailureReason::kOther)];
  };
  admission::CanaryCounts counts;
  counts.errors = failed(now) - failed(start);
  counts.requests =
      counts.errors + now.inference_stats.success.count - start.inference_stats.success.count;
  counts.latency_ms = version.stats.KeptLatenciesMs();
  return counts;
}

}  // namespace

void Server::WatchRollouts() {
  std::lock_guard lock(phases_mu_);
  const std::vector<repository::CanaryPhase> phases = repository_->Canaries();
  // Phases that ended otherwise (a later load, an unload) end in the history without a verdict.
  for (auto it = phases_.begin(); it != phases_.end();) {
    const bool live = std::any_of(phases.begin(), phases.end(), [&](const auto& p) {
      return p.candidate.get() == it->first && it->second.candidate.lock() == p.candidate;
    });
    if (live) {
      ++it;
      continue;
    }
    // It stops keeping latencies unless it is a side of a live phase: a load during the
    // phase starts a new one, in which the ended phase's candidate is the serving side.
    if (auto candidate = it->second.candidate.lock();
        candidate && std::none_of(phases.begin(), phases.end(), [&](const auto& p) {
          return p.stable == candidate || p.candidate == candidate;
        })) {
      candidate->stats.KeepLatencies(0);
    }
    RolloutDecision ended;
    ended.model = it->second.model;
    ended.candidate_version = it->second.candidate_version;
    ended.baseline_version = it->second.baseline_version;
    ended.outcome = RolloutDecision::Outcome::kEnded;
    ended.detail = "canary phase of model '" + ended.model + "' version " +
                   std::to_string(ended.candidate_version) +
                   " ended without a verdict: a later load or an unload replaced it, and the "
                   "load it was compared with is gone";
    log::Warn(ended.detail);
    RecordRollout(std::move(ended));
    it = phases_.erase(it);
  }
  for (const repository::CanaryPhase& phase : phases) {
    const std::string what =
        "model '" + phase.model + "' version " + std::to_string(phase.candidate->version);
    RolloutDecision decision;
    decision.model = phase.model;
    decision.candidate_version = phase.candidate->version;
    decision.baseline_version = phase.stable->version;
    auto [watch, began] = phases_.try_emplace(phase.candidate.get());
    if (began) {
      watch->second.candidate = phase.candidate;
      watch->second.model = phase.model;
      watch->second.candidate_version = phase.candidate->version;
      watch->second.baseline_version = phase.stable->version;
      decision.outcome = RolloutDecision::Outcome::kCanary;
      decision.detail =
          "canary phase of " + what + ": " + std::to_string(phase.percent) +
          "% of its requests for " +
          std::to_string(
              std::chrono::duration_cast<std::chrono::seconds>(phase.ends - phase.began).count()) +
          " s, the load it replaces (version " + std::to_string(phase.stable->version) +
          ") serving the rest";
      RecordRollout(decision);
    }
    // The tolerances are the candidate's, parsed when it was admitted.
    auto policy = admission::RolloutGateFor(phase.candidate->config);
    const admission::GatePolicy gate =
        policy.ok() && policy->has_value() ? **policy : admission::GatePolicy();
    const bool final = clock_->Now() >= phase.ends;
    admission::CanaryVerdict verdict =
        admission::JudgeCanary(gate, Since(*phase.stable, phase.stable_start),
                               Since(*phase.candidate, phase.candidate_start), final);
    if (verdict.call == admission::CanaryVerdict::Call::kContinue) continue;
    const bool promote = verdict.call == admission::CanaryVerdict::Call::kPromote;
    decision.detail = "canary phase of " + what + " against version " +
                      std::to_string(phase.stable->version) + " " + verdict.summary;
    if (Status ended =
            repository_->EndCanary(phase.model, phase.candidate.get(), promote, decision.detail);
        !ended.ok()) {
      continue;  // a load or an unload ended it meanwhile; forgotten next pass
    }
    // What serves from now on stops keeping latencies: the old load too when it serves its
    // own number still (kept unchanged beside the new one). Rolled back, the old load's
    // admission record (self-test, memory budget, canary probe) is shown again.
    phase.candidate->stats.KeepLatencies(0);
    phase.stable->stats.KeepLatencies(0);
    {
      std::lock_guard records(admission_mu_);
      const std::pair<std::string, int64_t> key = {phase.model, phase.stable->version};
      if (auto it = replaced_records_.find(key);
          it != replaced_records_.end() && it->second.runtime == phase.stable.get()) {
        if (!promote) admission_records_[key] = std::move(it->second);
        replaced_records_.erase(it);
      }
    }
    phases_.erase(phase.candidate.get());
    decision.outcome =
        promote ? RolloutDecision::Outcome::kPromoted : RolloutDecision::Outcome::kRolledBack;
    decision.canary = std::move(verdict);
    if (promote) {
      log::Info(decision.detail);
    } else {
      log::Warn("!!! " + decision.detail);
    }
    RecordRollout(std::move(decision));
  }
}

}  // namespace fastpath::server
