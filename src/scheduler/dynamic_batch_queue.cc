// The dynamic batcher's queues: per-priority policy queues, their timeouts and deadlines,
// and where the next batch is cut. Everything here runs under mu_.
#include <algorithm>
#include <utility>

#include "batch_tensors.h"
#include "fastpath/scheduler/dynamic_batch_scheduler.h"

namespace fastpath::scheduler {

DynamicBatchScheduler::Answer DynamicBatchScheduler::Fail(Entry& entry, Status status,
                                                          FailureReason reason) {
  if (!entry.job.canary) {
    stats_->RecordFailure(Nanoseconds(clock_->Now() - entry.job.arrival), reason);
  }
  return Answer{entry.sequence, std::move(entry.job.done), std::move(status)};
}

void DynamicBatchScheduler::ExpireLocked(Clock::time_point now, std::vector<Answer>* answers) {
  // Scanning the queues on every event would cost O(queue) per request under load.
  if (now < earliest_expiry_ && cancellable_ == 0) return;
  earliest_expiry_ = Clock::time_point::max();
  cancellable_ = 0;
  const auto never_ran = [](const Job& job) {
    return "request for model '" + job.request.model_name + "'";
  };
  for (PolicyQueue& q : queues_) {
    for (std::deque<Entry>* list : {&q.waiting, &q.delayed}) {
      // Compacted in place: the entries kept move down over the ones answered. (A new
      // deque per scan cost two allocations a request: with a client-cancel flag on every
      // request, each event scans.) `delayed` may grow while `waiting` is scanned; it is
      // scanned after, whole.
      auto kept = list->begin();
      for (auto it = list->begin(); it != list->end(); ++it) {
        Entry& e = *it;
        if (IsCancelled(e.job)) {
          answers->push_back(
              Fail(e,
                   Cancelled(never_ran(e.job) +
                             " was cancelled while queued; it never reached the model"),
                   FailureReason::kCanceled));
        } else if (now >= e.job.request.deadline) {
          answers->push_back(
              Fail(e,
                   DeadlineExceeded(never_ran(e.job) + " passed its deadline after " +
                                    std::to_string(Nanoseconds(now - e.enqueued) / 1000) +
                                    " us in the queue; it never reached the model"),
                   FailureReason::kRejected));
        } else if (list == &q.waiting && now >= e.timeout) {
          if (q.policy.timeout_action == QueuePolicy::TimeoutAction::kDelay) {
            q.delayed.push_back(std::move(e));
            continue;
          }
          // Triton answers a queue-policy timeout with UNAVAILABLE.
          answers->push_back(Fail(e,
                                  Unavailable(never_ran(e.job) + " timed out after " +
                                              std::to_string(Nanoseconds(now - e.enqueued) / 1000) +
                                              " us in the queue (queue policy timeout); it "
                                              "never reached the model"),
                                  FailureReason::kRejected));
        } else {
          earliest_expiry_ = std::min(earliest_expiry_, e.job.request.deadline);
          if (list == &q.waiting) earliest_expiry_ = std::min(earliest_expiry_, e.timeout);
          if (e.job.request.cancelled != nullptr) ++cancellable_;
          if (kept != it) *kept = std::move(e);
          ++kept;
          continue;
        }
        --queued_;
      }
      list->erase(kept, list->end());
    }
  }
}

std::optional<DynamicBatchScheduler::Batch> DynamicBatchScheduler::CutBatchLocked(
    Clock::time_point now, Clock::time_point* wake) {
  // Walk the queued requests in serving order: priority 1 first; in a level, the
  // requests in time before the ones delayed by their timeout.
  struct Pick {
    std::deque<Entry>* list;
  };
  std::vector<Pick> walked;
  const BatchSignature* sig = nullptr;
  BatchSignature first_sig;
  uint64_t total = 0;
  // Picks that make the largest preferred size reachable; or, once the next request would
  // go past the largest preferred size, the picks before it (Triton's saturated batch).
  size_t best_preferred = 0;
  bool send_now = false;
  Clock::time_point oldest = Clock::time_point::max();
  const auto is_preferred = [&](uint64_t size) {
    return std::find(options_.preferred_batch_sizes.begin(), options_.preferred_batch_sizes.end(),
                     size) != options_.preferred_batch_sizes.end();
  };
  for (PolicyQueue& q : queues_) {
    for (std::deque<Entry>* list : {&q.waiting, &q.delayed}) {
      for (Entry& e : *list) {
        const uint64_t rows = BatchOf(e.job);
        if (sig == nullptr) {
          first_sig = BatchSignature::Of(e.job);
          sig = &first_sig;
        } else {
          if (total + rows > max_preferred_ && best_preferred == 0) best_preferred = walked.size();
          if (total + rows > options_.max_batch_size || !sig->Accepts(e.job)) {
            send_now = true;  // the batch cannot grow past this request
            break;
          }
        }
        walked.push_back({list});
        total += rows;
        oldest = std::min(oldest, e.enqueued);
        if (is_preferred(total)) best_preferred = walked.size();
        if (total >= options_.max_batch_size || !sig->batchable) {
          send_now = true;
          break;
        }
      }
      if (send_now) break;
    }
    if (send_now) break;
  }
  if (walked.empty()) return std::nullopt;

  // As Triton's GetDynamicBatch: within the window a preferred size is sent at once; once
  // the window is over (or the server stops) everything taken goes as it is.
  const bool window = options_.max_queue_delay.count() > 0;
  const bool delay_exceeded = stopping_ || (window && now >= oldest + options_.max_queue_delay);
  size_t count = walked.size();
  if (best_preferred > 0 && !delay_exceeded) {
    count = best_preferred;
  } else if (!send_now && total < max_preferred_ && window && !delay_exceeded) {
    *wake = oldest + options_.max_queue_delay;
    return std::nullopt;
  }

  Batch batch;
  batch.entries.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    std::deque<Entry>* list = walked[i].list;
    if (list->front().job.request.cancelled != nullptr) --cancellable_;
    batch.entries.push_back(std::move(list->front()));
    list->pop_front();
  }
  queued_ -= count;
  return batch;
}

Clock::time_point DynamicBatchScheduler::ScheduleLocked(std::vector<Answer>* answers,
                                                        std::vector<Worker*>* handed) {
  const Clock::time_point now = clock_->Now();
  ExpireLocked(now, answers);
  Clock::time_point wake = Clock::time_point::max();
  while (queued_ > 0) {
    auto free = std::find_if(workers_.begin(), workers_.end(),
                             [](const std::unique_ptr<Worker>& w) { return !w->busy; });
    if (free == workers_.end()) break;  // a worker finishing looks again
    Clock::time_point window_end = Clock::time_point::max();
    std::optional<Batch> batch = CutBatchLocked(now, &window_end);
    if (!batch) {
      wake = std::min(wake, window_end);
      break;
    }
    (*free)->busy = true;
    running_ += batch->entries.size();
    (*free)->batch = std::move(batch);
    handed->push_back(free->get());
  }
  // Look again when a queued request times out or passes its deadline.
  wake = std::min(wake, earliest_expiry_);
  if (stopping_ && queued_ == 0) {
    timer_cv_.notify_all();
    for (auto& w : workers_) w->cv.notify_all();
  }
  return wake;
}

}  // namespace fastpath::scheduler
