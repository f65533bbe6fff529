// The dynamic batcher: Triton's `dynamic_batching` semantics behind the Scheduler
// interface. Requests wait in per-priority queues; whenever an instance is free, the
// batcher takes the longest compatible run of queued requests (up to max_batch_size). Within
// the window it sends at once the largest preferred size that run reaches (or, past the
// largest preferred size, what fits under it), and a run that reaches none waits; once the
// oldest request has waited max_queue_delay, the whole run goes, as Triton sends the batch
// "as is" when the delay is exceeded. The batch's
// inputs are concatenated along dim 0, the instance runs once, and the outputs are split
// back so that every request gets exactly its own rows.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fastpath/backend/backend.h"
#include "fastpath/common/clock.h"
#include "fastpath/common/status.h"
#include "fastpath/scheduler/scheduler.h"
#include "fastpath/scheduler/stats_recorder.h"
#include "model_config.pb.h"

namespace fastpath::scheduler {

class CallerRunEstimate;
class InstanceHealth;

// The longest wait a queue honours, ten years: a timeout or a batching window given in
// microseconds beyond it (a uint64 up to 2^64, which the clock's int64 nanoseconds could
// not add, and would wrap into "at once") is taken as this, which is never in practice.
inline constexpr std::chrono::microseconds kLongestWait = std::chrono::hours(24 * 365 * 10);
inline std::chrono::microseconds WaitOf(uint64_t microseconds) {
  return std::chrono::microseconds(
      std::min<uint64_t>(microseconds, static_cast<uint64_t>(kLongestWait.count())));
}

// Triton's ModelQueuePolicy.
struct QueuePolicy {
  enum class TimeoutAction { kReject, kDelay };
  TimeoutAction timeout_action = TimeoutAction::kReject;
  std::chrono::microseconds default_timeout{0};  // 0: requests never time out in the queue
  // A request's own "timeout" parameter may shorten the default (never lengthen it).
  bool allow_timeout_override = false;
  size_t max_queue_size = 0;  // 0: DynamicBatchOptions::default_max_queue_size
};

struct DynamicBatchOptions {
  uint64_t max_batch_size = 1;                  // > 0
  std::vector<uint64_t> preferred_batch_sizes;  // each in [1, max_batch_size]
  std::chrono::microseconds max_queue_delay{0};
  bool preserve_ordering = false;  // responses leave in the order the requests arrived
  // 0: one queue, request priorities ignored. Otherwise levels 1 (served first) to
  // priority_levels; a request's priority 0 or out of range takes default_priority_level.
  uint64_t priority_levels = 0;
  uint64_t default_priority_level = 0;
  QueuePolicy default_queue_policy;
  std::map<uint64_t, QueuePolicy> priority_queue_policies;  // level -> policy
  // The bound of a queue whose policy sets none (the server's --max-queue-size): no
  // queue grows without bound.
  size_t default_max_queue_size = 1024;
  // A request whose caller may run the model (InferRequest::caller_may_run_model) runs
  // on the caller's thread when it would be sent at once, alone, to an idle instance, and
  // its run is predicted to take at most this long from the recent runs of one request
  // alone, scaled by its input bytes (src/scheduler/caller_run.h; the caller's thread is a
  // front end's event loop: it may be held only briefly). 0: never. At 1 ms the small
  // example CNN (about 0.3 ms a run) gains too: c=1 p50 -15% against 200 us.
  std::chrono::microseconds caller_run_limit{1000};
  Clock* clock = nullptr;  // null: SteadyClock(); must outlive the scheduler
  OutputShaper shape_outputs;  // each request's, after the split
};

// Reads config.dynamic_batching (which must be present; the config is validated and
// completed, so max_batch_size > 0).
StatusOr<DynamicBatchOptions> DynamicBatchOptionsFromConfig(const inference::ModelConfig& config,
                                                            size_t default_max_queue_size);

class DynamicBatchScheduler final : public Scheduler {
 public:
  // Takes ownership of the instances (one execution thread each). `stats` must outlive
  // the scheduler. InvalidArgument when the options contradict each other.
  static StatusOr<std::unique_ptr<DynamicBatchScheduler>> Create(
      std::vector<std::unique_ptr<backend::ModelInstance>> instances, StatsRecorder* stats,
      DynamicBatchOptions options);
  ~DynamicBatchScheduler() override;

  // Answers at once with Unavailable when the request's queue is full or the scheduler
  // is stopping. With the queue empty, an instance free and no window, the request is
  // handed to that instance before Enqueue returns; and run and answered on the calling
  // thread before it returns, when the caller allows it (see caller_run_limit).
  void Enqueue(Job job) override;
  // Stops accepting; what is queued is sent without waiting for its window. Returns
  // once every run, on the instances' threads or on callers', has been answered.
  void Stop() override;
  void BeginStop() override;
  size_t Pending() const override;
  size_t FailQueued(const Status& why) override;  // not under mu_
  Status Health() const override;
  size_t InstancesOutOfService() const override;
  // Requests waiting in the queues (not yet handed to an instance).
  size_t Queued() const;

  // For tests with a manual clock: returns once the batcher's timer thread has looked at
  // the queues and the clock as they are now (so what is due has been sent or rejected).
  void SyncForTesting();

