// EnsembleScheduler with a fake step runner whose steps the test answers by hand, in the
// order it chooses: the graph runs steps as soon as their inputs are there, passes
// tensors on, fails with the step named, and Stop waits for what it accepted.
#include "fastpath/scheduler/ensemble_scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "fakes/manual_clock.h"

namespace fastpath::scheduler {
namespace {

// Records every step request; the test answers them.
class ManualRunner {
 public:
  struct Call {
    InferRequest request;
    std::function<void(StatusOr<InferResponse>)> done;
  };
  StepRunner AsRunner() {
    return [this](InferRequest request, std::function<void(StatusOr<InferResponse>)> done) {
      calls_.push_back({std::move(request), std::move(done)});
    };
  }
  // Binds every step to AsRunner, but those of `missing` fail.
  StepBinder AsBinder(std::string missing = "") {
    return [this, missing](const std::string& model, const std::string&) -> StatusOr<StepRunner> {
      ++binds_[model];
      if (model == missing) return NotFound("unknown model '" + model + "'");
      return AsRunner();
    };
  }
  int binds(const std::string& model) { return binds_[model]; }
  std::vector<Call>& calls() { return calls_; }
  // The models of the calls not yet answered, in call order.
  std::vector<std::string> Pending() const {
    std::vector<std::string> out;
    for (const auto& c : calls_) {
      if (c.done) out.push_back(c.request.model_name);
    }
    return out;
  }
  // Answers the call for `model` with one output per requested output: the first input's
  // data with `suffix` appended (so the test can follow values through the graph).
  // `times` are the step model's, as its scheduler reports them.
  void Answer(const std::string& model, const std::string& suffix, ModelTimes times = {}) {
    for (auto& c : calls_) {
      if (c.request.model_name != model || !c.done) continue;
      InferResponse response;
      response.times = times;
      for (const auto& out : c.request.outputs) {
        Tensor t = c.request.inputs.empty() ? Tensor{} : c.request.inputs[0];
        t.name = out.name;
        t.data += suffix;
        response.outputs.push_back(t);
      }
      auto done = std::move(c.done);
      c.done = nullptr;
      done(std::move(response));
      return;
    }
    ADD_FAILURE() << "no pending call for " << model;
  }
  void Fail(const std::string& model, Status status) {
    for (auto& c : calls_) {
      if (c.request.model_name != model || !c.done) continue;
      auto done = std::move(c.done);
      c.done = nullptr;
      done(std::move(status));
      return;
    }
    ADD_FAILURE() << "no pending call for " << model;
  }

