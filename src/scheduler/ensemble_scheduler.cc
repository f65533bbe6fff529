#include "fastpath/scheduler/ensemble_scheduler.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

namespace fastpath::scheduler {
namespace {

// The reason of Triton's nv_inference_request_failure for an ensemble that failed with
// `status`, the status of the step that failed: a step refused (queue full, timed out,
// stopping) or cancelled is the ensemble's too, a step whose model failed (Internal, or
// out of memory) is BACKEND, and anything else (a step's config refusing the request, ...)
// OTHER.
FailureReason FailureReasonOf(const Status& status) {
  switch (status.code()) {
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return FailureReason::kRejected;
    case StatusCode::kCancelled:
      return FailureReason::kCanceled;
    case StatusCode::kInternal:
    case StatusCode::kResourceExhausted:
      return FailureReason::kBackend;
    default:
      return FailureReason::kOther;
  }
}

std::string DescribeStep(const EnsemblePlan& plan, size_t step) {
  return "step " + std::to_string(step + 1) + " (model '" + plan.steps[step].model_name + "')";
}

}  // namespace

// One ensemble request on its way through the steps. Shared by the step callbacks; the
// last one to finish answers the job.
struct EnsembleScheduler::Run {
  Job job;
  Clock::time_point start;
  std::shared_ptr<const BoundSteps> steps;  // bound when the job was accepted

  std::mutex mu;
  std::vector<std::optional<Tensor>> values;  // by tensor index; guarded by mu
  std::vector<size_t> uses_left;              // readers still to take each tensor
  std::vector<size_t> missing;                // per step: inputs not yet there
  size_t launched = 0;                        // steps started
  size_t completed = 0;                       // steps answered
  Status error = Status::Ok();                // the first step failure
  ModelTimes steps_compute;                   // the answered steps' compute times, summed
};

StatusOr<std::unique_ptr<EnsembleScheduler>> EnsembleScheduler::Create(EnsemblePlan plan,
                                                                       StepBinder binder,
                                                                       StatsRecorder* stats,
                                                                       Clock* clock) {
  if (!binder) return FailedPrecondition("ensemble '" + plan.name + "': no step binder");
  if (stats == nullptr) return Internal("ensemble '" + plan.name + "': no statistics recorder");
  // The plan must let every step run: simulate the flow of tensors.
  std::unordered_map<std::string, bool> available;
  for (const auto& in : plan.inputs) available[in] = true;
  std::vector<bool> ran(plan.steps.size(), false);
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      if (ran[s]) continue;
      bool ready = true;
      for (const auto& [input, tensor] : plan.steps[s].inputs) ready = ready && available[tensor];
      if (!ready) continue;
      ran[s] = progress = true;
      for (const auto& [output, tensor] : plan.steps[s].outputs) available[tensor] = true;
    }
  }
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    if (!ran[s]) {
      return FailedPrecondition("ensemble '" + plan.name + "': " + DescribeStep(plan, s) +
                                " can never run: a tensor it reads is never produced");
    }
  }
  return std::unique_ptr<EnsembleScheduler>(
      new EnsembleScheduler(std::move(plan), std::move(binder), stats, clock));
}

EnsembleScheduler::EnsembleScheduler(EnsemblePlan plan, StepBinder binder, StatsRecorder* stats,
                                     Clock* clock)
    : plan_(std::move(plan)),
      binder_(std::move(binder)),
      stats_(stats),
      clock_(OrSteadyClock(clock)) {
  auto index = [&](const std::string& name) {
    auto [it, inserted] = tensor_index_.emplace(name, tensor_names_.size());
    if (inserted) {
      tensor_names_.push_back(name);
      consumers_.emplace_back();
    }
    return it->second;
  };
  for (const auto& in : plan_.inputs) input_tensors_.push_back(index(in));
  steps_.resize(plan_.steps.size());
  for (size_t s = 0; s < plan_.steps.size(); ++s) {
    for (const auto& [output, tensor] : plan_.steps[s].outputs) {
      steps_[s].outputs.emplace_back(output, index(tensor));
    }
  }
  for (size_t s = 0; s < plan_.steps.size(); ++s) {
    for (const auto& [input, tensor] : plan_.steps[s].inputs) {
      const size_t t = index(tensor);
      steps_[s].inputs.emplace_back(input, t);
      consumers_[t].push_back(s);
    }
  }
}

EnsembleScheduler::~EnsembleScheduler() { Stop(); }

StatusOr<std::shared_ptr<const BoundSteps>> EnsembleScheduler::BindSteps() const {
  auto bound = std::make_shared<BoundSteps>();
  bound->runners.reserve(steps_.size());
  for (size_t s = 0; s < steps_.size(); ++s) {
    StatusOr<StepRunner> runner = binder_(plan_.steps[s].model_name, plan_.steps[s].model_version);
    if (!runner.ok()) {
      // A step model that is not there makes the ensemble unavailable, not unknown.
      const Status& why = runner.status();
      return StepFailure(s, why.code() == StatusCode::kNotFound ? Unavailable(why.message()) : why);
    }
    bound->runners.push_back(std::move(runner).value());
  }
  return std::shared_ptr<const BoundSteps>(std::move(bound));
}

