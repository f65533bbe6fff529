#include "fastpath/scheduler/instance_pool_scheduler.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "fakes/as_nobody.h"
#include "fakes/manual_clock.h"
#include "fastpath/scheduler/dynamic_batch_scheduler.h"

namespace fastpath::scheduler {
namespace {

// Echoes its first input as output "OUT" and blocks while the gate is closed, so the
// test decides when compute finishes (no sleeps).
class GatedInstance : public backend::ModelInstance {
 public:
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
    int running = 0;
    int runs = 0;
    std::vector<std::thread::id> threads;  // the thread of each run, in order
    void Open() {
      std::lock_guard lock(mu);
      open = true;
      cv.notify_all();
    }
    void WaitRunning(int n) {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return running >= n; });
    }
  };
  explicit GatedInstance(Gate* gate) : gate_(gate) {}
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                    const std::vector<std::string>& names) override {
    std::unique_lock lock(gate_->mu);
    ++gate_->running;
    ++gate_->runs;
    gate_->threads.push_back(std::this_thread::get_id());
    gate_->cv.notify_all();
    gate_->cv.wait(lock, [&] { return gate_->open; });
    --gate_->running;
    if (inputs.empty()) return InvalidArgument("no input");
    Tensor out = inputs[0];
    out.name = names.at(0);
    return std::vector<Tensor>{out};
  }

 private:
  Gate* gate_;
};

std::vector<std::unique_ptr<backend::ModelInstance>> MakeInstances(int n, GatedInstance::Gate* g) {
  std::vector<std::unique_ptr<backend::ModelInstance>> v;
  for (int i = 0; i < n; ++i) v.push_back(std::make_unique<GatedInstance>(g));
  return v;
}

std::unique_ptr<InstancePoolScheduler> MakePool(
    std::vector<std::unique_ptr<backend::ModelInstance>> instances, StatsRecorder* stats,
    InstancePoolOptions options) {
  auto made = InstancePoolScheduler::Create(std::move(instances), stats, std::move(options));
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return std::move(made).value();
}

Job MakeJob(const std::string& id, std::promise<StatusOr<InferResponse>>* result,
            Clock::time_point arrival = SteadyClock()->Now()) {
  Job job;
  job.request.model_name = "m";
  job.request.model_version = "1";
  job.request.id = id;
  job.request.inputs.push_back({"IN", DataType::kBytes, {1}, ""});
  AppendBytesElement(&job.request.inputs[0].data, id);
  job.output_names = {"OUT"};
  job.arrival = arrival;
  job.done = [result](StatusOr<InferResponse> r) { result->set_value(std::move(r)); };
  return job;
}

TEST(InstancePoolSchedulerTest, EveryResponseGoesToItsRequest) {
  GatedInstance::Gate gate;
  gate.Open();
  StatsRecorder stats;
  auto pool = MakePool(MakeInstances(3, &gate), &stats, {});
  InstancePoolScheduler& sched = *pool;
  std::vector<std::promise<StatusOr<InferResponse>>> results(50);
  for (int i = 0; i < 50; ++i) sched.Enqueue(MakeJob("req" + std::to_string(i), &results[i]));
  for (int i = 0; i < 50; ++i) {
    auto r = results[i].get_future().get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->id, "req" + std::to_string(i));
    std::string expected;
    AppendBytesElement(&expected, "req" + std::to_string(i));
    ASSERT_EQ(r->outputs.size(), 1u);
    EXPECT_EQ(r->outputs[0].name, "OUT");
    EXPECT_EQ(r->outputs[0].data, expected);
  }
  auto s = stats.Snapshot("m", "1");
  EXPECT_EQ(s.inference_count, 50u);
  EXPECT_EQ(s.execution_count, 50u);
  EXPECT_EQ(s.inference_stats.success.count, 50u);
  ASSERT_EQ(s.batch_stats.size(), 1u);
  EXPECT_EQ(s.batch_stats[0].batch_size, 1u);
}

