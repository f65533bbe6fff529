// The rollout gate in the server (issue 12 §2): a candidate version that passed the rest of
// its admission is compared with the version serving now, before it takes traffic. Both
// run the canaries' seeded requests in alternation, on one thread holding an instance of
// each (scheduler::Job::hold), timed by the model's execution only, so that user traffic
// queued on the serving version neither slows its measured runs nor joins them in a batch.
// admission/rollout_gate.h judges; a refusal keeps the serving version (the repository's
// KeepServing), with the figures side by side in the reason.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <thread>

#include "fastpath/admission/accuracy_guard.h"
#include "fastpath/common/log.h"
#include "fastpath/config/ensemble_config.h"
#include "fastpath/server/server_impl.h"

namespace fastpath::server {
namespace {

constexpr uint32_t kWarmupRounds = 2;
constexpr uint32_t kMostRoundsFactor = 10;
constexpr std::chrono::seconds kGatePhase{1};
constexpr int kMorePhases = 4;
// Each run's deadline in the serving version's queue, the whole comparison's budget, and the
// retries of a run answered Unavailable.
constexpr std::chrono::seconds kRunDeadline{30};
constexpr std::chrono::seconds kGateBudget{120};
// The whole comparison, further phases included: the load waits for it.
constexpr std::chrono::seconds kGateTotal{600};
constexpr int kAttempts = 4;
constexpr std::chrono::milliseconds kRetryPause{100};

double Ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

// The largest relative difference between the two sides' outputs of the same input, output
// by output (relative to max(1, |reference|): near zero the difference is absolute). An
// output of the serving version that the candidate lacks, or gives in another shape or
// datatype, changes the interface under its clients: an error, as a changed input is,
// whatever the tolerance.
StatusOr<std::pair<double, std::string>> Difference(const std::vector<Tensor>& candidate,
                                                    const std::vector<Tensor>& baseline) {
  double worst = 0;
  std::string where;
  for (const Tensor& b : baseline) {
    const Tensor* c = nullptr;
    for (const Tensor& t : candidate) {
      if (t.name == b.name) c = &t;
    }
    if (c == nullptr) {
      return FailedPrecondition("the candidate changes the interface: it has no output '" + b.name +
                                "', which the serving version gives");
    }
    if (c->shape != b.shape || c->dtype != b.dtype) {
      return FailedPrecondition("the candidate changes the interface: output '" + b.name + "' is " +
                                std::string(DataTypeName(c->dtype)) + " " +
                                ShapeToString(c->shape) + " where the serving version's is " +
                                std::string(DataTypeName(b.dtype)) + " " + ShapeToString(b.shape));
    }
    if (b.dtype == DataType::kBytes) {
      if (c->data != b.data) return std::make_pair(1.0, "output '" + b.name + "' differs");
      continue;
    }
    FASTPATH_ASSIGN_OR_RETURN(admission::OutputDeviation d,
                              admission::WorstDeviation(*c, b, /*relative_floor=*/1.0));
    if (std::isnan(d.difference)) {  // an infinite reference: say so, never "identical"
      return std::make_pair(1.0, "output '" + b.name + "' element " + std::to_string(d.index) +
                                     " is not comparable (an infinity)");
    }
    if (d.difference > worst) {
      worst = d.difference;
      where = "output '" + b.name + "' element " + std::to_string(d.index) + ": " +
              admission::FormatNumber(d.value) + " candidate, " +
              admission::FormatNumber(d.reference) + " serving";
    }
  }
  return std::make_pair(worst, where);
}

}  // namespace

Status Server::GateRollout(const std::filesystem::path& model_dir,
                           repository::ModelVersion& candidate,
                           const admission::GatePolicy& policy) {
  RolloutDecision decision;
  decision.model = candidate.model_name;
  decision.candidate_version = candidate.version;
  const std::string what =
      "model '" + candidate.model_name + "' version " + std::to_string(candidate.version);
  // Refused without a comparison: recorded, logged, and the reason returned with its code,
  // from which admission tells what may pass when tried again (the serving version too busy
  // to be timed, the server shutting down, out of memory) from the candidate's own fault (a
  // first phase past its budget included: minutes of runs are not worth repeating).
  auto not_measured = [&](const Status& why) {
    decision.outcome = RolloutDecision::Outcome::kNotMeasured;
    decision.detail = "rollout gate could not compare " + what + " with version " +
                      std::to_string(decision.baseline_version) + ": " + why.message();
    log::Warn("!!! " + decision.detail);
    RecordRollout(decision);
    return Status(why.code(), decision.detail);
  };
  // What it would take traffic from: the same version number reloaded, else the highest
  // version READY (the one a request without a version reaches today). Only a version that
  // can serve now is a baseline: one whose instances are all out of service, or an ensemble,
  // cannot be timed, and refusing its replacement for that would keep the broken one.
  //
  // Nor is a higher version whose folder left the disk: the candidate is a rollback from it
  // (a bad version 2 deleted in poll mode), and judging the version that comes back against
  // the one being removed would keep that one serving with its files gone. A lower version
  // gone from disk is still the baseline: replacing version 1's folder by version 2's is the
  // usual way to roll forward.
  std::shared_ptr<repository::ModelVersion> baseline;
  int64_t rolled_back_from = -1;
  for (auto& ready : repository_->ReadyVersions(candidate.model_name)) {
    if (!ready->scheduler || config::IsEnsemble(ready->config) ||
        !ready->scheduler->Health().ok()) {
      continue;
    }
    if (std::error_code ec; ready->version > candidate.version && !ready->folder.empty() &&
                            !std::filesystem::is_directory(ready->folder, ec)) {
      rolled_back_from = std::max(rolled_back_from, ready->version);
      continue;
    }
    if (ready->version == candidate.version) {
      baseline = ready;
      break;
    }
    if (!baseline || ready->version > baseline->version) baseline = ready;
  }
  if (!baseline) {
    decision.outcome = RolloutDecision::Outcome::kNoBaseline;
    // Recorded before the repository publishes: the load may still be dropped after this
    // (a folder that changed while it was read), so the text does not say traffic moved.
    decision.detail = "no version of '" + candidate.model_name + "' serves that can be timed" +
                      (rolled_back_from >= 0
                           ? " but version " + std::to_string(rolled_back_from) +
                                 ", whose folder left the disk (a rollback from it)"
                           : std::string()) +
                      ": nothing to compare with; the gate lets version " +
                      std::to_string(candidate.version) + " through";
    log::Info("rollout gate: " + decision.detail);
    RecordRollout(decision);
    return Status::Ok();
  }
  decision.baseline_version = baseline->version;

  admission::GateSamples samples;
  std::vector<Tensor> baseline_outputs, candidate_outputs;
  // The first phase must end within kGateBudget; each further one within twice as long as
  // the first took (at least kGateBudget), so that a slow model is measured further too.
  Clock::duration budget = kGateBudget;
  Clock::time_point gate_deadline = clock_->Now() + budget;
  // One round: an instance of the candidate held, then one of the serving version, and on
  // that thread each side runs its inputs, an untimed run then a timed one, serving first or
  // second. Answered Unavailable (a full queue, a queue-policy timeout, an instance
  // recovering), the round is tried again a few times: a busy serving version is not a
  // reason to refuse its replacement.
  //
  // Both sides run on one thread: ONNX Runtime's parallel sections run at the speed of how
  // the OS placed the calling thread beside the pool's, and on a busy machine a side timed
  // on a thread of its own read 1.6x apart for streaks of rounds (docs/rollouts.md). Holding
  // the serving instance keeps user batches off the cores while either side is timed.
  struct Side {
    scheduler::Job job;  // validated and reshaped for the side's config
    uint64_t ns = 0;
    std::vector<Tensor> outputs;
  };
  auto round = [&](Side& serving, Side& cand, bool serving_first) -> Status {
    auto time = [](backend::ModelInstance& instance, Side& side) -> Status {
      // The untimed run first: every timed run is of a runtime just used, whatever ran on
      // the instance before (ONNX Runtime's threads spin a while after a run and wake slowly
      // after that, and a new shape may grow the arena).
      FASTPATH_RETURN_IF_ERROR(
          instance.Run(side.job.request.inputs, side.job.output_names).status());
      const auto start = std::chrono::steady_clock::now();
      FASTPATH_ASSIGN_OR_RETURN(side.outputs,
                                instance.Run(side.job.request.inputs, side.job.output_names));
      side.ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now() - start)
                                          .count());
      return Status::Ok();
    };
    Status on_serving, on_candidate;
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      if (attempt > 0) std::this_thread::sleep_for(kRetryPause);
      const Clock::time_point deadline = clock_->Now() + kRunDeadline;
      on_serving = Status::Ok();
      // Each hold returns only its own instance's failure, so that the scheduler of the
      // instance that ran out of memory is the one that recovers it.
      on_candidate = HoldInstance(candidate, deadline, [&](backend::ModelInstance& c) {
        Status candidate_run;
        on_serving = HoldInstance(*baseline, deadline, [&](backend::ModelInstance& s) {
          for (int i = 0; i < 2; ++i) {
            if ((i == 0) == serving_first) {
              FASTPATH_RETURN_IF_ERROR(time(s, serving));
            } else {
              candidate_run = time(c, cand);
              if (!candidate_run.ok()) return Status::Ok();
            }
          }
          return Status::Ok();
        });
        return candidate_run;
      });
      const bool retry = on_serving.code() == StatusCode::kUnavailable ||
                         on_candidate.code() == StatusCode::kUnavailable;
      if (!retry || shutting_down_) break;
    }
    if (!on_serving.ok()) return on_serving.WithContext("on the serving version");
    // Only the serving version's being busy is no fault of the candidate's: the candidate
    // out of service is.
    if (on_candidate.code() == StatusCode::kUnavailable) {
      return FailedPrecondition("on the candidate: " + on_candidate.message());
    }
    if (!on_candidate.ok()) return on_candidate.WithContext("on the candidate");
    return Status::Ok();
  };
  // Both sides run the same request, built from the candidate's config: a candidate whose
  // inputs the serving version does not take changes the interface under its clients.
  auto measure = [&](uint32_t rows, std::vector<double>* a, std::vector<double>* b) -> Status {
    FASTPATH_ASSIGN_OR_RETURN(
        InferRequest request,
        admission::MakeSeededRequest(candidate.config, model_dir, rows, admission::kCanarySeed));
    auto serving_job = PrepareJob(*baseline, request);
    if (!serving_job.ok()) return serving_job.status().WithContext("on the serving version");
    auto candidate_job = PrepareJob(candidate, std::move(request));
    if (!candidate_job.ok()) return candidate_job.status().WithContext("on the candidate");
    Side serving, cand;
    serving.job = std::move(serving_job).value();
    cand.job = std::move(candidate_job).value();
    // Rounds 0 and 1 warm both sides up untimed (a fresh load grows its arena on its first
    // runs). Then at least policy.rounds are timed, and more while the phase has run for
    // less than kGatePhase: the p95 of 30 short runs is their second slowest, noise more
    // than a figure.
    const Clock::time_point began = clock_->Now();
    const uint32_t most = kWarmupRounds + policy.rounds * kMostRoundsFactor;
    for (uint32_t r = 0; r < most; ++r) {
      const bool timed = r >= kWarmupRounds;
      if (shutting_down_) return Unavailable("the server is shutting down");
      if (clock_->Now() > gate_deadline) {
        return DeadlineExceeded(
            "the comparison ran past its budget of " +
            std::to_string(std::chrono::duration_cast<std::chrono::seconds>(budget).count()) +
            " s");
      }
      if (timed && r >= kWarmupRounds + policy.rounds && clock_->Now() - began >= kGatePhase) {
        break;
      }
      // The order alternates, so neither side always runs on the caches the other warmed.
      FASTPATH_RETURN_IF_ERROR(round(serving, cand, /*serving_first=*/r % 2 == 0));
      if (!timed) continue;
      a->push_back(Ms(serving.ns));
      b->push_back(Ms(cand.ns));
      if (rows == 1 && r == kWarmupRounds) {
        baseline_outputs = std::move(serving.outputs);
        candidate_outputs = std::move(cand.outputs);
      }
    }
    return Status::Ok();
  };
  // The largest batch both sides take: a candidate that raises max_batch_size is timed
  // at the serving version's.
  const int max_batch =
      std::min(candidate.config.max_batch_size(), baseline->config.max_batch_size());
  // One phase: both batch sizes, appended to what earlier phases measured.
  auto phase = [&]() -> Status {
    FASTPATH_RETURN_IF_ERROR(measure(1, &samples.baseline_ms, &samples.candidate_ms));
    if (max_batch <= 1) return Status::Ok();
    samples.batch_rows = static_cast<uint64_t>(max_batch);
    return measure(static_cast<uint32_t>(max_batch), &samples.baseline_batch_ms,
                   &samples.candidate_batch_ms);
  };
  const Clock::time_point first_began = clock_->Now();
  if (Status s = phase(); !s.ok()) return not_measured(s);
  const Clock::duration first_phase = clock_->Now() - first_began;
  auto difference = Difference(candidate_outputs, baseline_outputs);
  if (!difference.ok()) return not_measured(difference.status());
  samples.output_difference = difference->first;
  samples.output_difference_detail = difference->second;

  admission::GateVerdict verdict = admission::JudgeGate(policy, samples);
  // A ratio past its tolerance whose interval still reaches back over it (a busy machine
  // widens the intervals) is measured further, up to kMorePhases: more rounds narrow the
  // interval until the verdict is clear one way or the other, where passing it at once would
  // let a slower candidate through on noise.
  // A further phase that runs out of its budget ends the measuring, not the decision: the
  // verdict is the one the rounds in hand give (an unclear one passes, with its interval).
  for (int more = 0; more < kMorePhases && admission::GateInconclusive(policy, verdict); ++more) {
    log::Info("rollout gate: " + what + " is not clear yet, measuring further: " + verdict.summary);
    budget = std::max<Clock::duration>(kGateBudget, 2 * first_phase);
    gate_deadline = std::min(clock_->Now() + budget, first_began + kGateTotal);
    const Status s = phase();
    verdict = admission::JudgeGate(policy, samples);
    if (s.code() == StatusCode::kDeadlineExceeded) {
      log::Warn("rollout gate: " + what + ": " + s.message() +
                "; judged on the rounds measured so far");
      break;
    }
    if (!s.ok()) return not_measured(s);
  }
  decision.outcome =
      verdict.passed ? RolloutDecision::Outcome::kPassed : RolloutDecision::Outcome::kRefused;
  decision.detail = "rollout gate " + verdict.summary + " (" + what + " against version " +
                    std::to_string(baseline->version) + ")";
  decision.verdict = std::move(verdict);
  const bool passed = decision.verdict->passed;
  if (passed) {
    log::Info(decision.detail);
  } else {
    log::Warn("!!! " + decision.detail);
  }
  std::string reason = decision.detail;
  RecordRollout(std::move(decision));
  if (passed) return Status::Ok();
  return FailedPrecondition(reason);
}

