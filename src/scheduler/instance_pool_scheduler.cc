#include <chrono>
#include <utility>

#include "fastpath/scheduler/scheduler.h"

namespace fastpath::scheduler {
namespace {

uint64_t Ns(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

}  // namespace

InstancePoolScheduler::InstancePoolScheduler(
    std::vector<std::unique_ptr<backend::ModelInstance>> instances, StatsRecorder* stats,
    InstancePoolOptions options)
    : instances_(std::move(instances)), stats_(stats), options_(std::move(options)) {
  workers_.reserve(instances_.size());
  for (auto& instance : instances_) {
    workers_.emplace_back([this, raw = instance.get()] { WorkerLoop(raw); });
  }
}

InstancePoolScheduler::~InstancePoolScheduler() { Stop(); }

void InstancePoolScheduler::Enqueue(Job job) {
  bool accepted = false;
  {
    std::lock_guard lock(mu_);
    if (!stopping_ && queue_.size() < options_.max_queue_size) {
      queue_.push_back(std::move(job));
      accepted = true;
    }
  }
  if (accepted) {
    // After the unlock: a worker woken under the lock would at once block on it.
    cv_.notify_one();
    return;
  }
  // Answer outside the lock: the callback may do real work (write a response).
  const uint64_t waited = Ns(options_.now() - job.arrival);
  stats_->RecordFailure(waited, server::FailureReason::kRejected);
  const bool stopped = [&] {
    std::lock_guard lock(mu_);
    return stopping_;
  }();
  job.done(Unavailable(stopped ? "model '" + job.request.model_name + "' is shutting down"
                               : "queue of model '" + job.request.model_name + "' is full (" +
                                     std::to_string(options_.max_queue_size) + " requests)"));
}

void InstancePoolScheduler::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
  std::lock_guard lock(mu_);
  workers_.clear();
}

size_t InstancePoolScheduler::Pending() const {
  std::lock_guard lock(mu_);
  return queue_.size() + running_;
}

void InstancePoolScheduler::WorkerLoop(backend::ModelInstance* instance) {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      // Drain before exiting: a job accepted is a job answered.
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    Execute(instance, job);
    std::lock_guard lock(mu_);
    --running_;
  }
}

void InstancePoolScheduler::Execute(backend::ModelInstance* instance, Job& job) {
  const Clock::time_point start = options_.now();
  if (job.request.cancelled != nullptr && job.request.cancelled->load(std::memory_order_relaxed)) {
    stats_->RecordFailure(Ns(start - job.arrival), server::FailureReason::kCanceled);
    job.done(Cancelled("request for model '" + job.request.model_name +
                       "' was cancelled while queued; it never reached the model"));
    return;
  }
  if (start > job.request.deadline) {
    // A timeout in the queue is a rejection, as in Triton.
    stats_->RecordFailure(Ns(start - job.arrival), server::FailureReason::kRejected);
    job.done(DeadlineExceeded("request for model '" + job.request.model_name +
                              "' timed out after " +
                              std::to_string(Ns(start - job.arrival) / 1000) +
                              " us in the queue; it never reached the model"));
    return;
  }
  StatsRecorder::Timings timings;
  timings.queue_ns = Ns(start - job.arrival);

  auto outputs = instance->Run(job.request.inputs, job.output_names);
  const Clock::time_point ran = options_.now();
  timings.compute_infer_ns = Ns(ran - start);
  if (!outputs.ok()) {
    stats_->RecordFailure(Ns(ran - job.arrival), server::FailureReason::kBackend);
    job.done(outputs.status());
    return;
  }

  InferResponse response;
  response.model_name = job.request.model_name;
  response.model_version = job.request.model_version;
  response.id = job.request.id;
  response.outputs = std::move(outputs).value();
  const Clock::time_point end = options_.now();
  timings.compute_output_ns = Ns(end - ran);
  stats_->RecordSuccess(1, job.batch_size, timings, Ns(end - job.arrival));
  job.done(std::move(response));
}

}  // namespace fastpath::scheduler