 private:
  std::vector<Call> calls_;
  std::map<std::string, int> binds_;
};

// Binds every step to `runner`.
StepBinder BindAll(StepRunner runner) {
  return [runner = std::move(runner)](
             const std::string&, const std::string&) -> StatusOr<StepRunner> { return runner; };
}

// X -> a -> A;  X -> b -> B;  (A, B) -> c -> OUT.  "a" reads X, "b" reads X too.
EnsemblePlan Diamond() {
  EnsemblePlan plan;
  plan.name = "diamond";
  plan.inputs = {"X"};
  plan.steps = {
      {"a", "", {{"in", "X"}}, {{"out", "A"}}},
      {"b", "2", {{"in", "X"}}, {{"out", "B"}}},
      {"c", "", {{"in0", "A"}, {"in1", "B"}}, {{"out", "OUT"}}},
  };
  return plan;
}

Job MakeJob(std::optional<StatusOr<InferResponse>>* answer, const std::string& x = "x") {
  Job job;
  job.request.model_name = "diamond";
  job.request.model_version = "1";
  job.request.id = "req-1";
  job.request.inputs.push_back({"X", DataType::kUint8, {1, 1}, x});
  job.output_names = {"OUT"};
  job.arrival = SteadyClock()->Now();
  job.done = [answer](StatusOr<InferResponse> r) { *answer = std::move(r); };
  return job;
}

TEST(EnsembleSchedulerTest, RunsStepsAsSoonAsTheirInputsAreThere) {
  ManualRunner runner;
  StatsRecorder stats;
  auto scheduler = EnsembleScheduler::Create(Diamond(), runner.AsBinder(), &stats);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status().ToString();
  std::optional<StatusOr<InferResponse>> answer;
  (*scheduler)->Enqueue(MakeJob(&answer));
  // a and b start together; c waits for both.
  EXPECT_EQ(runner.Pending(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ((*scheduler)->Pending(), 1u);
  const auto& b_call = runner.calls()[1].request;
  EXPECT_EQ(b_call.model_version, "2");
  EXPECT_EQ(b_call.id, "req-1");
  ASSERT_EQ(b_call.inputs.size(), 1u);
  EXPECT_EQ(b_call.inputs[0].name, "in");  // renamed to the step model's input
  EXPECT_EQ(b_call.inputs[0].data, "x");
  ASSERT_EQ(b_call.outputs.size(), 1u);
  EXPECT_EQ(b_call.outputs[0].name, "out");

  runner.Answer("b", "+b");
  EXPECT_EQ(runner.Pending(), (std::vector<std::string>{"a"}));
  runner.Answer("a", "+a");
  EXPECT_EQ(runner.Pending(), (std::vector<std::string>{"c"}));
  const auto& c_call = runner.calls()[2].request;
  ASSERT_EQ(c_call.inputs.size(), 2u);
  EXPECT_EQ(c_call.inputs[0].name, "in0");
  EXPECT_EQ(c_call.inputs[0].data, "x+a");
  EXPECT_EQ(c_call.inputs[1].data, "x+b");
  EXPECT_FALSE(answer.has_value());

  runner.Answer("c", "+c");
  ASSERT_TRUE(answer.has_value());
  ASSERT_TRUE(answer->ok()) << answer->status().ToString();
  ASSERT_EQ((*answer)->outputs.size(), 1u);
  EXPECT_EQ((*answer)->outputs[0].name, "OUT");
  EXPECT_EQ((*answer)->outputs[0].data, "x+a+c");
  EXPECT_EQ((*answer)->model_name, "diamond");
  EXPECT_EQ((*answer)->model_version, "1");
  EXPECT_EQ((*answer)->id, "req-1");
  EXPECT_EQ((*scheduler)->Pending(), 0u);
  EXPECT_EQ(stats.Snapshot("diamond", "1").inference_stats.success.count, 1u);
}

// As in Triton's statistics, an ensemble's compute times are the sums of its steps' (what
// ran, not the waits in the step models' queues or between steps), and its queue time is
// its own wait before its first step started; its response carries them, so that an
// ensemble that is the step of another adds up the same way.
TEST(EnsembleSchedulerTest, ItsComputeTimesAreItsStepsSummed) {
  ManualRunner runner;
  StatsRecorder stats;
  testing::ManualClock clock;
  auto scheduler = EnsembleScheduler::Create(Diamond(), runner.AsBinder(), &stats, &clock);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status().ToString();
  std::optional<StatusOr<InferResponse>> answer;
  Job job = MakeJob(&answer);
  job.arrival = clock.Now();
  (*scheduler)->Enqueue(std::move(job));
  clock.Advance(std::chrono::milliseconds(7));  // the steps' wall time: not compute
  runner.Answer("a", "+a", {/*queue*/ 5'000'000, 1'000, 20'000, 3'000});
  runner.Answer("b", "+b", {9'000'000, 2'000, 30'000, 4'000});
  clock.Advance(std::chrono::milliseconds(2));
  runner.Answer("c", "+c", {0, 0, 10'000, 0});
  ASSERT_TRUE(answer.has_value() && answer->ok());

  const ModelStatistics snapshot = stats.Snapshot("diamond", "1");
  const InferStatistics& s = snapshot.inference_stats;
  EXPECT_EQ(s.success.ns, 9'000'000u);  // end to end: the clock's 9 ms
  EXPECT_EQ(s.queue.ns, 0u);            // started on arrival
  EXPECT_EQ(s.compute_input.ns, 3'000u);
  EXPECT_EQ(s.compute_infer.ns, 60'000u);
  EXPECT_EQ(s.compute_output.ns, 7'000u);
  ASSERT_EQ(snapshot.batch_stats.size(), 1u);
  EXPECT_EQ(snapshot.batch_stats[0].compute_infer.ns, 60'000u);
  const ModelTimes& times = (*answer)->times;
  EXPECT_EQ(times.queue_ns, 0u);
  EXPECT_EQ(times.compute_input_ns, 3'000u);
  EXPECT_EQ(times.compute_infer_ns, 60'000u);
  EXPECT_EQ(times.compute_output_ns, 7'000u);
}

// Every step is bound once, when the request is accepted (the runners hold their versions
// until it is answered); a step model that is not there fails the request at once, naming
// the step, as unavailable (the ensemble is known), and no step runs.
TEST(EnsembleSchedulerTest, StepsAreBoundWhenTheRequestIsAcceptedAndAMissingOneFailsItAtOnce) {
  ManualRunner runner;
  StatsRecorder stats;
  auto scheduler = EnsembleScheduler::Create(Diamond(), runner.AsBinder(/*missing=*/"c"), &stats);
  ASSERT_TRUE(scheduler.ok());
  std::optional<StatusOr<InferResponse>> answer;
  (*scheduler)->Enqueue(MakeJob(&answer));
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(answer->status().message(), "ensemble 'diamond' step 3 (model 'c'): unknown model 'c'");
  EXPECT_TRUE(runner.calls().empty()) << "a step ran for a request that could not finish";
  EXPECT_EQ((*scheduler)->Pending(), 0u);

  ManualRunner whole;
  auto bound = EnsembleScheduler::Create(Diamond(), whole.AsBinder(), &stats);
  ASSERT_TRUE(bound.ok());
  answer.reset();
  (*bound)->Enqueue(MakeJob(&answer));
  EXPECT_EQ(whole.binds("a"), 1);
  EXPECT_EQ(whole.binds("c"), 1) << "bound before its inputs are there";
  whole.Answer("a", "+a");
  whole.Answer("b", "+b");
  whole.Answer("c", "+c");
  ASSERT_TRUE(answer.has_value() && answer->ok());
  EXPECT_EQ(whole.binds("c"), 1) << "bound once per request";
}

TEST(EnsembleSchedulerTest, AnIntermediateTensorCanAlsoBeAnOutput) {
  EnsemblePlan plan = Diamond();
  ManualRunner runner;
  StatsRecorder stats;
  auto scheduler = EnsembleScheduler::Create(plan, runner.AsBinder(), &stats);
  ASSERT_TRUE(scheduler.ok());
  std::optional<StatusOr<InferResponse>> answer;
  Job job = MakeJob(&answer);
  job.output_names = {"A", "OUT"};  // A is read by c and returned
  (*scheduler)->Enqueue(std::move(job));
  runner.Answer("a", "+a");
  runner.Answer("b", "+b");
  runner.Answer("c", "+c");
  ASSERT_TRUE(answer.has_value() && answer->ok());
  ASSERT_EQ((*answer)->outputs.size(), 2u);
  EXPECT_EQ((*answer)->outputs[0].name, "A");
  EXPECT_EQ((*answer)->outputs[0].data, "x+a");
  EXPECT_EQ((*answer)->outputs[1].data, "x+a+c");
}

TEST(EnsembleSchedulerTest, AFailedStepFailsTheRequestOnceEveryStartedStepIsBack) {
  ManualRunner runner;
  StatsRecorder stats;
  auto scheduler = EnsembleScheduler::Create(Diamond(), runner.AsBinder(), &stats);
  ASSERT_TRUE(scheduler.ok());
  std::optional<StatusOr<InferResponse>> answer;
  (*scheduler)->Enqueue(MakeJob(&answer));
  runner.Fail("b", InvalidArgument("input 'in' is wrong"));
  EXPECT_FALSE(answer.has_value());  // a is still running
  runner.Answer("a", "+a");
  EXPECT_EQ(runner.Pending(), std::vector<std::string>{});  // c never starts
  ASSERT_TRUE(answer.has_value());
  ASSERT_FALSE(answer->ok());
  EXPECT_EQ(answer->status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(answer->status().message(),
            "ensemble 'diamond' step 2 (model 'b'): input 'in' is wrong");
  const auto snapshot = stats.Snapshot("diamond", "1");
  EXPECT_EQ(snapshot.inference_stats.fail.count, 1u);
  // A step's config refusing the request is neither a rejection nor the backend's fault.
  EXPECT_EQ(snapshot.failures[static_cast<size_t>(FailureReason::kOther)], 1u);
  EXPECT_EQ((*scheduler)->Pending(), 0u);
}

TEST(EnsembleSchedulerTest, AFailedStepGivesTheEnsembleItsFailureReason) {
  const std::vector<std::pair<Status, FailureReason>> cases = {
      {Unavailable("queue of model 'b' is full"), FailureReason::kRejected},
      {DeadlineExceeded("timed out in the queue"), FailureReason::kRejected},
      {Cancelled("the client went away"), FailureReason::kCanceled},
      {Internal("ORT: CUDA failure 700"), FailureReason::kBackend},
      {ResourceExhausted("out of memory: running model 'b': BFCArena"), FailureReason::kBackend},
  };
  for (const auto& [failure, reason] : cases) {
    SCOPED_TRACE(failure.message());
    ManualRunner runner;
    StatsRecorder stats;
    auto scheduler = EnsembleScheduler::Create(Diamond(), runner.AsBinder(), &stats);
    ASSERT_TRUE(scheduler.ok());
    std::optional<StatusOr<InferResponse>> answer;
    (*scheduler)->Enqueue(MakeJob(&answer));
    runner.Fail("b", failure);
    runner.Answer("a", "+a");
    ASSERT_TRUE(answer.has_value());
    EXPECT_EQ(answer->status().code(), failure.code());
    if (failure.code() == StatusCode::kResourceExhausted) {  // keeps its leading words
      EXPECT_EQ(answer->status().message().rfind("out of memory: ensemble", 0), 0u)
          << answer->status().message();
    }
    const auto snapshot = stats.Snapshot("diamond", "1");
    EXPECT_EQ(snapshot.failures[static_cast<size_t>(reason)], 1u);
    EXPECT_EQ(snapshot.inference_stats.fail.count, 1u);
  }
}

// An ensemble has no instance of its own (Job::hold): a hold is refused at once, and no
// step runs.
TEST(EnsembleSchedulerTest, AHoldIsRefusedAndRunsNoStep) {
  ManualRunner runner;
  StatsRecorder stats;
  auto scheduler = EnsembleScheduler::Create(Diamond(), runner.AsBinder(), &stats);
  ASSERT_TRUE(scheduler.ok());
  std::optional<StatusOr<InferResponse>> answer;
  Job job = MakeJob(&answer);
  bool held = false;
  job.hold = [&held](backend::ModelInstance&) {
    held = true;
    return Status::Ok();
  };
  (*scheduler)->Enqueue(std::move(job));
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(answer->status().message().find("no instance of its own"), std::string::npos)
      << answer->status().message();
  EXPECT_FALSE(held);
  EXPECT_TRUE(runner.calls().empty());
  EXPECT_EQ((*scheduler)->Pending(), 0u);
}

TEST(EnsembleSchedulerTest, ARunnerThatAnswersAtOnceIsFine) {
  // Every step answered inside the runner call (as an unknown model or a full queue is).
  StatsRecorder stats;
  auto scheduler = EnsembleScheduler::Create(
      Diamond(),
      BindAll([](InferRequest request, std::function<void(StatusOr<InferResponse>)> done) {
        if (request.model_name == "c") return done(Unavailable("queue of model 'c' is full"));
        InferResponse response;
        response.outputs.push_back({"out", DataType::kUint8, {1, 1}, "y"});
        done(std::move(response));
      }),
      &stats);
  ASSERT_TRUE(scheduler.ok());
  std::optional<StatusOr<InferResponse>> answer;
  (*scheduler)->Enqueue(MakeJob(&answer));
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(answer->status().message(),
            "ensemble 'diamond' step 3 (model 'c'): queue of model 'c' is full");
}

TEST(EnsembleSchedulerTest, AMissingStepOutputIsAnErrorNotAHang) {
  StatsRecorder stats;
  auto scheduler = EnsembleScheduler::Create(
      Diamond(),
      BindAll([](InferRequest request, std::function<void(StatusOr<InferResponse>)> done) {
        done(InferResponse{});  // no outputs at all
      }),
      &stats);
  ASSERT_TRUE(scheduler.ok());
  std::optional<StatusOr<InferResponse>> answer;
  (*scheduler)->Enqueue(MakeJob(&answer));
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status().code(), StatusCode::kInternal);
  EXPECT_NE(answer->status().message().find("step 3 (model 'c') never received all of its inputs"),
            std::string::npos)
      << answer->status().ToString();
}

TEST(EnsembleSchedulerTest, CreateRefusesAPlanThatCannotRun) {
  EnsemblePlan plan = Diamond();
  plan.steps[2].inputs[1].second = "NOBODY";
  StatsRecorder stats;
  ManualRunner runner;
  auto scheduler = EnsembleScheduler::Create(plan, runner.AsBinder(), &stats);
  ASSERT_FALSE(scheduler.ok());
  EXPECT_NE(scheduler.status().message().find("step 3 (model 'c') can never run"),
            std::string::npos);
  EXPECT_FALSE(EnsembleScheduler::Create(Diamond(), nullptr, &stats).ok());
}

TEST(EnsembleSchedulerTest, StopAnswersAcceptedRequestsAndRefusesNewOnes) {
  ManualRunner runner;
  StatsRecorder stats;
  auto created = EnsembleScheduler::Create(Diamond(), runner.AsBinder(), &stats);
  ASSERT_TRUE(created.ok());
  std::unique_ptr<EnsembleScheduler> scheduler = std::move(created).value();
  std::optional<StatusOr<InferResponse>> first;
  scheduler->Enqueue(MakeJob(&first));
  std::thread stopper([&] { scheduler->Stop(); });
  // Stop cannot return while the request is in flight; finish it from here.
  runner.Answer("a", "+a");
  runner.Answer("b", "+b");
  runner.Answer("c", "+c");
  stopper.join();
  ASSERT_TRUE(first.has_value() && first->ok());
  std::optional<StatusOr<InferResponse>> late;
  scheduler->Enqueue(MakeJob(&late));
  ASSERT_TRUE(late.has_value());
  EXPECT_EQ(late->status().code(), StatusCode::kUnavailable);
}

TEST(EnsembleSchedulerTest, ManyRequestsAnsweredFromOtherThreadsEachGetTheirOwn) {
  // Every step is answered on a thread of its own, so completions race each other and
  // the enqueuing thread (run under TSan by tools/test.sh's tsan build).
  std::mutex threads_mu;
  std::vector<std::thread> threads;
  StatsRecorder stats;
  auto scheduler = EnsembleScheduler::Create(
      Diamond(),
      BindAll([&](InferRequest request, std::function<void(StatusOr<InferResponse>)> done) {
        std::lock_guard lock(threads_mu);
        threads.emplace_back([request = std::move(request), done = std::move(done)]() mutable {
          InferResponse response;
          std::string data;
          for (const auto& in : request.inputs) data += in.data + "|";
          response.outputs.push_back(
              {request.outputs[0].name, DataType::kUint8, {1, 1}, data + request.model_name});
          done(std::move(response));
        });
      }),
      &stats);
  ASSERT_TRUE(scheduler.ok());
  constexpr int kRequests = 64;
  std::mutex answers_mu;
  std::vector<std::optional<StatusOr<InferResponse>>> answers(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    Job job;
    job.request.model_name = "diamond";
    job.request.inputs.push_back({"X", DataType::kUint8, {1, 1}, std::to_string(i)});
    job.output_names = {"OUT"};
    job.arrival = SteadyClock()->Now();
    job.done = [&, i](StatusOr<InferResponse> r) {
      std::lock_guard lock(answers_mu);
      answers[i] = std::move(r);
    };
    (*scheduler)->Enqueue(std::move(job));
  }
  (*scheduler)->Stop();  // waits for every request
  {
    std::lock_guard lock(threads_mu);
    for (auto& t : threads) t.join();
  }
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(answers[i].has_value() && answers[i]->ok()) << i;
    const std::string x = std::to_string(i);
    EXPECT_EQ((*answers[i])->outputs[0].data, x + "|a|" + x + "|b|c") << i;
  }
  EXPECT_EQ(stats.Snapshot("diamond", "1").inference_stats.success.count, kRequests);
}

}  // namespace
}  // namespace fastpath::scheduler
