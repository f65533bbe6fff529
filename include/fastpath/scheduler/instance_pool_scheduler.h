// The instance pool: each request runs alone on the first free instance. The scheduler of a
// model without dynamic_batching.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "fastpath/backend/backend.h"
#include "fastpath/common/clock.h"
#include "fastpath/scheduler/scheduler.h"
#include "fastpath/scheduler/stats_recorder.h"

namespace fastpath::scheduler {

class CallerRunEstimate;
class InstanceHealth;

struct InstancePoolOptions {
  size_t max_queue_size = 1024;  // beyond this, Enqueue rejects (no unbounded queue)
  // As DynamicBatchOptions::caller_run_limit: a request whose caller may run the model
  // runs on the caller's thread when the queue is empty, an instance is idle and its run is
  // predicted to take at most this long (src/scheduler/caller_run.h). 0: never.
  std::chrono::microseconds caller_run_limit{1000};
  Clock* clock = nullptr;  // null: SteadyClock(); must outlive the scheduler
  OutputShaper shape_outputs;
};

// Each instance has its own execution thread; all pull from one FIFO queue, so a job
// goes to the first free instance. A short request that finds the queue empty and an
// instance idle runs on the caller's thread instead (no hand-off to and from a worker).
// An instance whose run fails for lack of memory is kept out of rotation until it has
// recovered (backend::ModelInstance::RecoverFromOutOfMemory) on its own thread.
class InstancePoolScheduler final : public Scheduler {
 public:
  // Takes ownership of the instances (one execution thread each). `stats` must outlive the
  // scheduler. RESOURCE_EXHAUSTED when the threads cannot be started.
  static StatusOr<std::unique_ptr<InstancePoolScheduler>> Create(
      std::vector<std::unique_ptr<backend::ModelInstance>> instances, StatsRecorder* stats,
      InstancePoolOptions options);
  ~InstancePoolScheduler() override;

  void Enqueue(Job job) override;
  void Stop() override;
  void BeginStop() override;
  size_t Pending() const override;
  size_t FailQueued(const Status& why) override;
  Status Health() const override;
  size_t InstancesOutOfService() const override;

 private:
  InstancePoolScheduler(std::vector<std::unique_ptr<backend::ModelInstance>> instances,
                        StatsRecorder* stats, InstancePoolOptions options);
  void WorkerLoop(size_t index);
  void RunOnCaller(size_t index, Job& job);
  // Runs and answers the job; true when the run failed for lack of memory (the instance
  // must then recover before it takes more work).
  bool Execute(backend::ModelInstance* instance, Job& job);

  std::vector<std::unique_ptr<backend::ModelInstance>> instances_;
  StatsRecorder* stats_;
  InstancePoolOptions options_;
  Clock* clock_;

  mutable std::mutex mu_;
  std::condition_variable cv_;              // work for a worker, or its instance freed
  std::condition_variable caller_done_cv_;  // caller_runs_ fell to 0
  std::deque<Job> queue_;                   // guarded by mu_
  std::vector<bool> busy_;                  // per instance, guarded by mu_
  // Per instance, guarded by mu_: its last run ran out of memory, and it stays busy until
  // its worker has recovered it.
  std::vector<bool> needs_recovery_;
  std::unique_ptr<InstanceHealth> health_;
  size_t running_ = 0;                      // guarded by mu_
  size_t caller_runs_ = 0;                  // runs on callers' threads, guarded by mu_
  bool stopping_ = false;                   // guarded by mu_
  std::unique_ptr<CallerRunEstimate> caller_estimate_;  // from the runs' compute times
  std::vector<std::thread> workers_;
};

}  // namespace fastpath::scheduler
