// After an out-of-memory run an instance is checked, and rebuilt when it fails the check,
// before it takes more work; a version with no instance left says so (issue 13).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fakes/manual_clock.h"
#include "fastpath/scheduler/dynamic_batch_scheduler.h"
#include "fastpath/scheduler/instance_pool_scheduler.h"
#include "fastpath/scheduler/recovering_instance.h"

namespace fastpath::scheduler {
namespace {

// Shared by a test and its fake instances.
struct Script {
  std::mutex mu;
  std::condition_variable cv;
  bool broken = false;          // every run fails (not for lack of memory)
  bool break_on_oom = false;    // running out of memory breaks the session (sets broken)
  bool recover_ok = false;      // what RecoverFromOutOfMemory says (SelfCheckingInstance)
  bool hold_recovery = false;   // RecoverFromOutOfMemory waits while this is set
  int recover_calls = 0;
  int runs = 0;
  std::vector<std::thread::id> run_threads;
  std::vector<std::thread::id> recover_threads;
  int destroyed = 0;
  void WaitRecoverCalls(int n) {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return recover_calls >= n; });
  }
};

// Runs out of memory on an input holding "oom", or "big" in a batch of 2 rows or more;
// fails everything while the script says broken; otherwise echoes its input as "OUT".
class ScriptedInstance : public backend::ModelInstance {
 public:
  explicit ScriptedInstance(Script* script) : script_(script) {}
  ~ScriptedInstance() override {
    std::lock_guard lock(script_->mu);
    ++script_->destroyed;
  }
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                    const std::vector<std::string>& names) override {
    {
      std::lock_guard lock(script_->mu);
      ++script_->runs;
      script_->run_threads.push_back(std::this_thread::get_id());
      if (script_->broken) return Internal("CUDA failure 700: an illegal memory access");
    }
    const Tensor& in = inputs.at(0);
    if (in.data.find("oom") != std::string::npos ||
        (in.data.find("big") != std::string::npos && in.shape.at(0) >= 2)) {
      ++out_of_memory_runs_;
      std::lock_guard lock(script_->mu);
      if (script_->break_on_oom) script_->broken = true;
      return ResourceExhausted("out of memory: Failed to allocate memory for requested buffer");
    }
    Tensor out = inputs[0];
    out.name = names.at(0);
    return std::vector<Tensor>{out};
  }
  std::optional<backend::MemoryStats> memory_stats() const override {
    backend::MemoryStats stats;
    stats.out_of_memory_runs = out_of_memory_runs_;
    return stats;
  }

 protected:
  Script* script_;

 private:
  std::atomic<uint64_t> out_of_memory_runs_{0};
};

// A scheduler's view: recovery succeeds as the script says.
class SelfCheckingInstance final : public ScriptedInstance {
 public:
  using ScriptedInstance::ScriptedInstance;
  Status RecoverFromOutOfMemory() override {
    std::unique_lock lock(script_->mu);
    script_->cv.wait(lock, [&] { return !script_->hold_recovery; });
    ++script_->recover_calls;
    script_->recover_threads.push_back(std::this_thread::get_id());
    script_->cv.notify_all();
    if (script_->recover_ok) return Status::Ok();
    return Unavailable("instance of model 'm' is out of service: it could not be rebuilt");
  }
};

// One BYTES input "IN" with one row per element of `rows`.
std::vector<Tensor> Input(const std::string& text, int rows = 1) {
  std::vector<Tensor> inputs{{"IN", DataType::kBytes, {rows}, ""}};
  for (int i = 0; i < rows; ++i) AppendBytesElement(&inputs[0].data, text);
  return inputs;
}

RecoveryProbe Probe() { return {Input("probe"), {"OUT"}}; }

// --- RecoveringInstance -----------------------------------------------------------------

