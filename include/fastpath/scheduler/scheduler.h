// The scheduler: how validated requests reach model instances. One small interface, with
// the instance pool (each request runs alone on the first free instance), the dynamic
// batcher and the ensemble scheduler behind it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fastpath/backend/backend.h"
#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"
#include "fastpath/server/statistics.h"

namespace fastpath::scheduler {

using Clock = std::chrono::steady_clock;
// Injected so tests control time; production uses Clock::now.
using NowFn = std::function<Clock::time_point()>;

// Thread-safe accumulator of one model version's statistics.
class StatsRecorder {
 public:
  struct Timings {
    uint64_t queue_ns = 0;
    uint64_t compute_input_ns = 0;
    uint64_t compute_infer_ns = 0;
    uint64_t compute_output_ns = 0;
  };
  // One successful model execution of `requests` requests holding `batch_size` batch
  // elements in all (Triton's inference_count counts elements, success counts requests).
  // `request_ns` is per request. Also feeds the latency histograms (request and queue
  // once per request, compute_infer once per execution).
  void RecordSuccess(uint64_t requests, uint64_t batch_size, const Timings& timings,
                     uint64_t request_ns);
  // A request that failed at any stage (rejected, timed out, or failed in the model);
  // `reason` is the label of Triton's nv_inference_request_failure.
  void RecordFailure(uint64_t request_ns,
                     server::FailureReason reason = server::FailureReason::kOther);
  server::ModelStatistics Snapshot(const std::string& name, const std::string& version) const;

 private:
  mutable std::mutex mu_;
  server::ModelStatistics stats_;  // name/version filled by Snapshot
};

// A request on its way to an instance. The scheduler owns it from Enqueue on and
// answers it exactly once through `done`.
struct Job {
  InferRequest request;                   // inputs already validated and reshaped
  std::vector<std::string> output_names;  // resolved: never empty
  std::function<void(StatusOr<InferResponse>)> done;
  Clock::time_point arrival;
  uint64_t batch_size = 1;  // elements in the batch dim (1 for models that do not batch)
  // Triton's request parameters, read by the facade; the dynamic batcher honours them.
  uint64_t priority = 0;                 // "priority": 0 is the model's default level
  std::chrono::microseconds timeout{0};  // "timeout": 0 is none (the queue policy decides)
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
  // Jobs accepted and not yet answered.
  virtual size_t Pending() const = 0;
};

struct InstancePoolOptions {
  size_t max_queue_size = 1024;  // beyond this, Enqueue rejects (no unbounded queue)
  // As DynamicBatchOptions::caller_run_limit: a request whose caller may run the model
  // runs on the caller's thread when the queue is empty, an instance is idle and the last
  // run took at most this long. 0: never.
  std::chrono::microseconds caller_run_limit{1000};
  NowFn now = Clock::now;
};

// Each instance has its own execution thread; all pull from one FIFO queue, so a job
// goes to the first free instance. A short request that finds the queue empty and an
// instance idle runs on the caller's thread instead (no hand-off to and from a worker).
class InstancePoolScheduler final : public Scheduler {
 public:
  // Takes ownership of the instances. `stats` must outlive the scheduler.
  InstancePoolScheduler(std::vector<std::unique_ptr<backend::ModelInstance>> instances,
                        StatsRecorder* stats, InstancePoolOptions options);
  ~InstancePoolScheduler() override;

  void Enqueue(Job job) override;
  void Stop() override;
  size_t Pending() const override;

 private:
  void WorkerLoop(size_t index);
  void RunOnCaller(size_t index, Job& job);
  void Execute(backend::ModelInstance* instance, Job& job);

  std::vector<std::unique_ptr<backend::ModelInstance>> instances_;
  StatsRecorder* stats_;
  InstancePoolOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;              // work for a worker, or its instance freed
  std::condition_variable caller_done_cv_;  // caller_runs_ fell to 0
  std::deque<Job> queue_;                   // guarded by mu_
  std::vector<bool> busy_;                  // per instance, guarded by mu_
  size_t running_ = 0;                      // guarded by mu_
  size_t caller_runs_ = 0;                  // runs on callers' threads, guarded by mu_
  bool stopping_ = false;                   // guarded by mu_
  std::atomic<uint64_t> last_run_ns_{0};    // compute time of the latest run (a hint)
  std::vector<std::thread> workers_;
};

}  // namespace fastpath::scheduler
