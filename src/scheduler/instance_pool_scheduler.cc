#include "fastpath/scheduler/instance_pool_scheduler.h"

#include <chrono>
#include <utility>

#include "batch_tensors.h"
#include "caller_run.h"
#include "fastpath/common/thread_start.h"
#include "instance_health.h"

namespace fastpath::scheduler {
InstancePoolScheduler::InstancePoolScheduler(
    std::vector<std::unique_ptr<backend::ModelInstance>> instances, StatsRecorder* stats,
    InstancePoolOptions options)
    : instances_(std::move(instances)),
      stats_(stats),
      options_(std::move(options)),
      clock_(OrSteadyClock(options_.clock)),
      busy_(instances_.size(), false),
      needs_recovery_(instances_.size(), false),
      health_(std::make_unique<InstanceHealth>(instances_.size(), clock_)),
      caller_estimate_(std::make_unique<CallerRunEstimate>(options_.caller_run_limit)) {}

StatusOr<std::unique_ptr<InstancePoolScheduler>> InstancePoolScheduler::Create(
    std::vector<std::unique_ptr<backend::ModelInstance>> instances, StatsRecorder* stats,
    InstancePoolOptions options) {
  std::unique_ptr<InstancePoolScheduler> scheduler(
      new InstancePoolScheduler(std::move(instances), stats, std::move(options)));
  FASTPATH_RETURN_IF_ERROR(StartThreads(
      [&] {
        scheduler->workers_.reserve(scheduler->instances_.size());
        for (size_t i = 0; i < scheduler->instances_.size(); ++i) {
          scheduler->workers_.emplace_back([raw = scheduler.get(), i] { raw->WorkerLoop(i); });
        }
      },
      [&] { scheduler->Stop(); }));
  return scheduler;
}

InstancePoolScheduler::~InstancePoolScheduler() { Stop(); }

void InstancePoolScheduler::Enqueue(Job job) {
  const bool may_run_here =
      job.request.caller_may_run_model && caller_estimate_->MayRun(InputBytes(job.request));
  constexpr size_t kNone = static_cast<size_t>(-1);
  size_t here = kNone;
  bool accepted = false;
  bool wake_all = false;
  Status health = Status::Ok();
  {
    std::lock_guard lock(mu_);
    // Under the lock: once the last instance is out, what waits is answered (FailQueued)
    // and nothing more may queue behind it.
    health = health_->Check();
    if (health.ok() && !stopping_ && queue_.size() < options_.max_queue_size) {
      accepted = true;
      if (may_run_here && queue_.empty()) {
        for (size_t i = 0; i < busy_.size() && here == kNone; ++i) {
          if (!busy_[i]) here = i;
        }
      }
      if (here != kNone) {
        // What that instance's worker would take next; the caller runs it instead,
        // saving the hand-off to the worker and back.
        busy_[here] = true;
        ++running_;
        ++caller_runs_;
      } else {
        queue_.push_back(std::move(job));
        // A worker whose instance a caller holds does not take the job: with such runs
        // going on, a single notification could land on it and be lost.
        wake_all = caller_runs_ > 0;
      }
    }
  }
  if (here != kNone) return RunOnCaller(here, job);
  if (accepted) {
    // After the unlock: a worker woken under the lock would at once block on it.
    if (wake_all) {
      cv_.notify_all();
    } else {
      cv_.notify_one();
    }
    return;
  }
  // Answer outside the lock: the callback may do real work (write a response).
  const uint64_t waited = Nanoseconds(clock_->Now() - job.arrival);
  if (!job.canary) stats_->RecordFailure(waited, FailureReason::kRejected);
  const bool stopped = [&] {
    std::lock_guard lock(mu_);
    return stopping_;
  }();
  if (stopped) {
    job.done(Unavailable("model '" + job.request.model_name + "' is shutting down"));
  } else if (!health.ok()) {
    job.done(Unavailable("model '" + job.request.model_name + "': " + health.message()));
  } else {
    job.done(Unavailable("queue of model '" + job.request.model_name + "' is full (" +
                         std::to_string(options_.max_queue_size) + " requests)"));
  }
}

void InstancePoolScheduler::BeginStop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  health_->Stop();
  cv_.notify_all();
}

void InstancePoolScheduler::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && workers_.empty()) return;
  }
  BeginStop();
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
  std::unique_lock lock(mu_);
  caller_done_cv_.wait(lock, [&] { return caller_runs_ == 0; });
  workers_.clear();
}

size_t InstancePoolScheduler::Pending() const {
  std::lock_guard lock(mu_);
  return queue_.size() + running_;
}

Status InstancePoolScheduler::Health() const { return health_->Check(); }

size_t InstancePoolScheduler::InstancesOutOfService() const { return health_->OutOfService(); }