void Server::RecordRollout(RolloutDecision decision) {
  decision.unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  // The histories of models gone from the repository (removed from disk) go: they can no
  // longer be asked for. Their counts stay, as counters do.
  std::set<std::string> known;
  for (const RepositoryEntry& entry : repository_->Index(/*ready_only=*/false)) {
    known.insert(entry.name);
  }
  std::lock_guard lock(rollout_mu_);
  std::erase_if(rollouts_, [&](const auto& kept) {
    return kept.first != decision.model && known.count(kept.first) == 0;
  });
  ++rollout_counts_[{decision.model, RolloutOutcomeName(decision.outcome)}];
  std::deque<RolloutDecision>& history = rollouts_[decision.model];
  history.push_back(std::move(decision));
  while (history.size() > kRolloutHistory) history.pop_front();
}

StatusOr<std::vector<RolloutDecision>> Server::RolloutHistory(const std::string& name) const {
  bool known = false;
  for (const RepositoryEntry& entry : repository_->Index(/*ready_only=*/false)) {
    known = known || entry.name == name;
  }
  if (!known) return NotFound("model '" + name + "' is not in the repository");
  std::lock_guard lock(rollout_mu_);
  const auto it = rollouts_.find(name);
  if (it == rollouts_.end()) return std::vector<RolloutDecision>();
  return std::vector<RolloutDecision>(it->second.begin(), it->second.end());
}

}  // namespace fastpath::server