struct Rebuilds {
  Script* script;
  int calls = 0;
  int destroyed_before_last = -1;  // the script's destroyed count when rebuild last ran
  Status fail = Status::Ok();
  bool heal = false;  // a rebuild clears the script's `broken`
  RecoveringInstance::Rebuild Fn() {
    return [this]() -> StatusOr<std::unique_ptr<backend::ModelInstance>> {
      ++calls;
      {
        std::lock_guard lock(script->mu);
        destroyed_before_last = script->destroyed;
        if (heal) script->broken = false;
      }
      if (!fail.ok()) return fail;
      return std::unique_ptr<backend::ModelInstance>(std::make_unique<ScriptedInstance>(script));
    };
  }
};

TEST(RecoveringInstanceTest, AnInstanceThatAnswersItsCheckServesOnWithoutARebuild) {
  Script script;
  Rebuilds rebuilds{&script};
  RecoveringInstance instance(std::make_unique<ScriptedInstance>(&script), "instance 0", Probe(),
                              rebuilds.Fn());
  EXPECT_EQ(instance.Run(Input("oom"), {"OUT"}).status().code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE(instance.RecoverFromOutOfMemory().ok());
  EXPECT_EQ(rebuilds.calls, 0);
  EXPECT_EQ(script.runs, 2);  // the failed run and the check
  EXPECT_TRUE(instance.Run(Input("x"), {"OUT"}).ok());
}

TEST(RecoveringInstanceTest, AnInstanceThatFailsItsCheckIsDroppedThenRebuilt) {
  Script script;
  Rebuilds rebuilds{&script};
  RecoveringInstance instance(std::make_unique<ScriptedInstance>(&script), "instance 0", Probe(),
                              rebuilds.Fn());
  ASSERT_EQ(instance.Run(Input("oom"), {"OUT"}).status().code(), StatusCode::kResourceExhausted);
  script.broken = true;  // as a session that fails every run after its OOM
  rebuilds.heal = true;  // a fresh copy works
  ASSERT_TRUE(instance.RecoverFromOutOfMemory().ok());
  EXPECT_EQ(rebuilds.calls, 1);
  EXPECT_EQ(rebuilds.destroyed_before_last, 1);  // the broken copy went before the new one
  EXPECT_TRUE(instance.Run(Input("x"), {"OUT"}).ok());
}

TEST(RecoveringInstanceTest, ARebuildThatFailsLeavesTheInstanceOutOfServiceUntilOneWorks) {
  Script script;
  Rebuilds rebuilds{&script};
  rebuilds.fail = Internal("cannot open model.onnx");
  RecoveringInstance instance(std::make_unique<ScriptedInstance>(&script), "instance 0 of model 'm'",
                              Probe(), rebuilds.Fn());
  script.broken = true;
  const Status first = instance.RecoverFromOutOfMemory();
  EXPECT_EQ(first.code(), StatusCode::kUnavailable);
  EXPECT_NE(first.message().find("instance 0 of model 'm' is out of service"), std::string::npos)
      << first.message();
  EXPECT_NE(first.message().find("cannot open model.onnx"), std::string::npos);
  const auto refused = instance.Run(Input("x"), {"OUT"});
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("could not be rebuilt"), std::string::npos);
  EXPECT_EQ(instance.memory_stats(), std::nullopt);

  // The next try rebuilds again, and the copy serves.
  script.broken = false;
  rebuilds.fail = Status::Ok();
  ASSERT_TRUE(instance.RecoverFromOutOfMemory().ok());
  EXPECT_EQ(rebuilds.calls, 2);
  EXPECT_TRUE(instance.Run(Input("x"), {"OUT"}).ok());
}

TEST(RecoveringInstanceTest, AProbeThatAFreshCopyFailsIsNotValidInputAndIsDropped) {
  Script script;
  Rebuilds rebuilds{&script};
  RecoveringInstance instance(std::make_unique<ScriptedInstance>(&script), "instance 0", Probe(),
                              rebuilds.Fn());
  script.broken = true;  // fails the probe on the old copy and on the fresh one alike
  ASSERT_TRUE(instance.RecoverFromOutOfMemory().ok());
  EXPECT_EQ(rebuilds.calls, 1);
  const int runs = script.runs;
  // Without a probe the instance is trusted: nothing runs, nothing is rebuilt.
  ASSERT_TRUE(instance.RecoverFromOutOfMemory().ok());
  EXPECT_EQ(script.runs, runs);
  EXPECT_EQ(rebuilds.calls, 1);
}