void InstancePoolScheduler::WorkerLoop(size_t index) {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      // An instance a caller is running is not free, not even to drain the queue.
      cv_.wait(lock, [&] {
        return needs_recovery_[index] || (!busy_[index] && (stopping_ || !queue_.empty()));
      });
      if (needs_recovery_[index]) {
        // Its last run ran out of memory; the instance stays busy while it recovers.
        needs_recovery_[index] = false;
        lock.unlock();
        if (!health_->Recover(index, instances_[index].get(),
                              [this](const Status& why) { FailQueued(why); })) {
          return;  // stopping: out of service, it takes nothing; the others drain
        }
        lock.lock();
        busy_[index] = false;
        lock.unlock();
        cv_.notify_all();
        continue;
      }
      // Drain before exiting: a job accepted is a job answered.
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      busy_[index] = true;
      ++running_;
    }
    const bool out_of_memory = Execute(instances_[index].get(), job);
    std::lock_guard lock(mu_);
    --running_;
    // The instance that ran out of memory recovers before it takes more work.
    if (out_of_memory) {
      needs_recovery_[index] = true;
    } else {
      busy_[index] = false;
    }
  }
}

size_t InstancePoolScheduler::FailQueued(const Status& why) {
  std::deque<Job> waiting;
  {
    std::lock_guard lock(mu_);
    waiting.swap(queue_);
  }
  for (Job& job : waiting) {
    if (!job.canary) {
      stats_->RecordFailure(Nanoseconds(clock_->Now() - job.arrival), FailureReason::kRejected);
    }
    job.done(Unavailable("model '" + job.request.model_name + "': " + why.message()));
  }
  return waiting.size();
}

void InstancePoolScheduler::RunOnCaller(size_t index, Job& job) {
  const bool out_of_memory = Execute(instances_[index].get(), job);
  {
    std::lock_guard lock(mu_);
    // Its recovery is its worker's: the caller's thread is a front end's event loop.
    if (out_of_memory) {
      needs_recovery_[index] = true;
    } else {
      busy_[index] = false;
    }
    --running_;
    if (--caller_runs_ == 0) caller_done_cv_.notify_all();
  }
  // Jobs that queued meanwhile may be waiting for exactly this instance's worker.
  cv_.notify_all();
}

bool InstancePoolScheduler::Execute(backend::ModelInstance* instance, Job& job) {
  const Clock::time_point start = clock_->Now();
  if (job.request.cancelled != nullptr && job.request.cancelled->load(std::memory_order_relaxed)) {
    if (!job.canary) stats_->RecordFailure(Nanoseconds(start - job.arrival), FailureReason::kCanceled);
    job.done(Cancelled("request for model '" + job.request.model_name +
                       "' was cancelled while queued; it never reached the model"));
    return false;
  }
  if (start > job.request.deadline) {
    // A timeout in the queue is a rejection, as in Triton.
    if (!job.canary) stats_->RecordFailure(Nanoseconds(start - job.arrival), FailureReason::kRejected);
    job.done(DeadlineExceeded("request for model '" + job.request.model_name +
                              "' timed out after " +
                              std::to_string(Nanoseconds(start - job.arrival) / 1000) +
                              " us in the queue; it never reached the model"));
    return false;
  }
  if (job.hold) {
    const Status held = job.hold(*instance);
    job.done(held.ok() ? StatusOr<InferResponse>(InferResponse{}) : StatusOr<InferResponse>(held));
    return held.code() == StatusCode::kResourceExhausted;
  }
  StatsRecorder::Timings timings;
  timings.queue_ns = Nanoseconds(start - job.arrival);

  // A batching model's request may be split in halves by rows when it runs out of memory;
  // one that does not batch (batch_size 0) runs as it is.
  bool suspect = false;
  auto outputs = RunSplittingOnOutOfMemory(instance, job.request.inputs, job.output_names,
                                           job.batch_size, &suspect);
  const Clock::time_point ran = clock_->Now();
  timings.compute_infer_ns = Nanoseconds(ran - start);
  if (!outputs.ok()) {
    if (!job.canary) stats_->RecordFailure(Nanoseconds(ran - job.arrival), FailureReason::kBackend);
    job.done(outputs.status());
    return suspect;
  }

  caller_estimate_->Record(timings.compute_infer_ns, InputBytes(job.request));
  if (options_.shape_outputs) {
    if (Status shaped = options_.shape_outputs(&*outputs); !shaped.ok()) {
      if (!job.canary) {
        stats_->RecordFailure(Nanoseconds(clock_->Now() - job.arrival), FailureReason::kBackend);
      }
      job.done(shaped);
      return false;
    }
  }
  InferResponse response;
  response.model_name = job.request.model_name;
  response.model_version = job.request.model_version;
  response.id = job.request.id;
  response.outputs = std::move(outputs).value();
  const Clock::time_point end = clock_->Now();
  timings.compute_output_ns = Nanoseconds(end - ran);
  if (!job.canary) stats_->RecordSuccess(1, job.batch_size, timings, Nanoseconds(end - job.arrival));
  response.times = timings;
  job.done(std::move(response));
  return false;
}

}  // namespace fastpath::scheduler