void EnsembleScheduler::Enqueue(Job job) {
  if (job.hold) {
    job.done(FailedPrecondition("ensemble '" + job.request.model_name +
                                "' has no instance of its own to hold: its steps' models do"));
    return;
  }
  bool accepted = false;
  {
    std::lock_guard lock(mu_);
    accepted = !stopping_;
    if (accepted) ++inflight_;
  }
  if (!accepted) {
    if (!job.canary) {
      stats_->RecordFailure(Nanoseconds(clock_->Now() - job.arrival), FailureReason::kRejected);
    }
    job.done(Unavailable("model '" + job.request.model_name + "' is shutting down"));
    return;
  }
  auto run = std::make_shared<Run>();
  run->start = clock_->Now();
  run->values.resize(tensor_names_.size());
  run->uses_left.resize(tensor_names_.size(), 0);
  run->missing.resize(steps_.size(), 0);
  for (size_t t = 0; t < tensor_names_.size(); ++t) run->uses_left[t] = consumers_[t].size();
  for (size_t s = 0; s < steps_.size(); ++s) run->missing[s] = steps_[s].inputs.size();

  // The request's inputs become the ensemble input tensors (moved, not copied).
  for (auto& tensor : job.request.inputs) {
    auto it = tensor_index_.find(tensor.name);
    // Only ensemble inputs: a request never supplies what a step produces.
    if (it != tensor_index_.end() && std::find(input_tensors_.begin(), input_tensors_.end(),
                                               it->second) != input_tensors_.end()) {
      run->values[it->second] = std::move(tensor);
    }
  }
  job.request.inputs.clear();
  for (const auto& name : job.output_names) {
    auto it = tensor_index_.find(name);
    if (it == tensor_index_.end()) {
      // The server validated the names against the ensemble config; a name the steps do
      // not produce would mean the config and the plan disagree.
      run->error = Internal("ensemble '" + plan_.name + "' has no tensor '" + name + "'");
      break;
    }
    ++run->uses_left[it->second];
  }
  // Every step's model version, held until the request is answered.
  if (run->error.ok() && job.bound_steps == nullptr) {
    StatusOr<std::shared_ptr<const BoundSteps>> bound = BindSteps();
    if (bound.ok()) {
      job.bound_steps = std::move(bound).value();
    } else {
      run->error = bound.status();
    }
  }
  run->steps = std::move(job.bound_steps);
  run->job = std::move(job);
  if (!run->error.ok()) return Finish(run);

  // An ensemble input the request left out (an optional one) is "there" but empty: the
  // steps reading it get no tensor for it, and their own checks decide.
  std::vector<size_t> ready;
  for (const size_t t : input_tensors_) {
    for (const size_t s : consumers_[t]) {
      if (--run->missing[s] == 0) ready.push_back(s);
    }
  }
  for (size_t s = 0; s < steps_.size(); ++s) {
    if (steps_[s].inputs.empty()) ready.push_back(s);
  }
  run->launched = ready.size();
  if (ready.empty()) return Finish(run);  // Create refuses such plans; never hang anyway
  Launch(run, ready);
}

void EnsembleScheduler::Launch(const std::shared_ptr<Run>& run, const std::vector<size_t>& steps) {
  std::vector<std::pair<size_t, InferRequest>> requests;
  requests.reserve(steps.size());
  {
    std::lock_guard lock(run->mu);
    for (const size_t s : steps) {
      const EnsembleStep& step = plan_.steps[s];
      InferRequest request;
      request.model_name = step.model_name;
      request.model_version = step.model_version;
      request.id = run->job.request.id;
      request.parameters = run->job.request.parameters;
      request.deadline = run->job.request.deadline;
      // A client that went away cancels the steps not yet run as well.
      request.cancelled = run->job.request.cancelled;
      request.inputs.reserve(steps_[s].inputs.size());
      for (const auto& [input, t] : steps_[s].inputs) {
        const bool last = --run->uses_left[t] == 0;
        if (!run->values[t].has_value()) continue;  // an optional input left out
        Tensor tensor = last ? std::move(*run->values[t]) : *run->values[t];
        if (last) run->values[t].reset();
        tensor.name = input;
        request.inputs.push_back(std::move(tensor));
      }
      request.outputs.reserve(steps_[s].outputs.size());
      for (const auto& [output, t] : steps_[s].outputs) request.outputs.push_back({output, {}});
      requests.emplace_back(s, std::move(request));
    }
  }
  // Without the lock: a runner may answer at once (unknown model, full queue), and the
  // callback takes the lock.
  for (auto& [s, request] : requests) {
    run->steps->runners[s](std::move(request), [this, run, s = s](StatusOr<InferResponse> result) {
      OnStepDone(run, s, std::move(result));
    });
  }
}

