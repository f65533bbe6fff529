// The canary phase of a rollout through the facade (issue 12 §2), on a manual clock: a reload
// that the gate lets through first gets fastpath.rollout.canary_percent of the requests, the
// load it replaces serving the rest. A candidate that fails its share, or answers slower, is
// rolled back and the old load takes every request again; one that does neither is promoted
// when the phase's time is up. Each step is in the rollout history.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <thread>

#include "fakes/manual_clock.h"
#include "fakes/temp_repository.h"
#include "fakes/timed_backend.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/repository/model_repository.h"
#include "fastpath/server/server_impl.h"

namespace fastpath::server {
namespace {

// The gate's limits are wide: these tests follow the canary phase, and the gate's timing of
// one model against itself can land past 1.1x on a loaded machine (1.11x in one full-suite
// run), which refused the reload they expect to pass.
constexpr const char* kCanaryRollout = R"(
parameters { key: "fastpath.rollout.gate" value { string_value: "true" } }
parameters { key: "fastpath.rollout.max_p95_ratio" value { string_value: "100" } }
parameters { key: "fastpath.rollout.min_throughput_ratio" value { string_value: "0.01" } }
parameters { key: "fastpath.rollout.canary_percent" value { string_value: "20" } }
parameters { key: "fastpath.rollout.canary_duration_s" value { string_value: "60" } }
)";

InferRequest SimpleRequest(const std::string& version = "") {
  InferRequest r;
  r.model_name = "simple";
  r.model_version = version;
  for (const char* name : {"INPUT0", "INPUT1"}) {
    r.inputs.push_back(Tensor{name, DataType::kInt32, {1, 16}, std::string(64, '\1')});
  }
  return r;
}

class RolloutCanaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_.AddVersion("simple", 1, "simple");
    repo_.WriteConfig("simple", Config());
    ServerOptions options;
    options.repository.roots = {repo_.root()};
    options.repository.mode = repository::ControlMode::kExplicit;
    options.startup_models = {"simple"};
    options.clock = &clock_;
    options.memory_sample_interval = std::chrono::milliseconds(0);
    options.drift_sample_interval = std::chrono::milliseconds(0);
    options.canary_tick = std::chrono::milliseconds(0);  // the test watches
    options.repository.max_queue_size = MaxQueueSize();
    auto ort = onnxruntime::CreateOrtBackend();
    ASSERT_TRUE(ort.ok());
    backend_ = std::make_shared<testing::TimedBackend>(std::move(ort).value(), &clock_);
    auto created = Server::Create(options, backend_);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    server_ = std::move(created).value();
    ASSERT_TRUE(server_->IsModelReady("simple", "1").value());
  }

  virtual size_t MaxQueueSize() { return 1024; }
  virtual std::string Config() { return std::string(testing::kSimpleConfig) + kCanaryRollout; }

  // Reloads version 1 (the gate passes: both loads take 1 ms a run) and starts watching its
  // canary phase. Returns the range of instances the new load created.
  std::pair<int, int> Reload() {
    const int before = backend_->instances_created;
    repo_.Touch("simple/1/model.onnx");  // unchanged files would keep the load serving
    EXPECT_TRUE(server_->LoadModel("simple").ok());
    server_->WatchRollouts();
    return {before, backend_->instances_created.load()};
  }

  // Sends `n` requests one after the other; returns how many failed.
  int Send(int n, const std::string& version = "") {
    int failed = 0;
    for (int i = 0; i < n; ++i) {
      std::promise<StatusOr<InferResponse>> done;
      server_->InferAsync(SimpleRequest(version),
                          [&done](StatusOr<InferResponse> r) { done.set_value(std::move(r)); });
      failed += done.get_future().get().ok() ? 0 : 1;
    }
    return failed;
  }

  std::vector<std::string> Outcomes() {
    std::vector<std::string> out;
    const std::vector<RolloutDecision> history = server_->RolloutHistory("simple").value();
    for (const RolloutDecision& d : history) {
      out.push_back(RolloutOutcomeName(d.outcome));
    }
    return out;
  }

  RepositoryEntry Entry() {
    for (const RepositoryEntry& e : server_->RepositoryIndex(false)) {
      if (e.name == "simple" && e.version == "1") return e;
    }
    ADD_FAILURE() << "simple 1 is not in the index";
    return {};
  }

  testing::TempRepository repo_{FASTPATH_TEST_MODELS_DIR};
  testing::ManualClock clock_;
  std::shared_ptr<testing::TimedBackend> backend_;
  std::unique_ptr<Server> server_;
};

