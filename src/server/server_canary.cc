// Canaries (issue 14 §6): a model that declares fastpath.canary.interval_s has its
// self-test's seeded request run every interval through the normal path (validation, its
// scheduler, its instances), counted apart from user traffic. Each run's outputs are
// compared with what the request answered at admission: a difference is numerical drift, a
// silent precision change or another engine. Its latency is compared with the median of its
// runs at admission.
#include <algorithm>

#include "fastpath/admission/accuracy_guard.h"
#include "fastpath/common/log.h"
#include "fastpath/config/model_config.h"
#include "fastpath/server/server_impl.h"

namespace fastpath::server {
namespace {

constexpr int kReferenceRuns = 5;
constexpr size_t kRecentRuns = 5;
constexpr uint64_t kSeed = 0x63616e617279;  // "canary"

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Empty when `got` matches `want` output by output, element by element, within a relative
// 1e-5 (what reordering a float sum may change); otherwise the first difference.
std::string CompareOutputs(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  for (const Tensor& w : want) {
    const auto g = std::find_if(got.begin(), got.end(),
                                [&](const Tensor& t) { return t.name == w.name; });
    if (g == got.end()) return "output '" + w.name + "' is missing";
    if (g->shape != w.shape || g->dtype != w.dtype) {
      return "output '" + w.name + "' changed its shape or datatype";
    }
    if (w.dtype == DataType::kBytes) {
      if (g->data != w.data) return "output '" + w.name + "' differs";
      continue;
    }
    auto worst = admission::WorstDeviation(*g, w);
    if (!worst.ok()) return worst.status().message();
    if (worst->difference > 1e-5 * std::max(1.0, std::abs(worst->reference))) {
      return "output '" + w.name + "' element " + std::to_string(worst->index) + ": " +
             admission::FormatNumber(worst->value) + " now, " +
             admission::FormatNumber(worst->reference) + " at admission";
    }
  }
  return "";
}

}  // namespace

Status Server::SetUpCanary(const std::filesystem::path& model_dir,
                           repository::ModelVersion& version, AdmissionRecord* record) {
  FASTPATH_ASSIGN_OR_RETURN(const std::optional<std::chrono::seconds> interval,
                            config::CanaryIntervalFor(version.config));
  if (!interval || !version.scheduler) return Status::Ok();
  auto canary = std::make_shared<AdmissionRecord::Canary>();
  canary->interval = *interval;
  FASTPATH_ASSIGN_OR_RETURN(canary->request,
                            admission::MakeSeededRequest(version.config, model_dir, 1, kSeed));
  std::vector<double> ms;
  for (int i = 0; i < kReferenceRuns; ++i) {
    std::vector<Tensor> outputs;
    const Clock::time_point sent = clock_->Now();
    FASTPATH_RETURN_IF_ERROR(RunBlocking(version, canary->request, &outputs));
    ms.push_back(Ms(clock_->Now() - sent));
    if (i == 0) {
      canary->outputs = std::move(outputs);
    } else if (std::string differs = CompareOutputs(outputs, canary->outputs); !differs.empty()) {
      return FailedPrecondition(
          "the same input gave different outputs in two runs (" + differs +
          "): a canary could not tell drift from noise; remove fastpath.canary.interval_s or make "
          "the model deterministic");
    }
  }
  canary->reference_ms = Median(ms);
  log::Info("model '" + version.model_name + "' version " + std::to_string(version.version) +
            ": canary every " + std::to_string(interval->count()) + " s, reference latency " +
            admission::FormatNumber(canary->reference_ms) + " ms");
  record->canary = std::move(canary);
  return Status::Ok();
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
      if (runs.in_flight || now < runs.next_due) continue;
      runs.in_flight = true;
      runs.next_due = now + canary->interval;
    }
    InferRequest request = canary->request;
    request.model_name = version->model_name;
    request.model_version = std::to_string(version->version);
    RunOnModel(
        std::move(request),
        [this, key, version, canary, sent = now](StatusOr<InferResponse> result) {
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
          ++runs.status.runs;
          if (!problem.empty()) {
            ++(result.ok() ? runs.status.mismatches : runs.status.failures);
            if (runs.status.last_problem.empty()) {
              log::Warn("!!! model '" + key.first + "' version " + std::to_string(key.second) +
                        ": " + problem);
            }
            runs.status.last_problem = problem;
          }
          if (result.ok()) {
            runs.recent_ms.push_back(ms);
            if (runs.recent_ms.size() > kRecentRuns) runs.recent_ms.pop_front();
            if (canary->reference_ms > 0) {
              runs.status.latency_ratio =
                  Median({runs.recent_ms.begin(), runs.recent_ms.end()}) / canary->reference_ms;
            }
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