TEST(RecoveringInstanceTest, ACheckShortOfMemoryKeepsTheInstanceOutWithoutARebuild) {
  Script script;
  Rebuilds rebuilds{&script};
  RecoveryProbe big{Input("oom"), {"OUT"}};  // memory stays short for it
  RecoveringInstance instance(std::make_unique<ScriptedInstance>(&script), "instance 0",
                              std::move(big), rebuilds.Fn());
  const Status recovered = instance.RecoverFromOutOfMemory();
  EXPECT_EQ(recovered.code(), StatusCode::kUnavailable);
  EXPECT_NE(recovered.message().find("out of service until memory frees"), std::string::npos)
      << recovered.message();
  // A fresh copy would need more than the check: none is made, the copy is kept.
  EXPECT_EQ(rebuilds.calls, 0);
  EXPECT_TRUE(instance.memory_stats().has_value());
}

TEST(RecoveringInstanceTest, AFreshCopyShortOfMemoryStaysOut) {
  Script script;
  Rebuilds rebuilds{&script};
  rebuilds.heal = true;
  RecoveryProbe big{Input("oom"), {"OUT"}};
  RecoveringInstance instance(std::make_unique<ScriptedInstance>(&script), "instance 0",
                              std::move(big), rebuilds.Fn());
  script.broken = true;  // the old copy fails its check for another reason: rebuilt
  const Status recovered = instance.RecoverFromOutOfMemory();
  EXPECT_EQ(recovered.code(), StatusCode::kUnavailable);
  EXPECT_NE(recovered.message().find("rebuilt copy ran out of memory too"), std::string::npos)
      << recovered.message();
  EXPECT_EQ(rebuilds.calls, 1);
  EXPECT_EQ(instance.memory_stats(), std::nullopt);  // out of service: nothing to read
  EXPECT_EQ(instance.Run(Input("x"), {"OUT"}).status().code(), StatusCode::kUnavailable);
}

TEST(RecoveringInstanceTest, OutOfMemoryRunsAreCountedOverEveryCopy) {
  Script script;
  Rebuilds rebuilds{&script};
  RecoveringInstance instance(std::make_unique<ScriptedInstance>(&script), "instance 0", Probe(),
                              rebuilds.Fn());
  ASSERT_FALSE(instance.Run(Input("oom"), {"OUT"}).ok());
  ASSERT_FALSE(instance.Run(Input("oom"), {"OUT"}).ok());
  script.broken = true;
  rebuilds.heal = true;
  ASSERT_TRUE(instance.RecoverFromOutOfMemory().ok());  // dropped and rebuilt
  ASSERT_FALSE(instance.Run(Input("oom"), {"OUT"}).ok());
  ASSERT_TRUE(instance.memory_stats().has_value());
  EXPECT_EQ(instance.memory_stats()->out_of_memory_runs, 3u);
}

TEST(RecoveringInstanceTest, WithoutAProbeAnInstanceIsTrusted) {
  Script script;
  Rebuilds rebuilds{&script};
  RecoveringInstance instance(std::make_unique<ScriptedInstance>(&script), "instance 0",
                              std::nullopt, rebuilds.Fn());
  script.broken = true;
  EXPECT_TRUE(instance.RecoverFromOutOfMemory().ok());
  EXPECT_EQ(script.runs, 0);
  EXPECT_EQ(rebuilds.calls, 0);
}

// --- the schedulers ---------------------------------------------------------------------

Job MakeJob(const std::string& text, std::promise<StatusOr<InferResponse>>* result,
            Clock* clock, bool caller_may_run = false, int rows = 1) {
  Job job;
  job.request.model_name = "m";
  job.request.model_version = "1";
  job.request.inputs = Input(text, rows);
  job.batch_size = static_cast<uint64_t>(rows);
  job.request.caller_may_run_model = caller_may_run;
  job.output_names = {"OUT"};
  job.arrival = clock->Now();
  job.done = [result](StatusOr<InferResponse> r) { result->set_value(std::move(r)); };
  return job;
}