TEST_F(RolloutCanaryTest, ACandidateThatFailsItsShareIsRolledBackAndTheOldLoadTakesEverything) {
  ASSERT_NE(server_->Admission().models.at(0).placement_json, "") << "shown before the reload";
  const auto [from, to] = Reload();
  ASSERT_LT(from, to);
  EXPECT_EQ(Outcomes(), (std::vector<std::string>{"no_baseline", "passed", "canary"}));
  backend_->faulty_from = from;
  backend_->faulty_to = to;
  backend_->faulty_fail = true;  // the new load fails every real request

  // Every fifth request reaches the candidate, evenly spread, and fails there.
  EXPECT_EQ(Send(100), 20);
  server_->WatchRollouts();
  ASSERT_EQ(Outcomes(),
            (std::vector<std::string>{"no_baseline", "passed", "canary", "rolled_back"}));
  const RolloutDecision last = server_->RolloutHistory("simple").value().back();
  ASSERT_TRUE(last.canary.has_value());
  EXPECT_DOUBLE_EQ(last.canary->candidate_error_rate, 1.0);
  EXPECT_DOUBLE_EQ(last.canary->stable_error_rate, 0.0);
  EXPECT_NE(last.detail.find("error rate"), std::string::npos) << last.detail;

  // The old load serves every request again; the version stays READY and says why.
  EXPECT_EQ(Send(50), 0);
  EXPECT_EQ(Send(10, "1"), 0);
  EXPECT_EQ(Entry().state, ModelState::kReady);
  EXPECT_NE(Entry().reason.find("rolled back"), std::string::npos) << Entry().reason;
  // Its admission record (here the placement audit) shows again beside it.
  const admission::AdmissionReport report = server_->Admission();
  ASSERT_EQ(report.models.size(), 1u);
  EXPECT_NE(report.models[0].placement_json, "");
  // The statistics count what the old load served before and after, beside the failures.
  const ModelStatistics stats = server_->GetModelStatistics("simple", "1").value().at(0);
  EXPECT_EQ(stats.inference_stats.success.count, 140u);
}

// The phase counts from its first request, not from the watch's first look at it: a candidate
// that fails only before that look (its cold start, a tick's worth) is still rolled back.
TEST_F(RolloutCanaryTest, FailuresBeforeTheWatchFirstLooksCount) {
  const int before = backend_->instances_created;
  repo_.Touch("simple/1/model.onnx");
  ASSERT_TRUE(server_->LoadModel("simple").ok());
  backend_->faulty_from = before;
  backend_->faulty_to = backend_->instances_created.load();
  backend_->faulty_fail = true;
  EXPECT_EQ(Send(100), 20);
  server_->WatchRollouts();
  ASSERT_EQ(Outcomes(),
            (std::vector<std::string>{"no_baseline", "passed", "canary", "rolled_back"}));
  const RolloutDecision last = server_->RolloutHistory("simple").value().back();
  ASSERT_TRUE(last.canary.has_value());
  EXPECT_DOUBLE_EQ(last.canary->candidate_error_rate, 1.0);
}

TEST_F(RolloutCanaryTest, ACandidateThatAnswersAsWellIsPromotedWhenThePhaseEnds) {
  const auto [from, to] = Reload();
  EXPECT_EQ(Send(100), 0);
  server_->WatchRollouts();
  EXPECT_EQ(Outcomes().back(), "canary") << "no regression and time is not up: it goes on";
  // Both sides answered: 80 + 20 successes under version 1.
  EXPECT_EQ(server_->GetModelStatistics("simple", "1").value().at(0).inference_stats.success.count,
            100u);

  clock_.Advance(std::chrono::seconds(61));
  server_->WatchRollouts();
  ASSERT_EQ(Outcomes().back(), "promoted");
  const RolloutDecision last = server_->RolloutHistory("simple").value().back();
  EXPECT_NE(last.detail.find("p95 not judged, too few requests (20 candidate, 80 serving"),
            std::string::npos)
      << last.detail;
  // Every request goes to the new load now: the old one's instances failing changes nothing.
  backend_->faulty_from = 0;
  backend_->faulty_to = from;
  backend_->faulty_fail = true;
  EXPECT_EQ(Send(50), 0);
  EXPECT_EQ(Entry().reason, "");
}

