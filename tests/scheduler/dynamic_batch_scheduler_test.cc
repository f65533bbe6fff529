// The dynamic batcher's semantics, deterministically: time moves only when the test
// advances a manual clock, and the fake model finishes a run only when the test releases
// the requests in it. No sleeps.
#include "fastpath/scheduler/dynamic_batch_scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "fakes/manual_clock.h"
#include "fastpath/config/model_config.h"

namespace fastpath::scheduler {
namespace {

using ::testing::HasSubstr;
using std::chrono::microseconds;
using std::chrono::milliseconds;

// Value of element (row, col) of request `id`: the fake model reads request ids back
// from column 0, so the test sees exactly which requests shared a run.
int32_t Value(int id, int row, int col) { return id * 1000 + row * 10 + col; }

struct RunRecord {
  std::vector<int> ids;  // one per row, in batch order
  std::vector<int64_t> shape;
  std::vector<std::string> outputs;
};

// The model's state, shared by its instances. A run starts (and is recorded) at once and
// finishes only when every request in it is released, or the gate is open.
class FakeModel {
 public:
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Release(int id) {
    std::lock_guard lock(mu_);
    released_.insert(id);
    cv_.notify_all();
  }
  void FailWith(Status s) {
    std::lock_guard lock(mu_);
    fail_ = std::move(s);
  }
  // A run that holds request `id` fails with `s` (after it is recorded), as a model fails on
  // one request's data (a token id beyond its vocabulary).
  void FailRunsHolding(int id, Status s) {
    std::lock_guard lock(mu_);
    poison_ = {id, std::move(s)};
  }
  // A run of more than `rows` rows fails as running out of memory does (after it is
  // recorded).
  void RunOutOfMemoryAbove(int64_t rows) {
    std::lock_guard lock(mu_);
    memory_rows_ = rows;
  }
  // Called at the start of every run (e.g. to move the manual clock: the run's length).
  void SetRunHook(std::function<void()> hook) {
    std::lock_guard lock(mu_);
    hook_ = std::move(hook);
  }
  void WaitRuns(size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return runs_.size() >= n; });
  }
  std::vector<RunRecord> Runs() {
    std::lock_guard lock(mu_);
    return runs_;
  }
  size_t RunCount() {
    std::lock_guard lock(mu_);
    return runs_.size();
  }

  // OUT = IN * 2, OUT2 = IN + 1 (INT32); ECHO = IN, any datatype.
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                    const std::vector<std::string>& names) {
    std::function<void()> hook;
    {
      std::lock_guard lock(mu_);
      hook = hook_;
    }
    if (hook) hook();
    const Tensor& in = inputs.at(0);
    RunRecord record;
    record.shape = in.shape;
    record.outputs = names;
    if (in.dtype == DataType::kInt32) {
      const int64_t width = in.shape.size() > 1 ? in.shape[1] : 1;
      for (int64_t r = 0; r < in.shape[0]; ++r) {
        int32_t v = 0;
        std::memcpy(&v, in.data.data() + r * width * 4, 4);
        record.ids.push_back(v / 1000);
      }
    } else {
      auto count = ElementCount(in.shape);
      if (!count.ok()) return count.status();
      auto elements = SplitBytesElements(in.data, *count, in.name);
      if (!elements.ok()) return elements.status();
      const size_t per_row = static_cast<size_t>(*count / in.shape[0]);
      for (size_t i = 0; i < elements->size(); i += per_row) {
        const std::string_view e = (*elements)[i];
        record.ids.push_back(std::stoi(std::string(e.substr(0, e.find(':')))));
      }
    }
    std::unique_lock lock(mu_);
    runs_.push_back(record);
    cv_.notify_all();
    cv_.wait(lock, [&] {
      return open_ || std::all_of(record.ids.begin(), record.ids.end(),
                                  [&](int id) { return released_.count(id) > 0; });
    });
    if (!fail_.ok()) return fail_;
    if (poison_ && std::count(record.ids.begin(), record.ids.end(), poison_->first) > 0) {
      return poison_->second;
    }
    if (in.shape[0] > memory_rows_) {
      return ResourceExhausted("out of memory: " + std::to_string(in.shape[0]) + " rows");
    }
    lock.unlock();
    std::vector<Tensor> out;
    for (const auto& name : names) {
      Tensor t = in;
      t.name = name;
      if (name != "ECHO") {
        for (size_t i = 0; i + 4 <= t.data.size(); i += 4) {
          int32_t v = 0;
          std::memcpy(&v, t.data.data() + i, 4);
          v = name == "OUT" ? v * 2 : v + 1;
          std::memcpy(t.data.data() + i, &v, 4);
        }
      }
      out.push_back(std::move(t));
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  std::set<int> released_;
  std::vector<RunRecord> runs_;
  Status fail_ = Status::Ok();
  int64_t memory_rows_ = INT64_MAX;
  std::optional<std::pair<int, Status>> poison_;
  std::function<void()> hook_;
};

class FakeInstance : public backend::ModelInstance {
 public:
  explicit FakeInstance(FakeModel* model) : model_(model) {}
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                    const std::vector<std::string>& names) override {
    return model_->Run(inputs, names);
  }

 private:
  FakeModel* model_;
};

// Answers by request id, and the order they came in.
class Answers {
 public:
  std::function<void(StatusOr<InferResponse>)> For(int id) {
    return [this, id](StatusOr<InferResponse> r) {
      std::lock_guard lock(mu_);
      EXPECT_EQ(by_id_.count(id), 0u) << "request " << id << " answered twice";
      by_id_.emplace(id, std::move(r));
      order_.push_back(id);
      cv_.notify_all();
    };
  }
  void WaitCount(size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return order_.size() >= n; });
  }
  StatusOr<InferResponse> Get(int id) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return by_id_.count(id) > 0; });
    return by_id_.at(id);
  }
  bool Has(int id) {
    std::lock_guard lock(mu_);
    return by_id_.count(id) > 0;
  }
  std::vector<int> Order() {
    std::lock_guard lock(mu_);
    return order_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, StatusOr<InferResponse>> by_id_;
  std::vector<int> order_;
};

std::vector<int32_t> Int32s(const Tensor& t) {
  std::vector<int32_t> v(t.data.size() / 4);
  std::memcpy(v.data(), t.data.data(), v.size() * 4);
  return v;
}

class DynamicBatchSchedulerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    model_.Open();
    sched_.reset();
  }

  void Start(DynamicBatchOptions options, int instances = 1) {
    options.clock = &clock_;
    std::vector<std::unique_ptr<backend::ModelInstance>> v;
    for (int i = 0; i < instances; ++i) v.push_back(std::make_unique<FakeInstance>(&model_));
    auto created = DynamicBatchScheduler::Create(std::move(v), &stats_, std::move(options));
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    sched_ = std::move(created).value();
  }

  // Request `id` with an INT32 input IN of shape [rows, width].
  Job MakeJob(int id, int rows = 1, int width = 2, std::vector<std::string> outputs = {"OUT"}) {
    Job job;
    job.request.model_name = "m";
    job.request.model_version = "1";
    job.request.id = std::to_string(id);
    Tensor in{"IN", DataType::kInt32, {rows, width}, {}};
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < width; ++c) {
        const int32_t v = Value(id, r, c);
        in.data.append(reinterpret_cast<const char*>(&v), 4);
      }
    }
    job.request.inputs.push_back(std::move(in));
    job.output_names = std::move(outputs);
    job.arrival = clock_.Now();
    job.batch_size = static_cast<uint64_t>(rows);
    job.done = answers_.For(id);
    return job;
  }

  void Enqueue(Job job) { sched_->Enqueue(std::move(job)); }
  void Advance(microseconds d) {
    clock_.Advance(d);
    sched_->SyncForTesting();
  }
  std::vector<size_t> BatchSizes() {
    std::vector<size_t> sizes;
    for (const auto& r : model_.Runs()) sizes.push_back(r.ids.size());
    return sizes;
  }
  void ExpectOk(int id, int rows = 1, int width = 2) {
    auto r = answers_.Get(id);
    ASSERT_TRUE(r.ok()) << "request " << id << ": " << r.status().ToString();
    EXPECT_EQ(r->id, std::to_string(id));
    ASSERT_EQ(r->outputs.size(), 1u);
    EXPECT_EQ(r->outputs[0].shape, (std::vector<int64_t>{rows, width}));
    std::vector<int32_t> want;
    for (int row = 0; row < rows; ++row) {
      for (int c = 0; c < width; ++c) want.push_back(Value(id, row, c) * 2);
    }
    EXPECT_EQ(Int32s(r->outputs[0]), want) << "request " << id;
  }

  testing::ManualClock clock_;
  FakeModel model_;
  StatsRecorder stats_;
  Answers answers_;
  std::unique_ptr<DynamicBatchScheduler> sched_;
};

DynamicBatchOptions Options(uint64_t max_batch, microseconds delay = microseconds(0)) {
  DynamicBatchOptions o;
  o.max_batch_size = max_batch;
  o.max_queue_delay = delay;
  return o;
}

TEST_F(DynamicBatchSchedulerTest, EmptyQueueAndNoWindowRunsBeforeEnqueueReturns) {
  Start(Options(8));
  Enqueue(MakeJob(1));
  // Handed to the free instance inside Enqueue: no timer, no extra wait.
  EXPECT_EQ(sched_->Queued(), 0u);
  EXPECT_EQ(sched_->Pending(), 1u);
  model_.WaitRuns(1);
  model_.Release(1);
  ExpectOk(1);
}

TEST_F(DynamicBatchSchedulerTest, RequestNeverWaitsLongerThanItsWindow) {
  Start(Options(8, milliseconds(10)));
  Enqueue(MakeJob(1));
  Advance(microseconds(4000));
  Enqueue(MakeJob(2));
  Advance(microseconds(5999));
  EXPECT_EQ(sched_->Queued(), 2u) << "sent before the window of the oldest request ended";
  EXPECT_EQ(model_.RunCount(), 0u);
  Advance(microseconds(1));  // 10 ms after request 1 arrived (6 ms after request 2)
  EXPECT_EQ(sched_->Queued(), 0u);
  model_.WaitRuns(1);
  EXPECT_EQ(model_.Runs()[0].ids, (std::vector<int>{1, 2}));
  model_.Open();
  ExpectOk(1);
  ExpectOk(2);
  const auto s = stats_.Snapshot("m", "1");
  EXPECT_EQ(s.execution_count, 1u);
  EXPECT_EQ(s.inference_count, 2u);
  EXPECT_EQ(s.inference_stats.success.count, 2u);
}

