// The ensemble scheduler: runs an ensemble request as a graph of step requests, each on
// its step model's own scheduler (its batcher, its instances), in-process. A step starts
// as soon as every tensor it reads is there, so independent steps run concurrently, and
// no thread waits for a step: each step's completion callback starts the steps it
// unblocked, and the last one answers the ensemble request.
//
// Tensors pass from step to step by move; a tensor that several steps (or a step and the
// response) read is copied for all but its last reader.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"
#include "fastpath/scheduler/scheduler.h"
#include "fastpath/scheduler/stats_recorder.h"

namespace fastpath::scheduler {

// Runs one request on the step model version it was bound to, with everything a client's
// request gets after the lookup (validation against that version's config, its scheduler),
// and calls `done` exactly once, possibly before returning.
using StepRunner =
    std::function<void(InferRequest request, std::function<void(StatusOr<InferResponse>)> done)>;

// Finds a step's model version as a client's request would (`version` empty: the highest
// ready one) and returns a runner bound to it, which keeps that version serving while the
// runner lives. An ensemble request binds each of its steps when it is accepted and keeps
// the runners until it is answered: a step model unloaded or reloaded meanwhile still runs
// the steps of the requests accepted before, as Triton's ensembles hold their steps' models
// for each request. The server facade provides it.
using StepBinder =
    std::function<StatusOr<StepRunner>(const std::string& model, const std::string& version)>;

// An ensemble request's steps, each bound to its model version (StepBinder), by step.
struct BoundSteps {
  std::vector<StepRunner> runners;
};

// One step, with the names resolved from the ensemble config.
struct EnsembleStep {
  std::string model_name;
  std::string model_version;  // empty: the highest ready version
  // (step model input, ensemble tensor)
  std::vector<std::pair<std::string, std::string>> inputs;
  // (step model output, ensemble tensor)
  std::vector<std::pair<std::string, std::string>> outputs;
};

struct EnsemblePlan {
  std::string name;                 // the ensemble model, for messages
  std::vector<std::string> inputs;  // the ensemble's input tensors
  std::vector<EnsembleStep> steps;
  OutputShaper shape_outputs;  // the ensemble's own outputs' reshape, before they are counted
};

class EnsembleScheduler final : public Scheduler {
 public:
  // Checks that every step can become ready (each tensor it reads is an ensemble input or
  // some step's output, without cycles); config::ValidateEnsembleGraph has said so already,
  // but a plan that could hang a request is refused here too. `stats` must outlive the
  // scheduler; `binder` and the runners it returns must stay callable until Stop has
  // returned. A null `clock` is SteadyClock().
  static StatusOr<std::unique_ptr<EnsembleScheduler>> Create(EnsemblePlan plan, StepBinder binder,
                                                             StatsRecorder* stats,
                                                             Clock* clock = nullptr);
  ~EnsembleScheduler() override;

  // Binds every step (StepBinder) now. A step model that cannot be found is Unavailable,
  // naming the step. A step that is itself an ensemble is bound with its own steps (the
  // server's binder calls this for it), so a nested ensemble's request holds every model
  // it will run from the moment the outermost one accepted it.
  StatusOr<std::shared_ptr<const BoundSteps>> BindSteps() const;
  // The job's inputs are the ensemble's (validated); `output_names` are ensemble outputs.
  // Binds every step first (BindSteps), unless the job came bound (Job::bound_steps): a
  // step that cannot be bound fails the job at once, before any step runs.
  void Enqueue(Job job) override;
  // Refuses new jobs and waits until every accepted one is answered (their steps still
  // run on the step models, which must therefore be stopped after the ensemble).
  void Stop() override;
  size_t Pending() const override;

 private:
  struct Run;
  struct StepIndex {
    std::vector<std::pair<std::string, size_t>> inputs;   // step model input -> tensor
    std::vector<std::pair<std::string, size_t>> outputs;  // step model output -> tensor
  };

  EnsembleScheduler(EnsemblePlan plan, StepBinder binder, StatsRecorder* stats, Clock* clock);
  // Starts `steps` (their inputs are all present). Called without the run's lock.
  void Launch(const std::shared_ptr<Run>& run, const std::vector<size_t>& steps);
  void OnStepDone(const std::shared_ptr<Run>& run, size_t step, StatusOr<InferResponse> result);
  void Finish(const std::shared_ptr<Run>& run);
  // The ensemble's error for `status`, step `step`'s failure.
  Status StepFailure(size_t step, const Status& status) const;

  EnsemblePlan plan_;
  StepBinder binder_;
  StatsRecorder* stats_;
  Clock* clock_;

  // The graph, by tensor index.
  std::vector<std::string> tensor_names_;
  std::unordered_map<std::string, size_t> tensor_index_;
  std::vector<size_t> input_tensors_;  // ensemble inputs
  std::vector<StepIndex> steps_;
  std::vector<std::vector<size_t>> consumers_;  // per tensor: the steps reading it, repeated
                                                // when a step reads it through two inputs

  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  size_t inflight_ = 0;    // guarded by mu_
  bool stopping_ = false;  // guarded by mu_
};

}  // namespace fastpath::scheduler