TEST_F(RolloutCanaryTest, ACandidateSlowerOnRealTrafficIsRolledBackAtTheEnd) {
  const auto [from, to] = Reload();
  backend_->faulty_from = from;
  backend_->faulty_to = to;
  backend_->faulty_cost_us = 3000;  // three times the old load's 1 ms, after admission
  EXPECT_EQ(Send(500), 0);
  server_->WatchRollouts();
  EXPECT_EQ(Outcomes().back(), "canary") << "latency is judged when the phase ends";
  clock_.Advance(std::chrono::seconds(61));
  server_->WatchRollouts();
  ASSERT_EQ(Outcomes().back(), "rolled_back");
  const RolloutDecision last = server_->RolloutHistory("simple").value().back();
  ASSERT_TRUE(last.canary.has_value());
  EXPECT_DOUBLE_EQ(last.canary->p95_ratio, 3.0);
  EXPECT_NE(last.detail.find("p95 regressed"), std::string::npos) << last.detail;
  EXPECT_EQ(Send(20), 0);
}

TEST_F(RolloutCanaryTest, ALaterReloadEndsThePhaseAndTheOldLoadGoes) {
  Reload();
  Reload();  // the second candidate replaces the first one
  EXPECT_EQ(Outcomes(), (std::vector<std::string>{"no_baseline", "passed", "canary", "passed",
                                                  "ended", "canary"}));
  EXPECT_EQ(Send(50), 0);
  clock_.Advance(std::chrono::seconds(61));
  server_->WatchRollouts();
  EXPECT_EQ(Outcomes().back(), "promoted");
  EXPECT_EQ(Send(10), 0);
}

// The phase a later reload starts compares its candidate with the first phase's, which
// serves the rest: that side keeps its latencies, and a slower candidate is caught. It was
// promoted with "p95 not judged", the serving side having kept no latency.
TEST_F(RolloutCanaryTest, APhaseStartedDuringAnotherJudgesLatencyToo) {
  Reload();
  const auto [from, to] = Reload();
  backend_->faulty_from = from;
  backend_->faulty_to = to;
  backend_->faulty_cost_us = 3000;
  EXPECT_EQ(Send(500), 0);
  clock_.Advance(std::chrono::seconds(61));
  server_->WatchRollouts();
  ASSERT_EQ(Outcomes().back(), "rolled_back");
  const RolloutDecision last = server_->RolloutHistory("simple").value().back();
  ASSERT_TRUE(last.canary.has_value());
  EXPECT_DOUBLE_EQ(last.canary->p95_ratio, 3.0);
}

TEST_F(RolloutCanaryTest, ANewVersionRolledBackLeavesTheOldOneServingAndTheServerReady) {
  // Version 2 beside version 1; the version policy (latest 1) publishes only version 2.
  repo_.AddVersion("simple", 2, "simple");
  const auto [from, to] = Reload();
  EXPECT_EQ(Outcomes().back(), "canary");
  EXPECT_EQ(Send(10, "1"), 0) << "a request naming the old number still reaches its load";
  backend_->faulty_from = from;
  backend_->faulty_to = to;
  backend_->faulty_fail = true;
  EXPECT_EQ(Send(100), 20);
  EXPECT_EQ(Send(5, "2"), 5) << "a request naming the new version gets it";
  server_->WatchRollouts();
  ASSERT_EQ(Outcomes().back(), "rolled_back");

  // Version 1 serves every request again, READY with the reason; version 2 is gone from the
  // index (as a refused load would be), so readiness stays up.
  EXPECT_EQ(Send(30), 0);
  EXPECT_EQ(Send(10, "1"), 0);
  EXPECT_TRUE(server_->IsReady());
  EXPECT_EQ(Entry().state, ModelState::kReady);
  EXPECT_NE(Entry().reason.find("rolled back"), std::string::npos) << Entry().reason;
  for (const RepositoryEntry& e : server_->RepositoryIndex(false)) {
    EXPECT_NE(e.version, "2") << e.reason;
  }
}