StatusOr<InferResponse> Send(Scheduler& scheduler, const std::string& text, Clock* clock,
                             bool caller_may_run = false, int rows = 1) {
  std::promise<StatusOr<InferResponse>> result;
  auto answered = result.get_future();
  scheduler.Enqueue(MakeJob(text, &result, clock, caller_may_run, rows));
  return answered.get();
}

// Health() turns to Unavailable once the only instance's first recovery failed.
void WaitOutOfService(const Scheduler& scheduler) {
  while (scheduler.Health().ok()) std::this_thread::yield();
}

std::vector<std::unique_ptr<backend::ModelInstance>> SelfChecking(int n, Script* script) {
  std::vector<std::unique_ptr<backend::ModelInstance>> v;
  for (int i = 0; i < n; ++i) v.push_back(std::make_unique<SelfCheckingInstance>(script));
  return v;
}

class OutOfMemoryRecoveryTest : public ::testing::TestWithParam<bool> {
 protected:
  // true: the dynamic batcher; false: the instance pool.
  std::unique_ptr<Scheduler> Make(int instances) {
    if (!GetParam()) {
      InstancePoolOptions options;
      options.clock = &clock_;
      auto made =
          InstancePoolScheduler::Create(SelfChecking(instances, &script_), &stats_, options);
      EXPECT_TRUE(made.ok());
      return std::move(made).value();
    }
    DynamicBatchOptions options;
    options.max_batch_size = 4;
    options.clock = &clock_;
    auto made = DynamicBatchScheduler::Create(SelfChecking(instances, &script_), &stats_, options);
    EXPECT_TRUE(made.ok());
    return std::move(made).value();
  }

  testing::ManualClock clock_;
  StatsRecorder stats_;
  Script script_;
};

TEST_P(OutOfMemoryRecoveryTest, AnInstanceThatRecoversServesAgain) {
  script_.recover_ok = true;
  auto scheduler = Make(1);
  const auto failed = Send(*scheduler, "oom", &clock_);
  EXPECT_EQ(failed.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Send(*scheduler, "x", &clock_).ok());
  EXPECT_EQ(script_.recover_calls, 1);  // before the next request ran
  EXPECT_TRUE(scheduler->Health().ok());
}

TEST_P(OutOfMemoryRecoveryTest, WithNoInstanceLeftTheModelSaysWhyUntilOneIsRebuilt) {
  auto scheduler = Make(1);
  EXPECT_EQ(Send(*scheduler, "oom", &clock_).status().code(), StatusCode::kResourceExhausted);
  WaitOutOfService(*scheduler);
  const Status health = scheduler->Health();
  EXPECT_EQ(health.code(), StatusCode::kUnavailable);
  EXPECT_NE(health.message().find("no instance can serve"), std::string::npos);
  EXPECT_NE(health.message().find("could not be rebuilt"), std::string::npos);
  // A new request is refused at once, with the reason, instead of waiting in the queue.
  const auto refused = Send(*scheduler, "x", &clock_);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("could not be rebuilt"), std::string::npos);

  // The next try, a pause later, works.
  {
    std::lock_guard lock(script_.mu);
    script_.recover_ok = true;
  }
  // The recovering thread may not wait on the clock yet: move it until the next try came.
  for (;;) {
    {
      std::lock_guard lock(script_.mu);
      if (script_.recover_calls >= 2) break;
    }
    clock_.Advance(std::chrono::seconds(1));
    std::this_thread::yield();
  }
  while (!scheduler->Health().ok()) std::this_thread::yield();
  EXPECT_TRUE(Send(*scheduler, "x", &clock_).ok());
}

