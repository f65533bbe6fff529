#include "fastpath/scheduler/dynamic_batch_scheduler.h"

#include <algorithm>
#include <set>
#include <utility>

#include "batch_tensors.h"
#include "caller_run.h"
#include "fastpath/common/log.h"
#include "fastpath/common/thread_name.h"
#include "fastpath/common/thread_start.h"
#include "instance_health.h"

namespace fastpath::scheduler {
namespace {

QueuePolicy FromProto(const inference::ModelQueuePolicy& p) {
  QueuePolicy out;
  out.timeout_action = p.timeout_action() == inference::ModelQueuePolicy::DELAY
                           ? QueuePolicy::TimeoutAction::kDelay
                           : QueuePolicy::TimeoutAction::kReject;
  out.default_timeout = WaitOf(p.default_timeout_microseconds());
  out.allow_timeout_override = p.allow_timeout_override();
  out.max_queue_size = p.max_queue_size();
  return out;
}

}  // namespace

StatusOr<DynamicBatchOptions> DynamicBatchOptionsFromConfig(const inference::ModelConfig& config,
                                                            size_t default_max_queue_size) {
  if (!config.has_dynamic_batching()) {
    return InvalidArgument("model '" + config.name() + "' has no dynamic_batching section");
  }
  if (config.max_batch_size() <= 0) {
    return InvalidArgument("dynamic_batching requires max_batch_size > 0 (model '" + config.name() +
                           "' has " + std::to_string(config.max_batch_size()) + ")");
  }
  const auto& db = config.dynamic_batching();
  DynamicBatchOptions out;
  out.max_batch_size = static_cast<uint64_t>(config.max_batch_size());
  for (const int size : db.preferred_batch_size()) {
    if (size < 1) {
      return InvalidArgument("dynamic_batching: preferred_batch_size " + std::to_string(size) +
                             " must be >= 1");
    }
    out.preferred_batch_sizes.push_back(static_cast<uint64_t>(size));
  }
  out.max_queue_delay = WaitOf(db.max_queue_delay_microseconds());
  out.preserve_ordering = db.preserve_ordering();
  out.priority_levels = db.priority_levels();
  out.default_priority_level = db.default_priority_level();
  out.default_queue_policy = FromProto(db.default_queue_policy());
  for (const auto& [level, policy] : db.priority_queue_policy()) {
    out.priority_queue_policies[level] = FromProto(policy);
  }
  out.default_max_queue_size = default_max_queue_size;
  return out;
}

StatusOr<std::unique_ptr<DynamicBatchScheduler>> DynamicBatchScheduler::Create(
    std::vector<std::unique_ptr<backend::ModelInstance>> instances, StatsRecorder* stats,
    DynamicBatchOptions options) {
  if (instances.empty()) return InvalidArgument("the dynamic batcher needs at least one instance");
  if (stats == nullptr) return InvalidArgument("the dynamic batcher needs a statistics recorder");
  if (options.max_batch_size < 1) {
    return InvalidArgument("dynamic_batching requires max_batch_size > 0");
  }
  for (const uint64_t size : options.preferred_batch_sizes) {
    if (size < 1 || size > options.max_batch_size) {
      return InvalidArgument("dynamic_batching: preferred_batch_size " + std::to_string(size) +
                             " must be between 1 and max_batch_size " +
                             std::to_string(options.max_batch_size));
    }
  }
  if (options.priority_levels > 0 && (options.default_priority_level < 1 ||
                                      options.default_priority_level > options.priority_levels)) {
    return InvalidArgument("dynamic_batching: default_priority_level " +
                           std::to_string(options.default_priority_level) +
                           " must be between 1 and priority_levels " +
                           std::to_string(options.priority_levels));
  }
  if (options.priority_levels > 1024) {
    return InvalidArgument("dynamic_batching: priority_levels " +
                           std::to_string(options.priority_levels) + " is more than 1024");
  }
  for (const auto& [level, policy] : options.priority_queue_policies) {
    if (level < 1 || level > options.priority_levels) {
      return InvalidArgument("dynamic_batching: priority_queue_policy key " +
                             std::to_string(level) + " must be between 1 and priority_levels " +
                             std::to_string(options.priority_levels));
    }
  }
  std::unique_ptr<DynamicBatchScheduler> scheduler(
      new DynamicBatchScheduler(std::move(instances), stats, std::move(options)));
  FASTPATH_RETURN_IF_ERROR(scheduler->Start());
  return scheduler;
}

DynamicBatchScheduler::DynamicBatchScheduler(
    std::vector<std::unique_ptr<backend::ModelInstance>> instances, StatsRecorder* stats,
    DynamicBatchOptions options)
    : instances_(std::move(instances)),
      stats_(stats),
      options_(std::move(options)),
      clock_(OrSteadyClock(options_.clock)),
      health_(std::make_unique<InstanceHealth>(instances_.size(), clock_)) {
  caller_estimate_ = std::make_unique<CallerRunEstimate>(options_.caller_run_limit);
  max_preferred_ = options_.max_batch_size;
  if (!options_.preferred_batch_sizes.empty()) {
    max_preferred_ = *std::max_element(options_.preferred_batch_sizes.begin(),
                                       options_.preferred_batch_sizes.end());
  }
  const uint64_t levels = std::max<uint64_t>(1, options_.priority_levels);
  queues_.resize(levels);
  for (uint64_t level = 1; level <= levels; ++level) {
    PolicyQueue& q = queues_[level - 1];
    auto it = options_.priority_queue_policies.find(level);
    q.policy =
        it != options_.priority_queue_policies.end() ? it->second : options_.default_queue_policy;
    q.max_size =
        q.policy.max_queue_size > 0 ? q.policy.max_queue_size : options_.default_max_queue_size;
  }
  for (auto& instance : instances_) {
    auto worker = std::make_unique<Worker>();
    worker->instance = instance.get();
    worker->index = workers_.size();
    workers_.push_back(std::move(worker));
  }
}

Status DynamicBatchScheduler::Start() {
  return StartThreads(
      [this] {
        for (auto& worker : workers_) {
          worker->thread = std::thread([this, w = worker.get()] {
            NameThisThread("fp-run/" + std::to_string(w->index));
            WorkerLoop(w);
          });
        }
        timer_ = std::thread([this] {
          NameThisThread("fp-batch-timer");
          TimerLoop();
        });
      },
      [this] { Stop(); });
}

DynamicBatchScheduler::~DynamicBatchScheduler() { Stop(); }

void DynamicBatchScheduler::Enqueue(Job job) {
  std::vector<Answer> answers;
  std::vector<Worker*> handed;
  std::string refusal;
  // Whether this request may run on this thread (decided before the lock: the flag
  // is the caller's, the estimate a relaxed hint).
  const bool may_run_here =
      job.request.caller_may_run_model && caller_estimate_->MayRun(InputBytes(job.request));
  Worker* here = nullptr;
  std::optional<Batch> here_batch;
  {
    std::lock_guard lock(mu_);
    // Under the lock: once the last instance is out, what waits is answered (FailQueued)
    // and nothing more may queue behind it.
    const Status health = health_->Check();
    size_t index = 0;
    if (options_.priority_levels > 0) {
      uint64_t level = job.priority;
      if (level == 0 || level > options_.priority_levels) level = options_.default_priority_level;
      index = level - 1;
    }
    PolicyQueue& q = queues_[index];
    // A full queue first lets go of what was cancelled or expired in it: nothing wakes the
    // scheduler when a client goes away, and its request would hold its place until the
    // next batch, refusing this one.
    if (q.size() >= q.max_size) ExpireLocked(clock_->Now(), &answers);
    if (stopping_) {
      refusal = "model '" + job.request.model_name + "' is shutting down";
    } else if (!health.ok()) {
      refusal = "model '" + job.request.model_name + "': " + health.message();
    } else if (q.size() >= q.max_size) {
      refusal = "queue of model '" + job.request.model_name + "'" +
                (options_.priority_levels > 0 ? " at priority " + std::to_string(index + 1) : "") +
                " is full (" + std::to_string(q.max_size) + " requests)";
    } else {
      Entry entry;
      entry.sequence = next_sequence_++;
      entry.enqueued = clock_->Now();
      std::chrono::microseconds timeout = q.policy.default_timeout;
      // As Triton: a request's timeout may only shorten the policy's, so with no default
      // timeout (0) it is not used (Triton's PolicyQueue; a client moved from it would see
      // requests refused that Triton served).
      if (q.policy.allow_timeout_override && job.timeout.count() > 0 && timeout.count() > 0 &&
          job.timeout < timeout) {
        timeout = job.timeout;
      }
      if (timeout.count() > 0) entry.timeout = entry.enqueued + timeout;
      earliest_expiry_ = std::min({earliest_expiry_, entry.timeout, job.request.deadline});
      if (job.request.cancelled != nullptr) ++cancellable_;
      const uint64_t sequence = entry.sequence;
      entry.job = std::move(job);
      q.waiting.push_back(std::move(entry));
      ++queued_;
      const Clock::time_point wake = ScheduleLocked(&answers, &handed);
      if (wake < timer_wake_) {
        timer_wake_ = wake;
        timer_cv_.notify_one();
      }
      // Sent at once, alone, to an idle instance: exactly what that instance's thread
      // would run next. Running it here instead saves waking that thread and, for the
      // answer, waking the caller's again.
      if (may_run_here && handed.size() == 1 && handed[0]->batch->entries.size() == 1 &&
          handed[0]->batch->entries[0].sequence == sequence) {
        here = handed[0];
        handed.clear();
        here_batch = std::move(here->batch);
        here->batch.reset();
        ++caller_runs_;
      }
    }
  }
  WakeWorkers(handed);
  if (here != nullptr) return RunOnCaller(here, std::move(*here_batch), std::move(answers));
  if (!refusal.empty()) {
    // Never accepted, so it takes no place in the response order.
    if (!job.canary) {
      stats_->RecordFailure(Nanoseconds(clock_->Now() - job.arrival), FailureReason::kRejected);
    }
    job.done(Unavailable(refusal));
  }
  Deliver(std::move(answers));
}

void DynamicBatchScheduler::TimerLoop() {
  std::unique_lock lock(mu_);
  for (;;) {
    const uint64_t sync = sync_requested_;
    std::vector<Answer> answers;
    std::vector<Worker*> handed;
    timer_wake_ = ScheduleLocked(&answers, &handed);
    if (!answers.empty() || !handed.empty()) {
      lock.unlock();
      WakeWorkers(handed);
      Deliver(std::move(answers));
      lock.lock();
    }
    if (sync > sync_done_) {
      sync_done_ = sync;
      sync_cv_.notify_all();
    }
    if (stopping_ && queued_ == 0) break;
    if (sync_requested_ != sync_done_) continue;
    clock_->WaitUntil(lock, timer_cv_, timer_wake_);
  }
  timer_exited_ = true;
  sync_cv_.notify_all();
}

void DynamicBatchScheduler::RunOnCaller(Worker* worker, Batch batch, std::vector<Answer> answers) {
  // The worker stays busy meanwhile, so that its own thread gets nothing to run on the
  // same instance; afterwards it is free again, as after a run on its thread.
  const bool out_of_memory = Execute(worker->instance, batch, &answers);
  std::vector<Worker*> handed;
  {
    std::lock_guard lock(mu_);
    // Its recovery is its own thread's: this one is a front end's event loop.
    if (out_of_memory) {
      worker->needs_recovery = true;
      worker->cv.notify_one();
    } else {
      worker->busy = false;
    }
    running_ -= batch.entries.size();
    const Clock::time_point wake = ScheduleLocked(&answers, &handed);
    if (wake < timer_wake_) {
      timer_wake_ = wake;
      timer_cv_.notify_one();
    }
  }
  WakeWorkers(handed);
  Deliver(std::move(answers));
  std::lock_guard lock(mu_);
  if (--caller_runs_ == 0) caller_runs_cv_.notify_all();
}

void DynamicBatchScheduler::WakeWorkers(const std::vector<Worker*>& handed) {
  for (Worker* w : handed) w->cv.notify_one();
}

void DynamicBatchScheduler::SyncForTesting() {
  std::unique_lock lock(mu_);
  const uint64_t target = ++sync_requested_;
  timer_cv_.notify_all();
  sync_cv_.wait(lock, [&] { return sync_done_ >= target || timer_exited_; });
}

void DynamicBatchScheduler::WorkerLoop(Worker* worker) {
  std::unique_lock lock(mu_);
  for (;;) {
    worker->cv.wait(lock, [&] {
      return worker->batch.has_value() || worker->needs_recovery || (stopping_ && queued_ == 0);
    });
    std::vector<Answer> answers;
    if (worker->needs_recovery) {
      // Its last run ran out of memory; the instance stays busy while it recovers.
      worker->needs_recovery = false;
      lock.unlock();
      const bool recovered = health_->Recover(worker->index, worker->instance,
                                              [this](const Status& why) { FailQueued(why); });
      lock.lock();
      if (!recovered) return;  // stopping: out of service, it takes nothing; the others drain
      worker->busy = false;
    } else {
      if (!worker->batch) return;
      Batch batch = std::move(*worker->batch);
      worker->batch.reset();
      const size_t size = batch.entries.size();
      lock.unlock();

      const bool out_of_memory = Execute(worker->instance, batch, &answers);

      lock.lock();
      running_ -= size;
      // The instance that ran out of memory recovers (at the top of the loop, once the
      // batch is answered) before it takes more work.
      if (out_of_memory) {
        worker->needs_recovery = true;
      } else {
        worker->busy = false;
      }
    }
    std::vector<Worker*> handed;
    const Clock::time_point wake = ScheduleLocked(&answers, &handed);
    if (wake < timer_wake_) {
      timer_wake_ = wake;
      timer_cv_.notify_one();
    }
    lock.unlock();
    WakeWorkers(handed);
    Deliver(std::move(answers));
    lock.lock();
  }
}

bool DynamicBatchScheduler::Execute(backend::ModelInstance* instance, Batch& batch,
                                    std::vector<Answer>* answers) {
  const Clock::time_point start = clock_->Now();
  // The last look before the model: what was cancelled or expired meanwhile stays out.
  std::vector<Entry*> live;
  for (Entry& e : batch.entries) {
    if (IsCancelled(e.job)) {
      answers->push_back(Fail(e,
                              Cancelled("request for model '" + e.job.request.model_name +
                                        "' was cancelled; it never reached the model"),
                              FailureReason::kCanceled));
    } else if (start >= e.job.request.deadline) {
      answers->push_back(Fail(e,
                              DeadlineExceeded("request for model '" + e.job.request.model_name +
                                               "' passed its deadline after " +
                                               std::to_string(Nanoseconds(start - e.enqueued) / 1000) +
                                               " us in the queue; it never reached the model"),
                              FailureReason::kRejected));
    } else {
      live.push_back(&e);
    }
  }
  if (live.empty()) return false;
  if (live.size() == 1 && live[0]->job.hold) {  // alone: see BatchSignature
    const Status held = live[0]->job.hold(*instance);
    answers->push_back(Answer{
        live[0]->sequence, std::move(live[0]->job.done),
        held.ok() ? StatusOr<InferResponse>(InferResponse{}) : StatusOr<InferResponse>(held)});
    return held.code() == StatusCode::kResourceExhausted;
  }

  StatsRecorder::Timings timings;  // the execution's; each request's queue time is its own
  std::vector<uint64_t> rows;
  std::vector<Job*> jobs;
  for (Entry* e : live) {
    rows.push_back(BatchOf(e->job));
    jobs.push_back(&e->job);
  }

  // One request: its tensors go to the model as they are.
  std::vector<Tensor> inputs;
  std::vector<std::string> names;
  const uint64_t single_bytes = live.size() == 1 ? InputBytes(jobs[0]->request) : 0;
  if (live.size() == 1) {
    inputs = std::move(jobs[0]->request.inputs);
    names = jobs[0]->output_names;
  } else {
    inputs = ConcatInputs(jobs);
    std::set<std::string> seen;
    for (Job* job : jobs) {
      for (const auto& name : job->output_names) {
        if (seen.insert(name).second) names.push_back(name);
      }
    }
  }
  const Clock::time_point ready = clock_->Now();
  timings.compute_input_ns = Nanoseconds(ready - start);

  uint64_t batch_rows = 0;
  for (uint64_t r : rows) batch_rows += r;
  bool suspect = false;
  auto outputs = RunSplittingOnOutOfMemory(instance, inputs, names, batch_rows, &suspect);
  const Clock::time_point ran = clock_->Now();
  timings.compute_infer_ns = Nanoseconds(ran - ready);
  if (live.size() == 1 && outputs.ok()) {
    caller_estimate_->Record(timings.compute_infer_ns, single_bytes);
  }

  // Per request, its outputs in the order it asked for them.
  std::vector<std::vector<Tensor>> split(live.size());
  Status failed = outputs.status();
  if (failed.ok() && outputs->size() != names.size()) {
    failed = Internal("the model returned " + std::to_string(outputs->size()) + " outputs for " +
                      std::to_string(names.size()) + " requested");
  }
  if (failed.ok()) {
    if (live.size() == 1) {
      split[0] = std::move(outputs).value();
    } else {
      // The backend returns the outputs in the order of `names`.
      std::map<std::string, std::vector<Tensor>> parts;
      for (size_t k = 0; k < names.size(); ++k) {
        auto pieces = SplitRows((*outputs)[k], rows);
        if (!pieces.ok()) {
          failed = pieces.status();
          break;
        }
        parts[names[k]] = std::move(pieces).value();
      }
      for (size_t i = 0; failed.ok() && i < live.size(); ++i) {
        for (const auto& name : jobs[i]->output_names) {
          split[i].push_back(std::move(parts[name][i]));
        }
      }
    }
  }
  if (!failed.ok()) {
    if (live.size() > 1 && !suspect && failed.code() != StatusCode::kResourceExhausted) {
      return ExecuteEachAlone(instance, live, failed, answers);
    }
    for (Entry* e : live) answers->push_back(Fail(*e, failed, FailureReason::kBackend));
    return suspect;
  }
  // A request whose outputs do not fit its config fails alone, before anything is counted.
  if (options_.shape_outputs) {
    size_t kept = 0;
    for (size_t i = 0; i < live.size(); ++i) {
      if (Status shaped = options_.shape_outputs(&split[i]); !shaped.ok()) {
        answers->push_back(Fail(*live[i], shaped, FailureReason::kBackend));
        continue;
      }
      if (kept != i) {  // a vector moved onto itself is left empty
        live[kept] = live[i];
        jobs[kept] = jobs[i];
        rows[kept] = rows[i];
        split[kept] = std::move(split[i]);
      }
      ++kept;
    }
    live.resize(kept);
    jobs.resize(kept);
    rows.resize(kept);
    split.resize(kept);
  }

  const Clock::time_point end = clock_->Now();
  timings.compute_output_ns = Nanoseconds(end - ran);
  // Canaries are counted apart: the execution is recorded with the user requests in it,
  // each with its own times.
  std::vector<StatsRecorder::RequestTimes> requests;
  requests.reserve(live.size());
  uint64_t elements = 0;
  uint64_t canary_rows = 0;
  for (size_t i = 0; i < live.size(); ++i) {
    elements += rows[i];
    if (jobs[i]->canary) {
      canary_rows += rows[i];
      continue;
    }
    requests.push_back(
        {Nanoseconds(end - jobs[i]->arrival), Nanoseconds(start - jobs[i]->arrival)});
  }
  if (!requests.empty()) stats_->RecordSuccess(requests, elements, timings, canary_rows);

  for (size_t i = 0; i < live.size(); ++i) {
    InferResponse response;
    response.model_name = jobs[i]->request.model_name;
    response.model_version = jobs[i]->request.model_version;
    response.id = jobs[i]->request.id;
    response.outputs = std::move(split[i]);
    response.times = timings;
    response.times.queue_ns = Nanoseconds(start - jobs[i]->arrival);
    answers->push_back(Answer{live[i]->sequence, std::move(jobs[i]->done), std::move(response)});
  }
  return false;
}

bool DynamicBatchScheduler::ExecuteEachAlone(backend::ModelInstance* instance,
                                             const std::vector<Entry*>& live,
                                             const Status& batch_failure,
                                             std::vector<Answer>* answers) {
  if (!warned_each_alone_.exchange(true)) {
    log::Warn("model '" + live[0]->job.request.model_name + "': a batch of " +
              std::to_string(live.size()) + " requests failed (" + batch_failure.message() +
              "); each runs alone, so that only a request that fails is answered with it " +
              "(said once; a model that fails every batch wants max_batch_size: 0)");
  }
  bool out_of_memory = false;
  for (Entry* e : live) {
    Job& job = e->job;
    const Clock::time_point start = clock_->Now();
    auto outputs = instance->Run(job.request.inputs, job.output_names);
    const Clock::time_point ran = clock_->Now();
    Status failed = outputs.status();
    if (failed.ok() && outputs->size() != job.output_names.size()) {
      failed = Internal("the model returned " + std::to_string(outputs->size()) + " outputs for " +
                        std::to_string(job.output_names.size()) + " requested");
    }
    if (failed.ok() && options_.shape_outputs) failed = options_.shape_outputs(&*outputs);
    if (!failed.ok()) {
      out_of_memory = out_of_memory || failed.code() == StatusCode::kResourceExhausted;
      answers->push_back(Fail(*e, failed, FailureReason::kBackend));
      continue;
    }
    const Clock::time_point end = clock_->Now();
    StatsRecorder::Timings timings;
    timings.queue_ns = Nanoseconds(start - job.arrival);
    timings.compute_infer_ns = Nanoseconds(ran - start);
    timings.compute_output_ns = Nanoseconds(end - ran);
    if (!job.canary) {
      stats_->RecordSuccess({{Nanoseconds(end - job.arrival), timings.queue_ns}}, BatchOf(job),
                            timings, 0);
    }
    InferResponse response;
    response.model_name = job.request.model_name;
    response.model_version = job.request.model_version;
    response.id = job.request.id;
    response.outputs = std::move(outputs).value();
    response.times = timings;
    answers->push_back(Answer{e->sequence, std::move(job.done), std::move(response)});
  }
  return out_of_memory;
}

void DynamicBatchScheduler::Deliver(std::vector<Answer> answers) {
  if (answers.empty()) return;
  if (!options_.preserve_ordering) {
    for (Answer& a : answers) a.done(std::move(a.result));
    return;
  }
  {
    std::lock_guard lock(deliver_mu_);
    for (Answer& a : answers) ready_.emplace(a.sequence, std::move(a));
    // One thread answers at a time, so that answers never overtake each other.
    if (delivering_) return;
    delivering_ = true;
  }
  for (;;) {
    std::vector<Answer> due;
    {
      std::lock_guard lock(deliver_mu_);
      for (auto it = ready_.begin(); it != ready_.end() && it->first == next_to_deliver_;
           it = ready_.erase(it)) {
        due.push_back(std::move(it->second));
        ++next_to_deliver_;
      }
      if (due.empty()) {
        delivering_ = false;
        return;
      }
    }
    for (Answer& a : due) a.done(std::move(a.result));
  }
}

void DynamicBatchScheduler::BeginStop() {
  std::lock_guard lock(mu_);
  if (joined_) return;
  stopping_ = true;
  timer_cv_.notify_all();
  health_->Stop();
  for (auto& w : workers_) w->cv.notify_all();
}

void DynamicBatchScheduler::Stop() {
  std::lock_guard stop_lock(stop_mu_);
  BeginStop();
  if (timer_.joinable()) timer_.join();
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
  std::unique_lock lock(mu_);
  caller_runs_cv_.wait(lock, [&] { return caller_runs_ == 0; });
  joined_ = true;
}

size_t DynamicBatchScheduler::Pending() const {
  std::lock_guard lock(mu_);
  return queued_ + running_;
}

Status DynamicBatchScheduler::Health() const { return health_->Check(); }

size_t DynamicBatchScheduler::InstancesOutOfService() const { return health_->OutOfService(); }

size_t DynamicBatchScheduler::FailQueued(const Status& why) {
  std::vector<Answer> answers;
  {
    std::lock_guard lock(mu_);
    for (PolicyQueue& q : queues_) {
      for (std::deque<Entry>* list : {&q.waiting, &q.delayed}) {
        for (Entry& e : *list) {
          answers.push_back(Fail(
              e, Unavailable("model '" + e.job.request.model_name + "': " + why.message()),
              FailureReason::kRejected));
        }
        queued_ -= list->size();
        list->clear();
      }
    }
    cancellable_ = 0;
    earliest_expiry_ = Clock::time_point::max();
  }
  const size_t failed = answers.size();
  Deliver(std::move(answers));
  return failed;
}

size_t DynamicBatchScheduler::Queued() const {
  std::lock_guard lock(mu_);
  return queued_;
}

}  // namespace fastpath::scheduler