// Version policy latest 2: a version added beside a serving one keeps that one as it is.
class KeptVersionRolloutTest : public RolloutCanaryTest {
 protected:
  std::string Config() override {
    return RolloutCanaryTest::Config() + "version_policy { latest { num_versions: 2 } }\n";
  }
  // For a second of real time after the retire grace, every request naming `version`
  // succeeds: its load was not stopped.
  bool KeepsServing(const std::string& version) {
    clock_.Advance(repository::ModelRepository::kRetireGrace * 2);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (std::chrono::steady_clock::now() < until) {
      if (Send(1, version) != 0) return false;
    }
    return true;
  }
};

// A version kept unchanged beside a new one is the load the new one's canary phase splits
// the unversioned requests with. The phase's end, promoted or rolled back, leaves it serving
// its own number: it stopped it, as it stops a load the phase replaced.
TEST_F(KeptVersionRolloutTest, APhasesEndLeavesTheKeptVersionServing) {
  repo_.AddVersion("simple", 2, "simple");
  ASSERT_TRUE(server_->LoadModel("simple").ok());
  server_->WatchRollouts();
  ASSERT_EQ(Outcomes().back(), "canary");
  EXPECT_EQ(Send(100), 0);
  // 80 of them on version 1's load, counted once: it is published and the phase's old load.
  EXPECT_EQ(server_->GetModelStatistics("simple", "1").value().at(0).inference_stats.success.count,
            80u);
  clock_.Advance(std::chrono::seconds(61));
  server_->WatchRollouts();
  ASSERT_EQ(Outcomes().back(), "promoted");
  EXPECT_TRUE(KeepsServing("1"));
  EXPECT_TRUE(KeepsServing("2"));

  // Version 3: version 2 is kept, version 1 goes; version 3 fails its share and is rolled
  // back.
  repo_.AddVersion("simple", 3, "simple");
  const int before = backend_->instances_created;
  ASSERT_TRUE(server_->LoadModel("simple").ok());
  server_->WatchRollouts();
  ASSERT_EQ(Outcomes().back(), "canary");
  backend_->faulty_from = before;
  backend_->faulty_to = backend_->instances_created.load();
  backend_->faulty_fail = true;
  EXPECT_EQ(Send(100), 20);
  server_->WatchRollouts();
  ASSERT_EQ(Outcomes().back(), "rolled_back");
  EXPECT_TRUE(KeepsServing("2"));
  EXPECT_TRUE(KeepsServing(""));
}

// A queue of one request: the serving version's fills with one request running and one
// waiting.
class BusyRolloutTest : public RolloutCanaryTest {
 protected:
  size_t MaxQueueSize() override { return 1; }
};

// A serving version too busy for the gate to time (its queue full through all the gate's
// tries) is no fault of the candidate's: the load fails UNAVAILABLE (503), worth trying
// again, where it was FAILED_PRECONDITION (400, "fix the files"). The serving load serves on.
TEST_F(BusyRolloutTest, AServingVersionTooBusyToTimeFailsTheLoadAsUnavailable) {
  backend_->faulty_from = 0;  // version 1's one instance
  backend_->faulty_to = backend_->instances_created.load();
  backend_->faulty_hold = true;
  const int entered = backend_->runs_entered;
  std::promise<StatusOr<InferResponse>> running, waiting;
  server_->InferAsync(SimpleRequest(),
                      [&](StatusOr<InferResponse> r) { running.set_value(std::move(r)); });
  while (backend_->runs_entered == entered) std::this_thread::yield();
  server_->InferAsync(SimpleRequest(),
                      [&](StatusOr<InferResponse> r) { waiting.set_value(std::move(r)); });

  repo_.Touch("simple/1/model.onnx");
  const Status s = server_->LoadModel("simple");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("is full"), std::string::npos) << s.message();
  backend_->Release();
  EXPECT_TRUE(running.get_future().get().ok());
  EXPECT_TRUE(waiting.get_future().get().ok());
  EXPECT_EQ(Send(5), 0);
  EXPECT_EQ(Outcomes().back(), "not_measured");
}

}  // namespace
}  // namespace fastpath::server