// A hold (Job::hold, the rollout gate's) runs with the instance it holds, in place of a
// run of the model; it is answered with what it returned and not counted as user traffic.
TEST(InstancePoolSchedulerTest, AHoldRunsWithTheInstanceItHoldsInPlaceOfTheModel) {
  GatedInstance::Gate gate;
  gate.Open();
  StatsRecorder stats;
  auto pool = MakePool(MakeInstances(1, &gate), &stats, {});
  InstancePoolScheduler& sched = *pool;
  std::promise<StatusOr<InferResponse>> hold_result, refused_result;
  Job hold = MakeJob("hold", &hold_result);
  hold.canary = true;
  const std::vector<Tensor> inputs = hold.request.inputs;
  const std::vector<std::string> names = hold.output_names;
  hold.hold = [&](backend::ModelInstance& instance) {
    for (int i = 0; i < 2; ++i) {
      auto outputs = instance.Run(inputs, names);
      if (!outputs.ok()) return outputs.status();
    }
    return Status::Ok();
  };
  sched.Enqueue(std::move(hold));
  auto answer = hold_result.get_future().get();
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_TRUE(answer->outputs.empty());
  EXPECT_EQ(gate.runs, 2);
  Job refused = MakeJob("refused", &refused_result);
  refused.canary = true;
  refused.hold = [](backend::ModelInstance&) { return FailedPrecondition("measured too slow"); };
  sched.Enqueue(std::move(refused));
  auto failed = refused_result.get_future().get();
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("measured too slow"), std::string::npos);
  EXPECT_EQ(gate.runs, 2);
  EXPECT_EQ(stats.Snapshot("m", "1").inference_count, 0u);
}

TEST(InstancePoolSchedulerTest, AJobGoesToTheFirstFreeInstance) {
  GatedInstance::Gate gate;
  StatsRecorder stats;
  auto pool = MakePool(MakeInstances(2, &gate), &stats, {});
  InstancePoolScheduler& sched = *pool;
  std::vector<std::promise<StatusOr<InferResponse>>> results(3);
  for (int i = 0; i < 3; ++i) sched.Enqueue(MakeJob(std::to_string(i), &results[i]));
  gate.WaitRunning(2);  // both instances busy, the third job waits in the queue
  EXPECT_EQ(sched.Pending(), 3u);
  gate.Open();
  for (auto& r : results) EXPECT_TRUE(r.get_future().get().ok());
  EXPECT_EQ(gate.runs, 3);
}