 private:
  struct Entry {
    Job job;
    uint64_t sequence = 0;  // arrival order, for preserve_ordering
    Clock::time_point enqueued;
    Clock::time_point timeout = Clock::time_point::max();  // the queue policy's
  };
  struct PolicyQueue {
    QueuePolicy policy;
    size_t max_size = 0;
    std::deque<Entry> waiting;
    std::deque<Entry> delayed;  // timed out under TimeoutAction::kDelay: served last
    size_t size() const { return waiting.size() + delayed.size(); }
  };
  struct Batch {
    std::vector<Entry> entries;
  };
  struct Worker {
    backend::ModelInstance* instance = nullptr;
    size_t index = 0;            // of the instance
    std::optional<Batch> batch;  // guarded by mu_; set by the batcher, taken by the thread
    bool busy = false;           // guarded by mu_: from hand-over until the batch is done
    // Guarded by mu_: its last run ran out of memory; it stays busy until its own thread
    // has recovered it.
    bool needs_recovery = false;
    std::condition_variable cv;
    std::thread thread;
  };
  // A finished request waiting to be answered (outside the lock).
  struct Answer {
    uint64_t sequence = 0;
    std::function<void(StatusOr<InferResponse>)> done;
    StatusOr<InferResponse> result;
  };

  DynamicBatchScheduler(std::vector<std::unique_ptr<backend::ModelInstance>> instances,
                        StatsRecorder* stats, DynamicBatchOptions options);
  // Starts the instances' threads and the timer's (Create).
  Status Start();

  // Under mu_: drops what may no longer run (cancelled, past its deadline, timed out
  // under REJECT) into `answers`, hands ready batches to free instances (added to
  // `handed`: the caller wakes them with WakeWorkers once mu_ is released, so that a
  // woken thread does not at once block on the lock its waker still holds), and
  // returns when the timer must look again.
  Clock::time_point ScheduleLocked(std::vector<Answer>* answers, std::vector<Worker*>* handed);
  // Not under mu_. Workers live until the destructor has joined them.
  void WakeWorkers(const std::vector<Worker*>& handed);
  // Not under mu_: runs `batch`, handed to `worker` and taken back, on the calling
  // thread, then answers it and `answers` (counted in caller_runs_ until done).
  void RunOnCaller(Worker* worker, Batch batch, std::vector<Answer> answers);
  void ExpireLocked(Clock::time_point now, std::vector<Answer>* answers);
  // The run of queued requests to send now, if any; `wake` gets when to look again.
  std::optional<Batch> CutBatchLocked(Clock::time_point now, Clock::time_point* wake);
  void TimerLoop();
  void WorkerLoop(Worker* worker);
  // Runs the batch and adds its answers; true when the run failed for lack of memory (the
  // instance must then recover before it takes more work).
  bool Execute(backend::ModelInstance* instance, Batch& batch, std::vector<Answer>* answers);
  // After a batch of several requests failed (not for memory): each runs alone, so that a
  // request whose data the model refuses (a token id beyond the vocabulary), or a model that
  // cannot run batched, fails its own request only. Each run is an execution of its own.
  // True when one of them ran out of memory.
  bool ExecuteEachAlone(backend::ModelInstance* instance, const std::vector<Entry*>& live,
                        const Status& batch_failure, std::vector<Answer>* answers);
  // Answers outside the lock, in arrival order when preserve_ordering asks for it.
  void Deliver(std::vector<Answer> answers);
  Answer Fail(Entry& entry, Status status, FailureReason reason);

  std::vector<std::unique_ptr<backend::ModelInstance>> instances_;
  StatsRecorder* stats_;
  DynamicBatchOptions options_;
  Clock* clock_;
  uint64_t max_preferred_;  // the largest preferred size, else max_batch_size (as Triton)
  std::atomic<bool> warned_each_alone_{false};  // ExecuteEachAlone's log line, said once
  std::unique_ptr<InstanceHealth> health_;

  mutable std::mutex mu_;
  std::vector<PolicyQueue> queues_;  // guarded by mu_; index = priority level - 1
  size_t queued_ = 0;                // guarded by mu_
  // No queued request times out or passes its deadline before this (it may be early:
  // then the next scan recomputes it). Guarded by mu_.
  Clock::time_point earliest_expiry_ = Clock::time_point::max();
  size_t cancellable_ = 0;      // guarded by mu_: queued requests with a cancelled flag
  size_t running_ = 0;          // guarded by mu_: requests handed to instances
  uint64_t next_sequence_ = 0;  // guarded by mu_
  bool stopping_ = false;       // guarded by mu_
  std::vector<std::unique_ptr<Worker>> workers_;
  std::condition_variable timer_cv_;
  Clock::time_point timer_wake_ = Clock::time_point::max();  // guarded by mu_
  uint64_t sync_requested_ = 0;                              // guarded by mu_
  uint64_t sync_done_ = 0;                                   // guarded by mu_
  std::condition_variable sync_cv_;
  std::thread timer_;
  bool timer_exited_ = false;  // guarded by mu_
  // Runs on callers' threads not yet answered (Stop waits for them). Guarded by mu_.
  size_t caller_runs_ = 0;
  std::condition_variable caller_runs_cv_;
  // From the runs of one request alone: whether a caller may run the next.
  std::unique_ptr<CallerRunEstimate> caller_estimate_;
  bool joined_ = false;        // guarded by mu_
  std::mutex stop_mu_;         // serializes Stop

  // preserve_ordering: answers wait here until every earlier request is answered.
  std::mutex deliver_mu_;
  std::map<uint64_t, Answer> ready_;  // guarded by deliver_mu_
  uint64_t next_to_deliver_ = 0;      // guarded by deliver_mu_
  bool delivering_ = false;           // guarded by deliver_mu_
};

}  // namespace fastpath::scheduler