TEST_P(OutOfMemoryRecoveryTest, TheOtherInstancesServeWhileOneIsOutOfService) {
  auto scheduler = Make(2);
  EXPECT_EQ(Send(*scheduler, "oom", &clock_).status().code(), StatusCode::kResourceExhausted);
  script_.WaitRecoverCalls(1);
  EXPECT_TRUE(scheduler->Health().ok());
  // The instance out of service takes nothing: every request reaches the other one.
  for (int i = 0; i < 8; ++i) {
    EXPECT_TRUE(Send(*scheduler, "x" + std::to_string(i), &clock_).ok()) << i;
  }
  // Stop ends the pause and joins the recovering thread.
  scheduler->Stop();
}

TEST_P(OutOfMemoryRecoveryTest, ARunOnTheCallersThreadRecoversOnTheInstancesOwnThread) {
  auto scheduler = Make(1);
  // The batcher lets a caller run only after a run alone has shown it is short.
  ASSERT_TRUE(Send(*scheduler, "warm", &clock_, /*caller_may_run=*/true).ok());
  // A worker answers before it lets its instance go: wait until the instance is idle.
  while (scheduler->Pending() != 0) std::this_thread::yield();
  EXPECT_EQ(Send(*scheduler, "oom", &clock_, /*caller_may_run=*/true).status().code(),
            StatusCode::kResourceExhausted);
  WaitOutOfService(*scheduler);
  std::lock_guard lock(script_.mu);
  EXPECT_EQ(script_.run_threads.back(), std::this_thread::get_id());  // the OOM run: here
  ASSERT_EQ(script_.recover_threads.size(), 1u);
  EXPECT_NE(script_.recover_threads[0], std::this_thread::get_id());  // its recovery: not
}

TEST_P(OutOfMemoryRecoveryTest, WhatWaitsIsAnsweredWhenTheLastInstanceGoesOut) {
  {
    std::lock_guard lock(script_.mu);
    script_.hold_recovery = true;
  }
  auto scheduler = Make(1);
  EXPECT_EQ(Send(*scheduler, "oom", &clock_).status().code(), StatusCode::kResourceExhausted);
  // While the instance recovers the model is not out yet: this request queues.
  std::promise<StatusOr<InferResponse>> queued;
  auto answered = queued.get_future();
  scheduler->Enqueue(MakeJob("x", &queued, &clock_));
  EXPECT_EQ(answered.wait_for(std::chrono::milliseconds(20)), std::future_status::timeout);
  {
    std::lock_guard lock(script_.mu);
    script_.hold_recovery = false;
    script_.cv.notify_all();
  }
  // The recovery fails: no instance can serve, and the queued request is answered so
  // rather than held through the pauses.
  const auto result = answered.get();
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(result.status().message().find("no instance can serve"), std::string::npos)
      << result.status().message();
  EXPECT_EQ(scheduler->Pending(), 0u);
}

TEST_P(OutOfMemoryRecoveryTest, ABatchThatFitsInHalvesLeavesTheInstanceUnchecked) {
  script_.recover_ok = true;
  auto scheduler = Make(1);
  EXPECT_TRUE(Send(*scheduler, "big", &clock_, false, /*rows=*/2).ok());
  EXPECT_TRUE(Send(*scheduler, "x", &clock_).ok());
  EXPECT_EQ(script_.recover_calls, 0);  // it ran well right after running out
}

TEST_P(OutOfMemoryRecoveryTest, ASessionBrokenByRunningOutIsCheckedThoughItsHalvesFailOtherwise) {
  script_.recover_ok = true;
  script_.break_on_oom = true;
  auto scheduler = Make(1);
  // The batch runs out; its halves then fail with the broken session's own error.
  const auto failed = Send(*scheduler, "big", &clock_, false, /*rows=*/2);
  EXPECT_EQ(failed.status().code(), StatusCode::kInternal);
  script_.WaitRecoverCalls(1);  // checked all the same
  {
    std::lock_guard lock(script_.mu);
    script_.broken = false;  // as its rebuild would
  }
  EXPECT_TRUE(Send(*scheduler, "x", &clock_).ok());
}

INSTANTIATE_TEST_SUITE_P(Schedulers, OutOfMemoryRecoveryTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Batcher" : "Pool"; });

}  // namespace
}  // namespace fastpath::scheduler