// One batch, two waits: each request is observed with its own (100 ms and 1 ms), not
// with their average, which would put both in the slower one's bucket.
TEST_F(DynamicBatchSchedulerTest, EachRequestOfABatchIsTimedOnItsOwn) {
  Start(Options(8, milliseconds(100)));
  Enqueue(MakeJob(1));
  Advance(milliseconds(99));
  Enqueue(MakeJob(2));
  Advance(milliseconds(1));
  model_.WaitRuns(1);
  model_.Open();
  ExpectOk(1);
  ExpectOk(2);
  const auto s = stats_.Snapshot("m", "1");
  const auto bucket = [](uint64_t us) {
    return static_cast<size_t>(
        std::find(kLatencyBucketBoundsUs.begin(), kLatencyBucketBoundsUs.end(), us) -
        kLatencyBucketBoundsUs.begin());
  };
  EXPECT_EQ(s.queue_latency.buckets[bucket(100'000)], 1u);  // (50, 100] ms
  EXPECT_EQ(s.queue_latency.buckets[bucket(1'000)], 1u);    // (0.5, 1] ms
  EXPECT_EQ(s.request_latency.buckets[bucket(100'000)], 1u);
  EXPECT_EQ(s.request_latency.buckets[bucket(1'000)], 1u);
  EXPECT_EQ(s.inference_stats.queue.ns, 101'000'000u);
  // Each answer carries its own queue time and the execution's compute (what an ensemble
  // that ran this model as a step adds up).
  EXPECT_EQ(answers_.Get(1)->times.queue_ns, 100'000'000u);
  EXPECT_EQ(answers_.Get(2)->times.queue_ns, 1'000'000u);
  EXPECT_EQ(answers_.Get(1)->times.compute_infer_ns, s.inference_stats.compute_infer.ns / 2);
}

TEST_F(DynamicBatchSchedulerTest, BatchesNeverExceedMaxBatchSize) {
  Start(Options(4, milliseconds(100)));
  for (int id = 1; id <= 10; ++id) Enqueue(MakeJob(id));
  // Four make a full batch: sent at once, without waiting for the window.
  model_.WaitRuns(1);
  EXPECT_EQ(sched_->Queued(), 6u);
  model_.Open();
  model_.WaitRuns(2);
  sched_->SyncForTesting();
  EXPECT_EQ(sched_->Queued(), 2u);  // two left: they wait for their window
  Advance(milliseconds(100));
  model_.WaitRuns(3);
  EXPECT_EQ(BatchSizes(), (std::vector<size_t>{4, 4, 2}));
  for (int id = 1; id <= 10; ++id) ExpectOk(id);
}

TEST_F(DynamicBatchSchedulerTest, MultiRowRequestsNeverOverfillABatch) {
  Start(Options(4, milliseconds(100)));
  Enqueue(MakeJob(1, 3));
  Enqueue(MakeJob(2, 3));  // 3 + 3 > 4: request 1 goes alone, now
  model_.WaitRuns(1);
  Advance(milliseconds(100));
  model_.Open();
  model_.WaitRuns(2);
  for (const auto& run : model_.Runs()) EXPECT_LE(run.ids.size(), 4u);
  EXPECT_EQ(BatchSizes(), (std::vector<size_t>{3, 3}));
  ExpectOk(1, 3);
  ExpectOk(2, 3);
}

// A hold (Job::hold, the rollout gate's) runs alone: a request queued before it is not
// held back for it, none joins it, it runs with the instance it holds, and it is answered
// with what it returned.
TEST_F(DynamicBatchSchedulerTest, AHoldRunsAloneWithTheInstanceItHolds) {
  Start(Options(8, milliseconds(100)));
  Enqueue(MakeJob(1));
  Job hold = MakeJob(2);
  hold.canary = true;
  const std::vector<Tensor> inputs = hold.request.inputs;
  hold.hold = [&](backend::ModelInstance& instance) {
    // Twice, as the gate runs each side (untimed, then timed).
    for (int i = 0; i < 2; ++i) {
      auto outputs = instance.Run(inputs, {"OUT"});
      if (!outputs.ok()) return outputs.status();
    }
    return Status::Ok();
  };
  Enqueue(std::move(hold));
  Job refused = MakeJob(3);
  refused.canary = true;
  refused.hold = [](backend::ModelInstance&) { return FailedPrecondition("measured too slow"); };
  Enqueue(std::move(refused));
  Enqueue(MakeJob(4));
  model_.Open();
  // 1 goes at once (the hold cannot join it), 2 runs twice on its instance, 3 holds without
  // a run, and 4 waits for its window.
  model_.WaitRuns(3);
  answers_.WaitCount(3);
  Advance(milliseconds(100));
  model_.WaitRuns(4);
  answers_.WaitCount(4);
  std::vector<std::vector<int>> ids;
  for (const auto& run : model_.Runs()) ids.push_back(run.ids);
  EXPECT_EQ(ids, (std::vector<std::vector<int>>{{1}, {2}, {2}, {4}}));
  ExpectOk(1);
  ExpectOk(4);
  const auto held = answers_.Get(2);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_TRUE(held->outputs.empty());
  const auto failed = answers_.Get(3);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr("measured too slow"));
  // The holds are not user traffic: only 1 and 4 are counted.
  EXPECT_EQ(stats_.Snapshot("m", "1").inference_count, 2u);
}

TEST_F(DynamicBatchSchedulerTest, PreferredSizeIsSentWithoutWaiting) {
  DynamicBatchOptions o = Options(8, milliseconds(100));
  o.preferred_batch_sizes = {2, 4};
  Start(o);
  Enqueue(MakeJob(1));
  EXPECT_EQ(sched_->Queued(), 1u);  // 1 is not preferred: wait
  Enqueue(MakeJob(2));              // 2 is
  EXPECT_EQ(sched_->Queued(), 0u);
  model_.WaitRuns(1);
  // While the instance is busy, five arrive: within their window the largest preferred
  // size (4) goes next, never more (as Triton).
  for (int id = 3; id <= 7; ++id) Enqueue(MakeJob(id));
  model_.Release(1);
  model_.Release(2);
  model_.WaitRuns(2);
  EXPECT_EQ(model_.Runs()[1].ids, (std::vector<int>{3, 4, 5, 6}));
  model_.Open();
  sched_->SyncForTesting();
  EXPECT_EQ(sched_->Queued(), 1u);  // request 7 alone waits for its window
  Advance(milliseconds(100));
  model_.WaitRuns(3);
  EXPECT_EQ(BatchSizes(), (std::vector<size_t>{2, 4, 1}));
  for (int id = 1; id <= 7; ++id) ExpectOk(id);
}

// Once the oldest request has waited its window, Triton sends the batch "as is": all that
// is queued, up to max_batch_size, not cut down to a preferred size.
TEST_F(DynamicBatchSchedulerTest, PastTheWindowTheBatchIsNotCutToAPreferredSize) {
  DynamicBatchOptions o = Options(32, milliseconds(100));
  o.preferred_batch_sizes = {4, 8};
  Start(o);
  Enqueue(MakeJob(100, /*rows=*/8));  // preferred: runs at once and holds the instance
  model_.WaitRuns(1);
  for (int id = 1; id <= 20; ++id) Enqueue(MakeJob(id));
  Advance(milliseconds(100));  // every one of them has waited its window
  model_.Open();
  model_.WaitRuns(2);
  EXPECT_EQ(BatchSizes(), (std::vector<size_t>{8, 20}));
  for (int id = 1; id <= 20; ++id) ExpectOk(id);
}

TEST_F(DynamicBatchSchedulerTest, PreferredSizeReachableWithinTheQueueIsCutEarly) {
  DynamicBatchOptions o = Options(8, milliseconds(100));
  o.preferred_batch_sizes = {2, 6};
  Start(o);
  Enqueue(MakeJob(1));
  Enqueue(MakeJob(2));
  model_.WaitRuns(1);
  for (int id = 3; id <= 5; ++id) Enqueue(MakeJob(id));
  model_.Release(1);
  model_.Release(2);
  model_.WaitRuns(2);  // three queued: 2 is reachable, 6 is not
  EXPECT_EQ(model_.Runs()[1].ids, (std::vector<int>{3, 4}));
  model_.Open();
  Advance(milliseconds(100));
  model_.WaitRuns(3);
  for (int id = 1; id <= 5; ++id) ExpectOk(id);
}

TEST_F(DynamicBatchSchedulerTest, PrioritiesAreServedInOrder) {
  DynamicBatchOptions o = Options(1);
  o.priority_levels = 3;
  o.default_priority_level = 2;
  Start(o);
  Enqueue(MakeJob(100));  // occupies the instance
  model_.WaitRuns(1);
  const std::vector<std::pair<int, uint64_t>> requests = {
      {1, 3}, {2, 0 /* default: 2 */}, {3, 1}, {4, 3}, {5, 1}, {6, 9 /* out of range: 2 */}};
  for (const auto& [id, priority] : requests) {
    Job job = MakeJob(id);
    job.priority = priority;
    Enqueue(std::move(job));
  }
  model_.Open();
  answers_.WaitCount(7);
  std::vector<int> served;
  for (const auto& run : model_.Runs()) served.push_back(run.ids[0]);
  EXPECT_EQ(served, (std::vector<int>{100, 3, 5, 2, 6, 1, 4}));
}

// A shutdown past its grace period answers what waits (Server::Shutdown); what runs runs.
TEST_F(DynamicBatchSchedulerTest, FailQueuedAnswersWhatWaitsAndLeavesWhatRuns) {
  Start(Options(1));
  Enqueue(MakeJob(100));  // occupies the instance
  model_.WaitRuns(1);
  Enqueue(MakeJob(1));
  Enqueue(MakeJob(2));
  EXPECT_EQ(sched_->FailQueued(Unavailable("the grace period ended")), 2u);
  for (int id : {1, 2}) {
    ASSERT_TRUE(answers_.Has(id));
    EXPECT_EQ(answers_.Get(id).status().code(), StatusCode::kUnavailable);
    EXPECT_NE(answers_.Get(id).status().message().find("the grace period ended"),
              std::string::npos);
  }
  model_.Open();
  ExpectOk(100);
  sched_.reset();
  EXPECT_EQ(model_.RunCount(), 1u);
}

TEST_F(DynamicBatchSchedulerTest, QueueTimeoutRejectsAndNeverRuns) {
  DynamicBatchOptions o = Options(1);
  o.default_queue_policy.default_timeout = microseconds(1000);
  o.default_queue_policy.allow_timeout_override = true;
  Start(o);
  Enqueue(MakeJob(100));  // occupies the instance
  model_.WaitRuns(1);
  Enqueue(MakeJob(1));  // the policy's 1000 us
  Job shorter = MakeJob(2);
  shorter.timeout = microseconds(500);  // overrides: shorter is allowed
  Enqueue(std::move(shorter));
  Job longer = MakeJob(3);
  longer.timeout = microseconds(5000);  // cannot lengthen the default
  Enqueue(std::move(longer));

  Advance(microseconds(500));
  ASSERT_TRUE(answers_.Has(2));
  EXPECT_EQ(answers_.Get(2).status().code(), StatusCode::kUnavailable);
  EXPECT_NE(answers_.Get(2).status().message().find("timed out"), std::string::npos);
  EXPECT_FALSE(answers_.Has(1));
  Advance(microseconds(500));
  ASSERT_TRUE(answers_.Has(1));
  ASSERT_TRUE(answers_.Has(3));
  EXPECT_EQ(answers_.Get(1).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(answers_.Get(3).status().code(), StatusCode::kUnavailable);
  model_.Open();
  ExpectOk(100);
  sched_.reset();
  EXPECT_EQ(model_.RunCount(), 1u);  // the timed-out requests never reached the model
  const auto s = stats_.Snapshot("m", "1");
  EXPECT_EQ(s.inference_stats.fail.count, 3u);
  EXPECT_EQ(s.failures[static_cast<size_t>(FailureReason::kRejected)], 3u);
}

// As Triton: with no default timeout there is nothing to shorten, and the request's own is
// not used.
TEST_F(DynamicBatchSchedulerTest, OverrideIsNotUsedWhenThePolicyHasNoTimeout) {
  DynamicBatchOptions o = Options(1);
  o.default_queue_policy.allow_timeout_override = true;
  Start(o);
  Enqueue(MakeJob(100));
  model_.WaitRuns(1);
  Job job = MakeJob(1);
  job.timeout = microseconds(200);
  Enqueue(std::move(job));
  Enqueue(MakeJob(2));  // no timeout at all
  Advance(microseconds(1000));
  EXPECT_FALSE(answers_.Has(1));
  model_.Open();
  ExpectOk(1);
  ExpectOk(2);
}

TEST_F(DynamicBatchSchedulerTest, DelayedRequestsRunAfterTheOthers) {
  DynamicBatchOptions o = Options(1);
  o.default_queue_policy.default_timeout = microseconds(1000);
  o.default_queue_policy.timeout_action = QueuePolicy::TimeoutAction::kDelay;
  Start(o);
  Enqueue(MakeJob(100));
  model_.WaitRuns(1);
  Enqueue(MakeJob(1));
  Advance(microseconds(1000));  // request 1 times out: delayed, not rejected
  EXPECT_FALSE(answers_.Has(1));
  Enqueue(MakeJob(2));
  model_.Open();
  answers_.WaitCount(3);
  std::vector<int> served;
  for (const auto& run : model_.Runs()) served.push_back(run.ids[0]);
  EXPECT_EQ(served, (std::vector<int>{100, 2, 1}));
  ExpectOk(1);
  ExpectOk(2);
}

TEST_F(DynamicBatchSchedulerTest, FullQueueRejectsAtOnce) {
  DynamicBatchOptions o = Options(1);
  o.default_queue_policy.max_queue_size = 2;
  Start(o);
  Enqueue(MakeJob(100));  // running, not queued
  model_.WaitRuns(1);
  Enqueue(MakeJob(1));
  Enqueue(MakeJob(2));
  Enqueue(MakeJob(3));
  ASSERT_TRUE(answers_.Has(3));  // answered inside Enqueue
  const auto refused = answers_.Get(3);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("full"), std::string::npos)
      << refused.status().message();
  model_.Open();
  ExpectOk(1);
  ExpectOk(2);
  EXPECT_EQ(
      stats_.Snapshot("m", "1").failures[static_cast<size_t>(FailureReason::kRejected)],
      1u);
}

// A request whose client went away gives its place up to the next arrival: nothing wakes
// the scheduler when a client goes, and a full queue of abandoned requests refused every new
// one as "full" until the next batch.
TEST_F(DynamicBatchSchedulerTest, AFullQueueLetsGoOfCancelledRequestsForANewOne) {
  DynamicBatchOptions o = Options(1);
  o.default_queue_policy.max_queue_size = 2;
  Start(o);
  Enqueue(MakeJob(100));  // running, not queued
  model_.WaitRuns(1);
  auto gone = std::make_shared<std::atomic<bool>>(false);
  for (int id : {1, 2}) {
    Job job = MakeJob(id);
    job.request.cancelled = gone;
    Enqueue(std::move(job));
  }
  gone->store(true);
  Enqueue(MakeJob(3));
  ASSERT_TRUE(answers_.Has(1));
  EXPECT_EQ(answers_.Get(1).status().code(), StatusCode::kCancelled);
  EXPECT_EQ(answers_.Get(2).status().code(), StatusCode::kCancelled);
  EXPECT_FALSE(answers_.Has(3)) << answers_.Get(3).status().ToString();
  model_.Open();
  ExpectOk(3);
  ExpectOk(100);
}

TEST_F(DynamicBatchSchedulerTest, ServerBoundAppliesWhenThePolicySetsNone) {
  DynamicBatchOptions o = Options(1);
  o.default_max_queue_size = 1;
  Start(o);
  Enqueue(MakeJob(100));
  model_.WaitRuns(1);
  Enqueue(MakeJob(1));
  Enqueue(MakeJob(2));
  EXPECT_EQ(answers_.Get(2).status().code(), StatusCode::kUnavailable);
}

TEST_F(DynamicBatchSchedulerTest, PriorityLevelsHaveTheirOwnPolicies) {
  DynamicBatchOptions o = Options(1);
  o.priority_levels = 2;
  o.default_priority_level = 1;
  o.priority_queue_policies[2].max_queue_size = 1;
  o.priority_queue_policies[2].default_timeout = microseconds(300);
  Start(o);
  Enqueue(MakeJob(100));
  model_.WaitRuns(1);
  for (int id = 1; id <= 3; ++id) Enqueue(MakeJob(id));  // level 1: default bound
  Job low = MakeJob(4);
  low.priority = 2;
  Enqueue(std::move(low));
  Job low2 = MakeJob(5);
  low2.priority = 2;
  Enqueue(std::move(low2));
  EXPECT_EQ(answers_.Get(5).status().code(), StatusCode::kUnavailable);  // level 2 is full
  Advance(microseconds(300));
  EXPECT_EQ(answers_.Get(4).status().code(), StatusCode::kUnavailable);  // level 2 timed out
  EXPECT_FALSE(answers_.Has(1));                                         // level 1 has no timeout
  model_.Open();
  for (int id = 1; id <= 3; ++id) ExpectOk(id);
}

TEST_F(DynamicBatchSchedulerTest, OrderingIsPreservedWhenAsked) {
  DynamicBatchOptions o = Options(1);
  o.preserve_ordering = true;
  Start(o, /*instances=*/2);
  Enqueue(MakeJob(1));
  Enqueue(MakeJob(2));
  model_.WaitRuns(2);  // one on each instance
  model_.Release(2);   // the later one finishes first...
  // ...and is held back until request 1 is answered.
  while (sched_->Pending() != 1) sched_->SyncForTesting();
  EXPECT_FALSE(answers_.Has(2));
  model_.Release(1);
  answers_.WaitCount(2);
  EXPECT_EQ(answers_.Order(), (std::vector<int>{1, 2}));
  ExpectOk(1);
  ExpectOk(2);
}

TEST_F(DynamicBatchSchedulerTest, OrderingCoversRejectedRequests) {
  DynamicBatchOptions o = Options(1);
  o.preserve_ordering = true;
  o.default_queue_policy.default_timeout = microseconds(100);
  Start(o);
  Enqueue(MakeJob(1));
  model_.WaitRuns(1);
  Enqueue(MakeJob(2));
  Advance(microseconds(100));  // request 2 times out while request 1 still runs
  EXPECT_FALSE(answers_.Has(2)) << "answered before an earlier request";
  model_.Release(1);
  answers_.WaitCount(2);
  EXPECT_EQ(answers_.Order(), (std::vector<int>{1, 2}));
  EXPECT_EQ(answers_.Get(2).status().code(), StatusCode::kUnavailable);
}

TEST_F(DynamicBatchSchedulerTest, EveryResponseGoesToTheRequestThatAskedForIt) {
  Start(Options(16, milliseconds(5)), /*instances=*/2);
  model_.Open();
  // Rows 1..3 and different requested outputs in one batch: the union runs, each
  // request gets its own rows of exactly what it asked for, in its order.
  const std::vector<std::vector<std::string>> asks = {{"OUT"}, {"OUT2"}, {"OUT2", "OUT"}, {"ECHO"}};
  for (int id = 1; id <= 40; ++id) Enqueue(MakeJob(id, 1 + id % 3, 2, asks[id % asks.size()]));
  Advance(milliseconds(5));
  answers_.WaitCount(40);
  bool batched = false;
  for (const auto& run : model_.Runs()) batched |= run.ids.size() > 1;
  EXPECT_TRUE(batched);
  for (int id = 1; id <= 40; ++id) {
    auto r = answers_.Get(id);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const int rows = 1 + id % 3;
    const auto& ask = asks[id % asks.size()];
    ASSERT_EQ(r->outputs.size(), ask.size());
    for (size_t k = 0; k < ask.size(); ++k) {
      EXPECT_EQ(r->outputs[k].name, ask[k]);
      EXPECT_EQ(r->outputs[k].shape, (std::vector<int64_t>{rows, 2}));
      std::vector<int32_t> want;
      for (int row = 0; row < rows; ++row) {
        for (int c = 0; c < 2; ++c) {
          const int32_t v = Value(id, row, c);
          want.push_back(ask[k] == "OUT" ? v * 2 : ask[k] == "OUT2" ? v + 1 : v);
        }
      }
      EXPECT_EQ(Int32s(r->outputs[k]), want) << "request " << id << " output " << ask[k];
    }
  }
}

TEST_F(DynamicBatchSchedulerTest, BytesTensorsAreSplitPerRequest) {
  Start(Options(8, milliseconds(1)));
  model_.Open();
  for (int id = 1; id <= 4; ++id) {
    Job job = MakeJob(id);
    Tensor in{"IN", DataType::kBytes, {id, 1}, {}};
    for (int r = 0; r < id; ++r)
      AppendBytesElement(&in.data, std::to_string(id) + ":" + std::string(r * 7, 'x'));
    job.request.inputs = {in};
    job.batch_size = static_cast<uint64_t>(id);
    job.output_names = {"ECHO"};
    Enqueue(std::move(job));
  }
  Advance(milliseconds(1));
  answers_.WaitCount(4);
  for (int id = 1; id <= 4; ++id) {
    auto r = answers_.Get(id);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->outputs[0].shape, (std::vector<int64_t>{id, 1}));
    auto elements = SplitBytesElements(r->outputs[0].data, id, "ECHO");
    ASSERT_TRUE(elements.ok());
    for (int row = 0; row < id; ++row) {
      EXPECT_EQ((*elements)[row], std::to_string(id) + ":" + std::string(row * 7, 'x'));
    }
  }
}

TEST_F(DynamicBatchSchedulerTest, DifferentShapesAreNeverBatchedTogether) {
  Start(Options(8, milliseconds(10)));
  model_.Open();
  for (int id = 1; id <= 9; ++id) Enqueue(MakeJob(id, 1, id % 3 == 0 ? 3 : 2));
  Advance(milliseconds(10));
  answers_.WaitCount(9);
  for (const auto& run : model_.Runs()) {
    for (int id : run.ids) {
      EXPECT_EQ(run.shape[1], id % 3 == 0 ? 3 : 2)
          << "request " << id << " in a batch of another shape";
    }
  }
  for (int id = 1; id <= 9; ++id) ExpectOk(id, 1, id % 3 == 0 ? 3 : 2);
}

TEST_F(DynamicBatchSchedulerTest, DifferentDatatypesAreNeverBatchedTogether) {
  Start(Options(8, milliseconds(10)));
  model_.Open();
  Enqueue(MakeJob(1));
  Job bytes = MakeJob(2);
  bytes.request.inputs[0] = Tensor{"IN", DataType::kBytes, {1, 2}, {}};
  AppendBytesElement(&bytes.request.inputs[0].data, "2:a");
  AppendBytesElement(&bytes.request.inputs[0].data, "2:b");
  bytes.output_names = {"ECHO"};
  Enqueue(std::move(bytes));
  Advance(milliseconds(10));
  answers_.WaitCount(2);
  EXPECT_EQ(BatchSizes(), (std::vector<size_t>{1, 1}));
  ExpectOk(1);
  EXPECT_TRUE(answers_.Get(2).ok());
}

TEST_F(DynamicBatchSchedulerTest, CancelledAndExpiredRequestsNeverReachTheModel) {
  Start(Options(4));
  Enqueue(MakeJob(100));
  model_.WaitRuns(1);
  auto flag = std::make_shared<std::atomic<bool>>(false);
  Job cancelled = MakeJob(1);
  cancelled.request.cancelled = flag;
  Enqueue(std::move(cancelled));
  Job expiring = MakeJob(2);
  expiring.request.deadline = clock_.Now() + microseconds(50);
  Enqueue(std::move(expiring));
  Enqueue(MakeJob(3));
  flag->store(true);
  Advance(microseconds(50));
  EXPECT_EQ(answers_.Get(1).status().code(), StatusCode::kCancelled);
  EXPECT_EQ(answers_.Get(2).status().code(), StatusCode::kDeadlineExceeded);
  model_.Open();
  ExpectOk(3);
  ExpectOk(100);
  for (const auto& run : model_.Runs()) {
    for (int id : run.ids) EXPECT_TRUE(id == 100 || id == 3) << "request " << id << " ran";
  }
  const auto s = stats_.Snapshot("m", "1");
  EXPECT_EQ(s.failures[static_cast<size_t>(FailureReason::kCanceled)], 1u);
}

TEST_F(DynamicBatchSchedulerTest, AFailedRunAnswersEveryRequestInTheBatch) {
  Start(Options(4, milliseconds(1)));
  model_.FailWith(Internal("boom"));
  model_.Open();
  for (int id = 1; id <= 3; ++id) Enqueue(MakeJob(id));
  Advance(milliseconds(1));
  answers_.WaitCount(3);
  for (int id = 1; id <= 3; ++id) EXPECT_EQ(answers_.Get(id).status().message(), "boom");
  EXPECT_EQ(stats_.Snapshot("m", "1").inference_stats.fail.count, 3u);
}

// One request whose data the model refuses failed every request batched with it. The batch
// now runs again one request at a time, and only that request is answered with the failure.
TEST_F(DynamicBatchSchedulerTest, ABatchThatFailsRunsEachRequestAloneSoOnlyTheCulpritFails) {
  Start(Options(4, milliseconds(1)));
  model_.FailRunsHolding(2, InvalidArgument("index 9000 is out of bounds"));
  model_.Open();
  for (int id = 1; id <= 3; ++id) Enqueue(MakeJob(id));
  Advance(milliseconds(1));
  answers_.WaitCount(3);
  ExpectOk(1);
  ExpectOk(3);
  EXPECT_EQ(answers_.Get(2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(answers_.Get(2).status().message(), "index 9000 is out of bounds");
  const auto runs = model_.Runs();
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].ids, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(runs[1].ids, (std::vector<int>{1}));
  EXPECT_EQ(runs[2].ids, (std::vector<int>{2}));
  EXPECT_EQ(runs[3].ids, (std::vector<int>{3}));
  const auto stats = stats_.Snapshot("m", "1");
  EXPECT_EQ(stats.inference_stats.success.count, 2u);
  EXPECT_EQ(stats.inference_stats.fail.count, 1u);
  EXPECT_EQ(stats.execution_count, 2u);  // the runs that answered
}

TEST_F(DynamicBatchSchedulerTest, ABatchThatRunsOutOfMemoryIsRetriedOnceInHalves) {
  // 8 rows do not fit, 4 do: the batch of four 2-row requests runs again as two halves,
  // and every request gets its own right answer.
  Start(Options(8, milliseconds(1)));
  model_.RunOutOfMemoryAbove(4);
  model_.Open();
  for (int id = 1; id <= 4; ++id) Enqueue(MakeJob(id, /*rows=*/2));
  Advance(milliseconds(1));
  answers_.WaitCount(4);
  for (int id = 1; id <= 4; ++id) ExpectOk(id, 2);
  const auto runs = model_.Runs();
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].ids, (std::vector<int>{1, 1, 2, 2, 3, 3, 4, 4}));
  EXPECT_EQ(runs[1].ids, (std::vector<int>{1, 1, 2, 2}));
  EXPECT_EQ(runs[2].ids, (std::vector<int>{3, 3, 4, 4}));
  EXPECT_EQ(stats_.Snapshot("m", "1").inference_stats.success.count, 4u);
}

TEST_F(DynamicBatchSchedulerTest, WhenHalfTheBatchRunsOutOfMemoryTooEveryRequestInItFails) {
  Start(Options(8, milliseconds(1)));
  model_.RunOutOfMemoryAbove(1);
  model_.Open();
  for (int id = 1; id <= 2; ++id) Enqueue(MakeJob(id, /*rows=*/2));
  Advance(milliseconds(1));
  answers_.WaitCount(2);
  for (int id = 1; id <= 2; ++id) {
    const auto answer = answers_.Get(id);
    ASSERT_FALSE(answer.ok());
    EXPECT_EQ(answer.status().code(), StatusCode::kResourceExhausted);
    EXPECT_THAT(answer.status().message(),
                HasSubstr("out of memory: 4 rows (the batch of 4 rows ran out of memory, and so "
                          "did its half of 2 rows run alone)"));
  }
  EXPECT_EQ(model_.RunCount(), 2u);  // the batch, its first half; once, not recursively
  const auto s = stats_.Snapshot("m", "1");
  EXPECT_EQ(s.failures[static_cast<size_t>(FailureReason::kBackend)], 2u);
  // The next request that fits is served.
  Enqueue(MakeJob(3, /*rows=*/1));
  Advance(milliseconds(1));
  ExpectOk(3, 1);
}

TEST_F(DynamicBatchSchedulerTest, StopSendsWhatIsQueuedWithoutWaitingForTheWindow) {
  Start(Options(8, std::chrono::seconds(100)));
  model_.Open();
  Enqueue(MakeJob(1));
  Enqueue(MakeJob(2));
  sched_->Stop();
  ExpectOk(1);
  ExpectOk(2);
  Enqueue(MakeJob(3));
  EXPECT_EQ(answers_.Get(3).status().code(), StatusCode::kUnavailable);
}

// BeginStop is Stop without the wait (a server stopping thousands of models begins every
// stop first, so that their threads end together): it returns while a run is held, refuses
// what comes after, and what it accepted before runs.
TEST_F(DynamicBatchSchedulerTest, BeginStopRefusesNewJobsWithoutWaitingForTheAcceptedOnes) {
  Start(Options(1, std::chrono::seconds(100)));
  Enqueue(MakeJob(1));
  Advance(std::chrono::seconds(100));
  model_.WaitRuns(1);  // held: the model is closed
  Enqueue(MakeJob(2));
  sched_->BeginStop();
  Enqueue(MakeJob(3));
  EXPECT_EQ(answers_.Get(3).status().code(), StatusCode::kUnavailable);
  model_.Open();
  sched_->Stop();
  ExpectOk(1);
  ExpectOk(2);
}

TEST_F(DynamicBatchSchedulerTest, ABatchGoesToTheFirstFreeInstance) {
  Start(Options(2), /*instances=*/3);
  for (int id = 1; id <= 3; ++id) Enqueue(MakeJob(id));
  model_.WaitRuns(3);  // three instances run at once, one request each (window 0)
  EXPECT_EQ(sched_->Queued(), 0u);
  for (int id = 4; id <= 7; ++id) Enqueue(MakeJob(id));
  EXPECT_EQ(sched_->Queued(), 4u);  // every instance busy
  model_.Release(2);                // the instance running request 2 takes the next batch
  model_.WaitRuns(4);
  EXPECT_EQ(model_.Runs()[3].ids, (std::vector<int>{4, 5}));
  model_.Open();
  answers_.WaitCount(7);
}

TEST(DynamicBatchOptionsTest, ReadFromConfig) {
  auto config = config::ParseModelConfig(
      R"pb(
        name: "m"
        max_batch_size: 16
        dynamic_batching {
          preferred_batch_size: [ 4, 8 ]
          max_queue_delay_microseconds: 500
          preserve_ordering: true
          priority_levels: 2
          default_priority_level: 2
          default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 7 }
          priority_queue_policy {
            key: 1
            value { max_queue_size: 3 allow_timeout_override: true }
          }
        }
      )pb",
      "config.pbtxt");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto o = DynamicBatchOptionsFromConfig(*config, 99);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->max_batch_size, 16u);
  EXPECT_EQ(o->preferred_batch_sizes, (std::vector<uint64_t>{4, 8}));
  EXPECT_EQ(o->max_queue_delay, microseconds(500));
  EXPECT_TRUE(o->preserve_ordering);
  EXPECT_EQ(o->priority_levels, 2u);
  EXPECT_EQ(o->default_priority_level, 2u);
  EXPECT_EQ(o->default_queue_policy.timeout_action, QueuePolicy::TimeoutAction::kDelay);
  EXPECT_EQ(o->default_queue_policy.default_timeout, microseconds(7));
  EXPECT_EQ(o->priority_queue_policies.at(1).max_queue_size, 3u);
  EXPECT_TRUE(o->priority_queue_policies.at(1).allow_timeout_override);
  EXPECT_EQ(o->default_max_queue_size, 99u);
}

// Microseconds up to 2^64 do not fit the clock's int64 nanoseconds: beyond ten years they
// are ten years (never, in practice), not a wrap into "at once".
TEST(DynamicBatchOptionsTest, AnEndlessWaitIsTenYearsNotAWrap) {
  auto config = config::ParseModelConfig(
      R"pb(
        max_batch_size: 16
        dynamic_batching {
          max_queue_delay_microseconds: 18446744073709551615
          default_queue_policy { default_timeout_microseconds: 10000000000000000 }
        }
      )pb",
      "config.pbtxt");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto o = DynamicBatchOptionsFromConfig(*config, 99);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->max_queue_delay, kLongestWait);
  EXPECT_EQ(o->default_queue_policy.default_timeout, kLongestWait);
  EXPECT_EQ(WaitOf(std::numeric_limits<int64_t>::max()), kLongestWait);  // a request's "never"
  EXPECT_EQ(WaitOf(1000), microseconds(1000));
}

TEST_F(DynamicBatchSchedulerTest, AnEndlessTimeoutNeverExpires) {
  DynamicBatchOptions o = Options(1);
  o.default_queue_policy.default_timeout = WaitOf(std::numeric_limits<uint64_t>::max());
  Start(o);
  Enqueue(MakeJob(100));
  model_.WaitRuns(1);
  Enqueue(MakeJob(1));
  Advance(std::chrono::hours(24));
  EXPECT_FALSE(answers_.Has(1)) << "waits behind the run, as with no timeout";
  model_.Open();
  ExpectOk(1);
}

TEST(DynamicBatchOptionsTest, CreateRefusesContradictions) {
  auto make = [](DynamicBatchOptions o) {
    std::vector<std::unique_ptr<backend::ModelInstance>> v;
    v.push_back(nullptr);
    StatsRecorder stats;
    return DynamicBatchScheduler::Create(std::move(v), &stats, std::move(o)).status();
  };
  DynamicBatchOptions o = Options(4);
  o.preferred_batch_sizes = {8};
  EXPECT_NE(make(o).message().find("preferred_batch_size 8"), std::string::npos);
  o = Options(4);
  o.priority_levels = 2;
  o.default_priority_level = 3;
  EXPECT_NE(make(o).message().find("default_priority_level 3"), std::string::npos);
  o = Options(0);
  EXPECT_FALSE(make(o).ok());
  std::vector<std::unique_ptr<backend::ModelInstance>> none;
  StatsRecorder stats;
  EXPECT_FALSE(DynamicBatchScheduler::Create(std::move(none), &stats, Options(4)).ok());
}

// --- a caller that may run the model (InferRequest::caller_may_run_model) ---

// A job whose caller allows the run on its thread; `answered_on` gets the thread that
// answered it.
Job CallerMayRun(Job job, std::thread::id* answered_on) {
  job.request.caller_may_run_model = true;
  job.done = [answered_on, done = std::move(job.done)](StatusOr<InferResponse> r) {
    *answered_on = std::this_thread::get_id();
    done(std::move(r));
  };
  return job;
}

TEST_F(DynamicBatchSchedulerTest, CallerRunsAShortRunWhenTheQueueIsEmptyAndAnInstanceIdle) {
  Start(Options(8));
  const std::thread::id me = std::this_thread::get_id();
  for (int id : {1, 2, 3}) model_.Release(id);
  // Until one run has been timed, every run goes to the instance's thread.
  std::thread::id first, second, third;
  Enqueue(CallerMayRun(MakeJob(1), &first));
  ExpectOk(1);
  EXPECT_NE(first, me);
  // The last run was short (no time passed): this one runs here, before Enqueue returns.
  Enqueue(CallerMayRun(MakeJob(2), &second));
  EXPECT_TRUE(answers_.Has(2)) << "not run on the caller's thread";
  EXPECT_EQ(second, me);
  ExpectOk(2);
  EXPECT_EQ(sched_->Pending(), 0u);
  // A caller that does not allow it never runs the model.
  Job plain = MakeJob(3);
  plain.done = [&third, done = std::move(plain.done)](StatusOr<InferResponse> r) {
    third = std::this_thread::get_id();
    done(std::move(r));
  };
  Enqueue(std::move(plain));
  ExpectOk(3);
  EXPECT_NE(third, me);
  const auto s = stats_.Snapshot("m", "1");
  EXPECT_EQ(s.execution_count, 3u);
  EXPECT_EQ(s.inference_stats.success.count, 3u);
}

TEST_F(DynamicBatchSchedulerTest, CallerNeverRunsALongRunNorWaitsForABusyInstance) {
  Start(Options(8));
  const std::thread::id me = std::this_thread::get_id();
  for (int id : {1, 2, 3}) model_.Release(id);
  // Each run takes just longer than the limit.
  const microseconds run = DynamicBatchOptions{}.caller_run_limit + microseconds(1);
  model_.SetRunHook([this, run] { clock_.Advance(run); });
  std::thread::id on1, on2, on3, on5;
  Enqueue(CallerMayRun(MakeJob(1), &on1));
  ExpectOk(1);
  Enqueue(CallerMayRun(MakeJob(2), &on2));  // the last run took longer than the limit
  ExpectOk(2);
  EXPECT_NE(on2, me);
  model_.SetRunHook(nullptr);
  Enqueue(CallerMayRun(MakeJob(3), &on3));  // still judged by the long run before
  ExpectOk(3);
  EXPECT_NE(on3, me);
  // Short runs now, but the one instance is busy: the request waits in the queue, and
  // Enqueue returns at once.
  Enqueue(MakeJob(4));
  model_.WaitRuns(4);
  Enqueue(CallerMayRun(MakeJob(5), &on5));
  EXPECT_EQ(sched_->Queued(), 1u);
  model_.Release(4);
  model_.Release(5);
  ExpectOk(4);
  ExpectOk(5);
  EXPECT_NE(on5, me);
}

// The event loop is held by one run at most about the limit: a request far larger than the
// ones timed is predicted far slower, and goes to the instance's thread (issue 11 §5).
TEST_F(DynamicBatchSchedulerTest, CallerNeverRunsARequestFarLargerThanTheRecentOnes) {
  Start(Options(8));
  const std::thread::id me = std::this_thread::get_id();
  for (int id : {1, 2, 3, 4}) model_.Release(id);
  // Each run takes a tenth of the limit, whatever its size.
  const microseconds run = DynamicBatchOptions{}.caller_run_limit / 10;
  model_.SetRunHook([this, run] { clock_.Advance(run); });
  std::thread::id on1, on2, on3, on4;
  Enqueue(CallerMayRun(MakeJob(1), &on1));  // 8 bytes; nothing timed yet
  ExpectOk(1);
  Enqueue(CallerMayRun(MakeJob(2), &on2));  // 8 bytes, like a run of a tenth of the limit
  ExpectOk(2);
  Enqueue(CallerMayRun(MakeJob(3, 1, 200), &on3));  // 800 bytes: predicted 10x the limit
  ExpectOk(3, 1, 200);
  Enqueue(CallerMayRun(MakeJob(4), &on4));  // small again
  ExpectOk(4);
  EXPECT_NE(on1, me);
  EXPECT_EQ(on2, me);
  EXPECT_NE(on3, me);
  EXPECT_EQ(on4, me);
  // A smaller request is never assumed faster than a timed run: after a large request that
  // took twice the limit, a small one goes to the instance's thread too.
  for (int id : {5, 6}) model_.Release(id);
  model_.SetRunHook([this] { clock_.Advance(2 * DynamicBatchOptions{}.caller_run_limit); });
  std::thread::id on5, on6;
  Enqueue(CallerMayRun(MakeJob(5, 1, 200), &on5));
  ExpectOk(5, 1, 200);
  model_.SetRunHook(nullptr);
  Enqueue(CallerMayRun(MakeJob(6), &on6));
  ExpectOk(6);
  EXPECT_NE(on5, me);
  EXPECT_NE(on6, me);
}

// A model whose run time its bytes do not predict (a Range's limit, a Loop's trip count): a
// request of the usual size that ran far over the limit keeps the model off the caller's
// thread long after the history has forgotten it (issue 11 §5).
TEST_F(DynamicBatchSchedulerTest, ARunFarOverItsPredictionKeepsTheModelOffTheCaller) {
  Start(Options(8));
  const std::thread::id me = std::this_thread::get_id();
  const microseconds limit = DynamicBatchOptions{}.caller_run_limit;
  for (int id = 1; id <= 14; ++id) model_.Release(id);
  model_.SetRunHook([this, limit] { clock_.Advance(limit / 10); });
  std::thread::id on1, on2, on3;
  Enqueue(CallerMayRun(MakeJob(1), &on1));  // timed on the instance's thread
  ExpectOk(1);
  Enqueue(CallerMayRun(MakeJob(2), &on2));
  ExpectOk(2);
  EXPECT_EQ(on2, me);
  // The same bytes, ten times the limit: it runs on the caller, as predicted, and holds it.
  model_.SetRunHook([this, limit] { clock_.Advance(limit * 10); });
  Enqueue(CallerMayRun(MakeJob(3), &on3));
  ExpectOk(3);
  EXPECT_EQ(on3, me);
  // Fast again; more fast runs than the history keeps, and none on the caller.
  model_.SetRunHook([this, limit] { clock_.Advance(limit / 10); });
  for (int id = 4; id <= 14; ++id) {
    std::thread::id on;
    Enqueue(CallerMayRun(MakeJob(id), &on));
    ExpectOk(id);
    EXPECT_NE(on, me) << "request " << id;
  }
}

TEST_F(DynamicBatchSchedulerTest, StopWaitsForARunOnACallersThread) {
  Start(Options(8));
  model_.Release(1);
  std::thread::id on1, on2;
  Enqueue(CallerMayRun(MakeJob(1), &on1));  // times a run, on the instance's thread
  ExpectOk(1);
  std::atomic<bool> stopped{false};
  bool stopped_before_answer = true;
  Job held = CallerMayRun(MakeJob(2), &on2);
  held.done = [&, done = std::move(held.done)](StatusOr<InferResponse> r) {
    stopped_before_answer = stopped.load();
    done(std::move(r));
  };
  std::thread::id caller_id;
  std::thread caller([&] {
    caller_id = std::this_thread::get_id();
    Enqueue(std::move(held));  // runs request 2 on this thread
  });
  model_.WaitRuns(2);
  std::thread stopper([&] {
    sched_->Stop();
    stopped = true;
  });
  model_.Release(2);
  caller.join();
  stopper.join();
  ExpectOk(2);
  EXPECT_EQ(on2, caller_id);
  EXPECT_FALSE(stopped_before_answer) << "Stop returned while a caller's run was unanswered";
}

}  // namespace
}  // namespace fastpath::scheduler
