// The scheduler: how validated requests reach model instances. One small interface, with
// the instance pool (instance_pool_scheduler.h: each request runs alone on the first free
// instance), the dynamic batcher (dynamic_batch_scheduler.h) and the ensemble scheduler
// (ensemble_scheduler.h) behind it; each records into a StatsRecorder (stats_recorder.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fastpath/common/clock.h"
#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"

namespace fastpath::backend {
class ModelInstance;
}  // namespace fastpath::backend

namespace fastpath::scheduler {

struct BoundSteps;  // ensemble_scheduler.h

// What a request's outputs become before it is answered and counted: the config's output
// reshape (config::ReshapeOutputsForClient). An error fails the request as the model's
// (BACKEND): what it returned does not fit its config. Null: the outputs as the model gives
// them.
using OutputShaper = std::function<Status(std::vector<Tensor>* outputs)>;

// A request on its way to an instance. The scheduler owns it from Enqueue on and
// answers it exactly once through `done`.
struct Job {
  InferRequest request;                   // inputs already validated and reshaped
  std::vector<std::string> output_names;  // resolved: never empty
  std::function<void(StatusOr<InferResponse>)> done;
  Clock::time_point arrival;  // on the scheduler's clock
  uint64_t batch_size = 1;    // elements in the batch dim (1 for models that do not batch)
  // Triton's request parameters, read by the facade; the dynamic batcher honours them.
  uint64_t priority = 0;                 // "priority": 0 is the model's default level
  std::chrono::microseconds timeout{0};  // "timeout": 0 is none (the queue policy decides)
  // A canary (the server's own probe, issue 14 §6): run and answered like any request, but
  // counted apart from user traffic: its requests and rows are not in the statistics (an
  // execution it shares with user requests is).
  bool canary = false;
  // Set: the job holds one of the scheduler's instances while `hold` runs with it, in place
  // of a run of the model, and alone (never batched with other requests). It is answered
  // with hold's status (an empty response when OK). ResourceExhausted from hold means the
  // instance ran out of memory: it recovers as after a run that did. The rollout gate
  // (server_gate.cc) holds an instance of each version and times both on one thread.
  std::function<Status(backend::ModelInstance&)> hold;
  // For an ensemble that is the step of another: its own steps, bound when the outer
  // ensemble's request was accepted (EnsembleScheduler::BindSteps). Null: the ensemble
  // binds them when it accepts the job. Other schedulers ignore it.
  std::shared_ptr<const BoundSteps> bound_steps;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // Takes the job. Never blocks on the model, unless the job's
  // request.caller_may_run_model lets the scheduler run it on the calling thread; a job
  // it cannot accept (queue full, stopped) is answered at once with Unavailable.
  virtual void Enqueue(Job job) = 0;
  // Stops accepting, runs every job already accepted, and joins the workers.
  // Idempotent; the destructor calls it.
  virtual void Stop() = 0;
  // Stop without the wait: stops accepting, and the workers end once what was accepted has
  // run; Stop() then waits for them. A server stopping many models begins every stop first,
  // so that their threads end together, not one model after another.
  virtual void BeginStop() {}
  // Jobs accepted and not yet answered.
  virtual size_t Pending() const = 0;
  // Answers every job accepted and not yet started with Unavailable ("model 'M': " + why's
  // message), and returns how many: a shutdown whose grace period has ended answers what
  // waits instead of running it. What runs is unaffected. A scheduler whose jobs only wait
  // in other schedulers (an ensemble's steps) has none of its own.
  virtual size_t FailQueued(const Status& why) {
    (void)why;
    return 0;
  }
  // Unavailable, with the reason, while no instance can serve (each out of service after
  // running out of memory, and not yet rebuilt); Ok otherwise. Cheap: the repository asks
  // it for every request, and readiness follows it.
  virtual Status Health() const { return Status::Ok(); }
  // How many of its instances are out of service now (Health() fails only when all are).
  virtual size_t InstancesOutOfService() const { return 0; }
};

}  // namespace fastpath::scheduler
