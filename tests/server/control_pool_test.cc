// The server's model-control pool: bounded, answers every operation exactly once, and
// stops without losing one.
#include "fastpath/server/control_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace fastpath::server {
namespace {

using ::testing::HasSubstr;

// Holds every task that waits on it until Open.
class Gate {
 public:
  void Wait() {
    std::unique_lock lock(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  void AwaitWaiting(int n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return waiting_ >= n; });
  }
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  bool open_ = false;
};

// Collects one answer.
struct Answer {
  std::promise<Status> promise;
  std::future<Status> future = promise.get_future();
  ControlPool::Done Done() {
    return [this](Status s) { promise.set_value(std::move(s)); };
  }
};

TEST(ControlPoolTest, RunsTheTaskOffTheCallersThreadAndAnswersWithItsStatus) {
  ControlPool pool(1, 4);
  std::thread::id ran_on;
  Answer answer;
  pool.Submit(
      "loading model 'm'",
      [&] {
        ran_on = std::this_thread::get_id();
        return NotFound("no model 'm'");
      },
      answer.Done());
  const Status s = answer.future.get();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "no model 'm'");
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(ControlPoolTest, AFullQueueIsRefusedAtOnceNamingTheOperation) {
  ControlPool pool(1, 2);
  Gate gate;
  std::vector<Answer> answers(3);
  // One runs (held at the gate), two wait: the queue is full.
  pool.Submit(
      "op 0",
      [&] {
        gate.Wait();
        return Status::Ok();
      },
      answers[0].Done());
  gate.AwaitWaiting(1);
  pool.Submit(
      "op 1", [] { return Status::Ok(); }, answers[1].Done());
  pool.Submit(
      "op 2", [] { return Status::Ok(); }, answers[2].Done());
  Answer refused;
  pool.Submit(
      "unloading model 'x'", [] { return Status::Ok(); }, refused.Done());
  ASSERT_EQ(refused.future.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  const Status s = refused.future.get();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("unloading model 'x'"));
  EXPECT_THAT(s.message(), HasSubstr("2 model-control operations are already waiting"));
  gate.Open();
  for (Answer& a : answers) EXPECT_TRUE(a.future.get().ok());
}

TEST(ControlPoolTest, StopAnswersTheQueuedAndWaitsForTheRunning) {
  auto pool = std::make_unique<ControlPool>(1, 4);
  Gate gate;
  std::atomic<bool> finished{false};
  Answer running;
  Answer queued;
  pool->Submit(
      "op running",
      [&] {
        gate.Wait();
        finished = true;
        return Status::Ok();
      },
      running.Done());
  gate.AwaitWaiting(1);
  pool->Submit(
      "loading model 'q'", [] { return Status::Ok(); }, queued.Done());
  std::thread stopper([&] { pool->Stop(); });
  // The queued operation is answered without running, while the running one still runs.
  const Status q = queued.future.get();
  EXPECT_EQ(q.code(), StatusCode::kUnavailable);
  EXPECT_THAT(q.message(), HasSubstr("loading model 'q'"));
  EXPECT_THAT(q.message(), HasSubstr("did not start"));
  EXPECT_FALSE(finished);
  gate.Open();
  stopper.join();  // Stop returned: the running one has finished and been answered
  EXPECT_TRUE(finished);
  EXPECT_TRUE(running.future.get().ok());

  Answer late;
  pool->Submit(
      "loading model 'late'", [] { return Status::Ok(); }, late.Done());
  const Status l = late.future.get();
  EXPECT_EQ(l.code(), StatusCode::kUnavailable);
  EXPECT_THAT(l.message(), HasSubstr("shutting down"));
}

TEST(ControlPoolTest, CloseRefusesAtOnceWhileTheRunningOperationGoesOn) {
  ControlPool pool(1, 4);
  Gate gate;
  Answer running;
  pool.Submit(
      "op running",
      [&] {
        gate.Wait();
        return Status::Ok();
      },
      running.Done());
  gate.AwaitWaiting(1);
  pool.Close();
  Answer refused;
  pool.Submit(
      "loading model 'r'", [] { return Status::Ok(); }, refused.Done());
  ASSERT_EQ(refused.future.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_THAT(refused.future.get().message(), HasSubstr("shutting down"));
  EXPECT_EQ(running.future.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  gate.Open();
  EXPECT_TRUE(running.future.get().ok());
  pool.Stop();
}

TEST(ControlPoolTest, AnExceptionIsAnInternalErrorAndTheWorkerGoesOn) {
  ControlPool pool(1, 4);
  Answer thrown;
  pool.Submit(
      "loading model 'boom'", []() -> Status { throw std::runtime_error("bad things"); },
      thrown.Done());
  const Status s = thrown.future.get();
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "loading model 'boom': bad things");
  Answer next;
  pool.Submit(
      "next", [] { return Status::Ok(); }, next.Done());
  EXPECT_TRUE(next.future.get().ok());
}

TEST(ControlPoolTest, WorkersRunOperationsSideBySide) {
  ControlPool pool(2, 4);
  Gate gate;
  Answer a;
  Answer b;
  pool.Submit(
      "a",
      [&] {
        gate.Wait();
        return Status::Ok();
      },
      a.Done());
  pool.Submit(
      "b",
      [&] {
        gate.Wait();
        return Status::Ok();
      },
      b.Done());
  gate.AwaitWaiting(2);  // both held at once: two workers
  gate.Open();
  EXPECT_TRUE(a.future.get().ok());
  EXPECT_TRUE(b.future.get().ok());
}

}  // namespace
}  // namespace fastpath::server