TEST(InstancePoolSchedulerTest, AFullQueueRejectsAtOnce) {
  GatedInstance::Gate gate;
  StatsRecorder stats;
  InstancePoolOptions options;
  options.max_queue_size = 1;
  auto pool = MakePool(MakeInstances(1, &gate), &stats, options);
  InstancePoolScheduler& sched = *pool;
  std::vector<std::promise<StatusOr<InferResponse>>> results(3);
  sched.Enqueue(MakeJob("running", &results[0]));
  gate.WaitRunning(1);
  sched.Enqueue(MakeJob("queued", &results[1]));
  sched.Enqueue(MakeJob("rejected", &results[2]));
  auto rejected = results[2].get_future().get();
  EXPECT_EQ(rejected.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(rejected.status().message().find("full"), std::string::npos);
  gate.Open();
  EXPECT_TRUE(results[0].get_future().get().ok());
  EXPECT_TRUE(results[1].get_future().get().ok());
  EXPECT_EQ(stats.Snapshot("m", "1").inference_stats.fail.count, 1u);
}

TEST(InstancePoolSchedulerTest, AnExpiredRequestNeverReachesTheModel) {
  GatedInstance::Gate gate;
  gate.Open();
  StatsRecorder stats;
  testing::ManualClock clock;
  const Clock::time_point fake_now = clock.Now();
  InstancePoolOptions options;
  options.clock = &clock;
  auto pool = MakePool(MakeInstances(1, &gate), &stats, options);
  InstancePoolScheduler& sched = *pool;
  std::promise<StatusOr<InferResponse>> result;
  Job job = MakeJob("late", &result, fake_now);
  job.request.deadline = fake_now - std::chrono::microseconds(1);
  sched.Enqueue(std::move(job));
  auto r = result.get_future().get();
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(gate.runs, 0);
}

TEST(InstancePoolSchedulerTest, StopAnswersEveryAcceptedJobAndRejectsNewOnes) {
  GatedInstance::Gate gate;
  StatsRecorder stats;
  auto sched = MakePool(MakeInstances(1, &gate), &stats, {});
  std::vector<std::promise<StatusOr<InferResponse>>> results(4);
  for (int i = 0; i < 3; ++i) sched->Enqueue(MakeJob(std::to_string(i), &results[i]));
  gate.WaitRunning(1);
  std::thread stopper([&] { sched->Stop(); });
  // Stop must wait for the running and queued jobs; open the gate so they can finish.
  gate.Open();
  stopper.join();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(results[i].get_future().get().ok());
  sched->Enqueue(MakeJob("after", &results[3]));
  EXPECT_EQ(results[3].get_future().get().status().code(), StatusCode::kUnavailable);
}

// BeginStop is Stop without the wait (a server stopping thousands of models begins every
// stop first, so that their threads end together): it returns while a run is held, refuses
// what comes after, and what it accepted before runs.
TEST(InstancePoolSchedulerTest, BeginStopRefusesNewJobsWithoutWaitingForTheAcceptedOnes) {
  GatedInstance::Gate gate;
  StatsRecorder stats;
  auto sched = MakePool(MakeInstances(1, &gate), &stats, {});
  std::vector<std::promise<StatusOr<InferResponse>>> results(3);
  for (int i = 0; i < 2; ++i) sched->Enqueue(MakeJob(std::to_string(i), &results[i]));
  gate.WaitRunning(1);
  sched->BeginStop();
  sched->Enqueue(MakeJob("after", &results[2]));
  EXPECT_EQ(results[2].get_future().get().status().code(), StatusCode::kUnavailable);
  gate.Open();
  sched->Stop();
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(results[i].get_future().get().ok());
}

TEST(InstancePoolSchedulerTest, ModelErrorsReachTheCaller) {
  GatedInstance::Gate gate;
  gate.Open();
  StatsRecorder stats;
  auto pool = MakePool(MakeInstances(1, &gate), &stats, {});
  InstancePoolScheduler& sched = *pool;
  std::promise<StatusOr<InferResponse>> result;
  Job job = MakeJob("x", &result);
  job.request.inputs.clear();
  sched.Enqueue(std::move(job));
  EXPECT_EQ(result.get_future().get().status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(stats.Snapshot("m", "1").inference_stats.fail.count, 1u);
}

}  // namespace
// ---- Runs on the caller's thread (InferRequest::caller_may_run_model) ----

TEST(InstancePoolSchedulerTest, ShortRequestOnAnIdleInstanceRunsOnTheCallersThread) {
  GatedInstance::Gate gate;
  gate.Open();
  StatsRecorder stats;
  // Every reading of the clock is 10 us after the previous one: the timed run "takes" a few
  // tens of us, far under the limit, however slow the machine (a sanitizer's build under
  // load once timed it above 1 ms on the steady clock).
  testing::ManualClock clock(std::chrono::microseconds(10));
  const Clock::time_point origin = clock.Now();
  InstancePoolOptions options;
  options.clock = &clock;
  auto pool = MakePool(MakeInstances(1, &gate), &stats, options);
  InstancePoolScheduler& sched = *pool;
  // Until one run has been timed, the worker runs it; the worker answers before it lets
  // the instance go, so wait until the instance is idle again.
  std::promise<StatusOr<InferResponse>> timed;
  sched.Enqueue(MakeJob("timed", &timed, origin));
  ASSERT_TRUE(timed.get_future().get().ok());
  while (sched.Pending() != 0) std::this_thread::yield();
  std::promise<StatusOr<InferResponse>> result;
  auto answered = result.get_future();
  Job job = MakeJob("here", &result, origin);
  job.request.caller_may_run_model = true;
  sched.Enqueue(std::move(job));
  // Answered before Enqueue returned, by this thread.
  ASSERT_EQ(answered.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  auto response = answered.get();
  ASSERT_TRUE(response.ok()) << response.status().message();
  EXPECT_EQ(response->id, "here");
  ASSERT_EQ(gate.threads.size(), 2u);
  EXPECT_NE(gate.threads[0], std::this_thread::get_id());
  EXPECT_EQ(gate.threads[1], std::this_thread::get_id());
  EXPECT_EQ(sched.Pending(), 0u);
  EXPECT_EQ(stats.Snapshot("m", "1").inference_stats.success.count, 2u);
}

TEST(InstancePoolSchedulerTest, WithoutTheCallersLeaveAWorkerRunsIt) {
  GatedInstance::Gate gate;
  gate.Open();
  StatsRecorder stats;
  auto pool = MakePool(MakeInstances(1, &gate), &stats, {});
  InstancePoolScheduler& sched = *pool;
  std::promise<StatusOr<InferResponse>> result;
  sched.Enqueue(MakeJob("worker", &result));
  ASSERT_TRUE(result.get_future().get().ok());
  ASSERT_EQ(gate.threads.size(), 1u);
  EXPECT_NE(gate.threads[0], std::this_thread::get_id());
}

TEST(InstancePoolSchedulerTest, ABusyInstanceSendsTheCallersRequestToItsWorker) {
  GatedInstance::Gate gate;
  StatsRecorder stats;
  auto pool = MakePool(MakeInstances(1, &gate), &stats, {});
  InstancePoolScheduler& sched = *pool;
  std::vector<std::promise<StatusOr<InferResponse>>> results(2);
  sched.Enqueue(MakeJob("first", &results[0]));
  gate.WaitRunning(1);  // the only instance is busy on its worker
  Job job = MakeJob("second", &results[1]);
  job.request.caller_may_run_model = true;
  sched.Enqueue(std::move(job));  // queued: returns without running it
  EXPECT_EQ(sched.Pending(), 2u);
  gate.Open();
  EXPECT_EQ(results[0].get_future().get()->id, "first");
  EXPECT_EQ(results[1].get_future().get()->id, "second");
  ASSERT_EQ(gate.threads.size(), 2u);
  EXPECT_NE(gate.threads[1], std::this_thread::get_id());
}

TEST(InstancePoolSchedulerTest, ALongLastRunSendsTheCallersRequestToAWorker) {
  GatedInstance::Gate gate;
  gate.Open();
  StatsRecorder stats;
  InstancePoolOptions options;
  options.caller_run_limit = std::chrono::microseconds(500);
  // Every reading of the clock is 1 ms after the previous one: each run "takes" 1 ms.
  testing::ManualClock clock(std::chrono::milliseconds(1));
  const Clock::time_point origin = clock.Now();
  options.clock = &clock;
  auto pool = MakePool(MakeInstances(1, &gate), &stats, options);
  InstancePoolScheduler& sched = *pool;
  std::vector<std::promise<StatusOr<InferResponse>>> results(2);
  for (int i = 0; i < 2; ++i) {
    Job job = MakeJob(std::to_string(i), &results[i], origin);
    job.request.caller_may_run_model = true;
    sched.Enqueue(std::move(job));
    ASSERT_TRUE(results[i].get_future().get().ok());
  }
  ASSERT_EQ(gate.threads.size(), 2u);
  EXPECT_NE(gate.threads[0], std::this_thread::get_id());  // nothing timed yet: a worker
  EXPECT_NE(gate.threads[1], std::this_thread::get_id());  // 1 ms > 500 us: a worker
}

// The event loop is held by one run at most about the limit: a request far larger than the
// ones timed is predicted far slower, and its run goes to a worker, however short the last
// run was (issue 11 §5).
TEST(InstancePoolSchedulerTest, ARequestFarLargerThanTheRecentOnesGoesToAWorker) {
  GatedInstance::Gate gate;
  gate.Open();
  StatsRecorder stats;
  InstancePoolOptions options;
  options.caller_run_limit = std::chrono::microseconds(500);
  // Every reading of the clock is 10 us after the previous one: each run "takes" 10 us, or
  // a few times that when other threads read the clock meanwhile, whatever its size.
  testing::ManualClock clock(std::chrono::microseconds(10));
  const Clock::time_point origin = clock.Now();
  options.clock = &clock;
  auto pool = MakePool(MakeInstances(1, &gate), &stats, options);
  InstancePoolScheduler& sched = *pool;
  // 5 input bytes each ("a", "b", "c" as one BYTES element), then 1004 (200 times more).
  const std::vector<std::string> ids = {"a", "b", std::string(1000, 'x'), "c"};
  std::vector<std::promise<StatusOr<InferResponse>>> results(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    Job job = MakeJob(ids[i], &results[i], origin);
    job.request.caller_may_run_model = true;
    sched.Enqueue(std::move(job));
    ASSERT_TRUE(results[i].get_future().get().ok());
    // A worker answers before it lets its instance go: wait until the instance is idle.
    while (sched.Pending() != 0) std::this_thread::yield();
  }
  const std::thread::id me = std::this_thread::get_id();
  ASSERT_EQ(gate.threads.size(), 4u);
  EXPECT_NE(gate.threads[0], me) << "nothing timed yet";
  EXPECT_EQ(gate.threads[1], me) << "the size of a short run";
  EXPECT_NE(gate.threads[2], me) << "200 times the bytes of a run of at least 10 us";
  EXPECT_EQ(gate.threads[3], me) << "small again";
}

TEST(InstancePoolSchedulerTest, StopWaitsForARunOnACallersThread) {
  GatedInstance::Gate gate;
  StatsRecorder stats;
  auto pool = MakePool(MakeInstances(1, &gate), &stats, {});
  InstancePoolScheduler& sched = *pool;
  std::promise<StatusOr<InferResponse>> result;
  auto answered = result.get_future();
  std::thread caller([&] {
    Job job = MakeJob("caller", &result);
    job.request.caller_may_run_model = true;
    sched.Enqueue(std::move(job));
  });
  gate.WaitRunning(1);
  std::promise<void> stopped;
  std::thread stopper([&] {
    sched.Stop();
    stopped.set_value();
  });
  // Stop cannot return while the caller's run holds the instance.
  auto stop_done = stopped.get_future();
  EXPECT_EQ(stop_done.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  gate.Open();
  stop_done.wait();
  caller.join();
  stopper.join();
  EXPECT_TRUE(answered.get().ok());
}

}  // namespace fastpath::scheduler

namespace fastpath::scheduler {
namespace {

// OUT = IN (FP32 rows) for at most `max_rows` rows; more runs out of memory.
class MemoryBoundInstance : public backend::ModelInstance {
 public:
  explicit MemoryBoundInstance(int64_t max_rows) : max_rows_(max_rows) {}
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                    const std::vector<std::string>& names) override {
    rows_run.push_back(inputs.at(0).shape.at(0));
    if (inputs[0].shape[0] > max_rows_) return ResourceExhausted("out of memory: too many rows");
    Tensor out = inputs[0];
    out.name = names.at(0);
    return std::vector<Tensor>{out};
  }
  std::vector<int64_t> rows_run;

 private:
  int64_t max_rows_;
};

StatusOr<InferResponse> RunRows(int64_t max_rows, int64_t rows, std::vector<int64_t>* rows_run) {
  auto instance = std::make_unique<MemoryBoundInstance>(max_rows);
  MemoryBoundInstance* raw = instance.get();
  std::vector<std::unique_ptr<backend::ModelInstance>> instances;
  instances.push_back(std::move(instance));
  StatsRecorder stats;
  StatusOr<InferResponse> answer = Internal("not answered");
  {
    auto pool = MakePool(std::move(instances), &stats, {});
    InstancePoolScheduler& sched = *pool;
    std::promise<StatusOr<InferResponse>> result;
    Job job;
    job.request.model_name = "m";
    job.request.model_version = "1";
    Tensor in{"IN", DataType::kFp32, {rows, 2}, {}};
    for (int64_t i = 0; i < rows * 2; ++i) {
      const float v = static_cast<float>(i);
      in.data.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
    job.request.inputs.push_back(std::move(in));
    job.output_names = {"OUT"};
    job.batch_size = static_cast<uint64_t>(rows);
    job.arrival = SteadyClock()->Now();
    job.done = [&result](StatusOr<InferResponse> r) { result.set_value(std::move(r)); };
    sched.Enqueue(std::move(job));
    answer = result.get_future().get();
    sched.Stop();
    *rows_run = raw->rows_run;  // the scheduler owns the instance
  }
  return answer;
}

TEST(InstancePoolSchedulerTest, ARequestThatRunsOutOfMemoryIsRetriedOnceInHalvesByRows) {
  std::vector<int64_t> rows_run;
  const auto answer = RunRows(/*max_rows=*/3, /*rows=*/5, &rows_run);
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(rows_run, (std::vector<int64_t>{5, 2, 3}));
  ASSERT_EQ(answer->outputs.size(), 1u);
  EXPECT_EQ(answer->outputs[0].shape, (std::vector<int64_t>{5, 2}));
  ASSERT_EQ(answer->outputs[0].data.size(), 10 * sizeof(float));
  for (int i = 0; i < 10; ++i) {  // the halves joined back in order
    float v = 0;
    std::memcpy(&v, answer->outputs[0].data.data() + i * sizeof v, sizeof v);
    EXPECT_EQ(v, static_cast<float>(i));
  }

  // A single row cannot be split, and a half that does not fit fails the request.
  EXPECT_EQ(RunRows(0, 1, &rows_run).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(rows_run, (std::vector<int64_t>{1}));
  EXPECT_EQ(RunRows(1, 4, &rows_run).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(rows_run, (std::vector<int64_t>{4, 2}));
}

// Creates both schedulers as a user other than root (whom the limit does not bind) under a
// limit of 1 process, where no thread can start; exits 0 when both loads failed as they must.
[[noreturn]] void CreateSchedulersAtTheThreadLimit() {
  testing::BecomeNobody();
  const rlimit one{1, 1};
  if (setrlimit(RLIMIT_NPROC, &one) != 0) {
    std::perror("setrlimit(RLIMIT_NPROC)");
    std::_Exit(4);
  }
  GatedInstance::Gate gate;
  StatsRecorder stats;
  auto pool = InstancePoolScheduler::Create(MakeInstances(2, &gate), &stats, {});
  DynamicBatchOptions batching;
  batching.max_batch_size = 4;
  auto batcher = DynamicBatchScheduler::Create(MakeInstances(2, &gate), &stats, batching);
  for (const Status& s : {pool.status(), batcher.status()}) {
    if (s.code() != StatusCode::kResourceExhausted ||
        s.message().find("thread limit") == std::string::npos) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      std::_Exit(1);
    }
  }
  std::_Exit(0);
}

// A process at its thread limit (ulimit -u, a pod's pids limit) cannot start a scheduler's
// threads: the model's load fails RESOURCE_EXHAUSTED, naming the limit. std::thread's
// exception in the constructor aborted the whole server (a joinable thread destroyed), in
// a poll that loaded one model too many. In a child process.
TEST(SchedulerThreadsTest, AtTheThreadLimitTheLoadFailsAndTheProcessLives) {
  if (!testing::CanRunAsNobody()) GTEST_SKIP() << "cannot run a child as another user here";
  EXPECT_EXIT(CreateSchedulersAtTheThreadLimit(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace fastpath::scheduler