void EnsembleScheduler::OnStepDone(const std::shared_ptr<Run>& run, size_t step,
                                   StatusOr<InferResponse> result) {
  std::vector<size_t> ready;
  bool finished = false;
  {
    std::lock_guard lock(run->mu);
    ++run->completed;
    if (!result.ok()) {
      if (run->error.ok()) run->error = StepFailure(step, result.status());
    } else if (run->error.ok()) {
      run->steps_compute.compute_input_ns += result->times.compute_input_ns;
      run->steps_compute.compute_infer_ns += result->times.compute_infer_ns;
      run->steps_compute.compute_output_ns += result->times.compute_output_ns;
      for (auto& tensor : result->outputs) {
        for (const auto& [output, t] : steps_[step].outputs) {
          if (output != tensor.name) continue;
          tensor.name = tensor_names_[t];
          run->values[t] = std::move(tensor);
          for (const size_t c : consumers_[t]) {
            if (--run->missing[c] == 0) ready.push_back(c);
          }
          break;
        }
      }
      // Counted here, under the lock, so that no other step's completion can see every
      // started step answered while these are about to start.
      run->launched += ready.size();
    }
    finished = run->completed == run->launched;
  }
  if (!ready.empty()) Launch(run, ready);
  if (finished) Finish(run);
}

Status EnsembleScheduler::StepFailure(size_t step, const Status& status) const {
  // Out of memory keeps its leading words, which clients and alerts match on.
  const bool oom = status.code() == StatusCode::kResourceExhausted;
  return Status(status.code(), std::string(oom ? "out of memory: " : "") + "ensemble '" +
                                   plan_.name + "' " + DescribeStep(plan_, step) + ": " +
                                   status.message());
}

void EnsembleScheduler::Finish(const std::shared_ptr<Run>& run) {
  Status status = Status::Ok();
  InferResponse response;
  {
    std::lock_guard lock(run->mu);
    if (!run->error.ok()) {
      status = run->error;
    } else if (run->completed < steps_.size()) {
      // A step answered without an output that a later step reads.
      std::string never;
      for (size_t s = 0; s < steps_.size(); ++s) {
        if (run->missing[s] > 0) never += (never.empty() ? "" : ", ") + DescribeStep(plan_, s);
      }
      status = Internal("ensemble '" + plan_.name + "': " + never +
                        " never received all of its inputs (a step did not return an output "
                        "that output_map names)");
    } else {
      response.model_name = run->job.request.model_name;
      response.model_version = run->job.request.model_version;
      response.id = run->job.request.id;
      response.outputs.reserve(run->job.output_names.size());
      for (const auto& name : run->job.output_names) {
        const size_t t = tensor_index_.at(name);
        if (!run->values[t].has_value()) {
          status = Internal("ensemble '" + plan_.name + "': output '" + name +
                            "' was not produced by its step");
          break;
        }
        const bool last = --run->uses_left[t] == 0;
        response.outputs.push_back(last ? std::move(*run->values[t]) : *run->values[t]);
        if (last) run->values[t].reset();
      }
      if (status.ok() && plan_.shape_outputs) status = plan_.shape_outputs(&response.outputs);
    }
  }
  const Clock::time_point end = clock_->Now();
  const uint64_t request_ns = Nanoseconds(end - run->job.arrival);
  // As in Triton: the ensemble's compute times are its steps' summed (their queue waits,
  // and the time between steps, are in its request time only), and its queue time is its
  // own wait before the first step started. Each step's times are in its model's
  // statistics as well.
  response.times = run->steps_compute;
  response.times.queue_ns = Nanoseconds(run->start - run->job.arrival);
  if (run->job.canary) {
    // Counted apart (its steps are in their models' statistics as requests of theirs).
  } else if (status.ok()) {
    stats_->RecordSuccess(1, run->job.batch_size, response.times, request_ns);
  } else {
    stats_->RecordFailure(request_ns, FailureReasonOf(status));
  }
  auto done = std::move(run->job.done);
  {
    std::lock_guard lock(mu_);
    if (--inflight_ == 0) idle_cv_.notify_all();
  }
  // `this` may be gone from here on (Stop has nothing left to wait for); `done` keeps
  // what it needs alive.
  if (status.ok()) {
    done(std::move(response));
  } else {
    done(std::move(status));
  }
}

void EnsembleScheduler::Stop() {
  std::unique_lock lock(mu_);
  stopping_ = true;
  idle_cv_.wait(lock, [&] { return inflight_ == 0; });
}

size_t EnsembleScheduler::Pending() const {
  std::lock_guard lock(mu_);
  return inflight_;
}

}  // namespace fastpath::scheduler
