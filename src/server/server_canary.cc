// Canaries (issue 14 §6): a model that declares fastpath.canary.interval_s has its
// self-test's seeded request run every interval through the normal path (validation, its
// scheduler, its instances), counted apart from user traffic. Each run's outputs are
// compared with what the request answered at admission: a difference is numerical drift, a
// silent precision change or another engine. Its latency is compared with the median of its
// runs at admission. A canary unanswered for a minute is counted as a failure, and once more
// every minute it stays so: a hung execution must not silently stop the checks.
#include <algorithm>

#include "fastpath/admission/accuracy_guard.h"
#include "fastpath/common/log.h"
#include "fastpath/config/ensemble_config.h"
#include "fastpath/config/model_config.h"
#include "fastpath/server/server_impl.h"

namespace fastpath::server {
namespace {

constexpr int kReferenceRuns = 5;
constexpr size_t kRecentRuns = 5;
// The latency ratio's denominator at least this: below it a ratio is scheduling jitter.
constexpr double kMinReferenceMs = 0.1;
// A canary unanswered this long is a failure (an execution hangs or its queue does not
// move), and one more each time as long again passes: the failures keep counting while it
// hangs, so an alert on their increase holds. The next canary is sent only after it
// answers, so a hung path is not piled onto.
constexpr std::chrono::seconds kStuckAfter{60};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

bool IsFloat(DataType dtype) {
  return dtype == DataType::kFp16 || dtype == DataType::kBf16 || dtype == DataType::kFp32 ||
         dtype == DataType::kFp64;
}

// Empty when `got` matches `want` output by output: floating-point elements each within a
// relative 1e-5 of their own reference value (what reordering a float sum may change), every
// other datatype byte for byte. Otherwise the first difference.
std::string CompareOutputs(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  for (const Tensor& w : want) {
    const auto g =
        std::find_if(got.begin(), got.end(), [&](const Tensor& t) { return t.name == w.name; });
    if (g == got.end()) return "output '" + w.name + "' is missing";
    if (g->shape != w.shape || g->dtype != w.dtype) {
      return "output '" + w.name + "' changed its shape or datatype";
    }
    if (!IsFloat(w.dtype)) {
      if (g->data == w.data) continue;
      if (w.dtype == DataType::kBytes) return "output '" + w.name + "' differs";
    }
    auto worst = admission::WorstDeviation(*g, w, /*relative_floor=*/IsFloat(w.dtype) ? 1.0 : 0);
    if (!worst.ok()) return worst.status().message();
    if (!IsFloat(w.dtype) || worst->difference > 1e-5) {
      return "output '" + w.name + "' element " + std::to_string(worst->index) + ": " +
             admission::FormatNumber(worst->value) + " now, " +
             admission::FormatNumber(worst->reference) + " at admission";
    }
  }
  return "";
}

}  // namespace

void Server::SetUpCanary(const std::filesystem::path& model_dir, repository::ModelVersion& version,
                         AdmissionRecord* record) {
  const std::string what =
      "model '" + version.model_name + "' version " + std::to_string(version.version);
  auto interval = config::CanaryIntervalFor(version.config);  // validated with the config
  if (!interval.ok() || !*interval || !version.scheduler) return;
  if (config::IsEnsemble(version.config)) {
    log::Warn(what +
              ": no canary for an ensemble; declare fastpath.canary.interval_s on its "
              "step models");
    return;
  }
  auto canary = MakeCanary(model_dir, version, **interval);
  if (!canary.ok()) {
    log::Warn("!!! " + what + " serves without its canary: " + canary.status().message());
    return;
  }
  log::Info(what + ": canary every " + std::to_string(interval->value().count()) +
            " s, reference latency " + admission::FormatNumber((*canary)->reference_ms) + " ms");
  record->canary = std::move(canary).value();
}

StatusOr<std::shared_ptr<const Server::AdmissionRecord::Canary>> Server::MakeCanary(
    const std::filesystem::path& model_dir, repository::ModelVersion& version,
    std::chrono::seconds interval) {
  auto canary = std::make_shared<AdmissionRecord::Canary>();
  canary->interval = interval;
  FASTPATH_ASSIGN_OR_RETURN(
      canary->request,
      admission::MakeSeededRequest(version.config, model_dir, 1, admission::kCanarySeed));
  std::vector<double> ms;
  for (int i = 0; i < kReferenceRuns; ++i) {
    std::vector<Tensor> outputs;
    const Clock::time_point sent = clock_->Now();
    // As clients see them: the scheduler applies the config's output reshape.
    FASTPATH_RETURN_IF_ERROR(RunBlocking(version, canary->request, &outputs));
    ms.push_back(Ms(clock_->Now() - sent));
    if (i == 0) {
      canary->outputs = std::move(outputs);
    } else if (std::string differs = CompareOutputs(outputs, canary->outputs); !differs.empty()) {
      return FailedPrecondition(
          "the same input gave different outputs in two runs (" + differs +
          "): a canary could not tell drift from noise; make the model deterministic or remove "
          "fastpath.canary.interval_s");
    }
  }
  canary->reference_ms = Median(ms);
  return std::shared_ptr<const AdmissionRecord::Canary>(std::move(canary));
}

void Server::RunCanaries() {
  const Clock::time_point now = clock_->Now();
  const std::vector<std::shared_ptr<repository::ModelVersion>> serving = ServingVersions();
  {
    // Versions no longer served are forgotten.
    std::lock_guard lock(canary_mu_);
    for (auto it = canary_runs_.begin(); it != canary_runs_.end();) {
      const bool served = std::any_of(serving.begin(), serving.end(), [&](const auto& v) {
        return v->model_name == it->first.first && v->version == it->first.second;
      });
      it = served ? std::next(it) : canary_runs_.erase(it);
    }
  }
  for (const std::shared_ptr<repository::ModelVersion>& version : serving) {
    const auto key = std::make_pair(version->model_name, version->version);
    std::shared_ptr<const AdmissionRecord::Canary> canary;
    {
      std::lock_guard lock(admission_mu_);
      auto it = admission_records_.find(key);
      if (it != admission_records_.end() && it->second.runtime == version.get()) {
        canary = it->second.canary;
      }
    }
    if (!canary) continue;
    {
      std::lock_guard lock(canary_mu_);
      CanaryRuns& runs = canary_runs_[key];
      if (runs.runtime.lock() != version) {  // a new load: new runs, the first one interval on
        runs = CanaryRuns{};
        runs.runtime = version;
        runs.next_due = now + canary->interval;
        runs.status.interval_s = canary->interval.count();
        runs.status.reference_ms = canary->reference_ms;
        continue;
      }
      if (runs.in_flight) {
        if (now - runs.sent_at >= kStuckAfter * (runs.stuck_failures + 1)) {
          ++runs.stuck_failures;
          ++runs.status.failures;
          runs.status.last_problem =
              "the canary sent " +
              std::to_string(
                  static_cast<int64_t>(std::chrono::duration<double>(now - runs.sent_at).count())) +
              " s ago has not answered: an execution hangs or the model's queue does not move";
          if (runs.last_clean) {
            log::Warn("!!! model '" + key.first + "' version " + std::to_string(key.second) + ": " +
                      runs.status.last_problem);
          }
          runs.last_clean = false;
        }
        continue;
      }
      if (now < runs.next_due) continue;
      runs.in_flight = true;
      runs.sent_at = now;
      runs.next_due += canary->interval;  // on schedule; a pass that fell behind skips ahead
      if (runs.next_due <= now) runs.next_due = now + canary->interval;
    }
    InferRequest request = canary->request;
    request.model_name = version->model_name;
    request.model_version = std::to_string(version->version);
    RunOnModel(
        std::move(request),
        [this, key, version, canary, sent = clock_->Now()](StatusOr<InferResponse> result) {
          const double ms = Ms(clock_->Now() - sent);
          std::string problem;
          if (!result.ok()) {
            problem = "the canary failed: " + result.status().message();
          } else if (std::string differs = CompareOutputs(result->outputs, canary->outputs);
                     !differs.empty()) {
            problem = "the canary's outputs differ from admission's: " + differs +
                      " (numerical drift, a silent precision change or another engine)";
          }
          std::lock_guard lock(canary_mu_);
          auto it = canary_runs_.find(key);
          if (it == canary_runs_.end() || it->second.runtime.lock() != version) return;
          CanaryRuns& runs = it->second;
          runs.in_flight = false;
          const bool counted_failed = runs.stuck_failures > 0;  // a late failure is counted
          runs.stuck_failures = 0;
          ++runs.status.runs;
          if (!problem.empty()) {
            if (result.ok()) {
              ++runs.status.mismatches;
            } else if (!counted_failed) {
              ++runs.status.failures;
            }
            // Once per episode: the first problem after a clean run.
            if (runs.last_clean) {
              log::Warn("!!! model '" + key.first + "' version " + std::to_string(key.second) +
                        ": " + problem);
            }
            runs.status.last_problem = problem;
          }
          runs.last_clean = problem.empty();
          if (result.ok()) {
            runs.recent_ms.push_back(ms);
            if (runs.recent_ms.size() > kRecentRuns) runs.recent_ms.pop_front();
            runs.status.latency_ratio = Median({runs.recent_ms.begin(), runs.recent_ms.end()}) /
                                        std::max(canary->reference_ms, kMinReferenceMs);
          }
        },
        /*canary=*/true);
  }
}

std::optional<admission::CanaryStatus> Server::CanaryOf(const std::string& model,
                                                        int64_t version) const {
  std::lock_guard lock(canary_mu_);
  auto it = canary_runs_.find({model, version});
  if (it == canary_runs_.end()) return std::nullopt;
  return it->second.status;
}

}  // namespace fastpath::server
