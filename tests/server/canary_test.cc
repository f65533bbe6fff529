// Canaries through the facade (issue 14 §6), on a manual clock: a model that declares
// fastpath.canary.interval_s has its seeded request run on schedule through the normal path,
// counted apart from user traffic. Outputs that change from admission's are counted and
// named; a slower run shows in the latency ratio; both are exported. A bad interval refuses
// the model with the parameter named.
#include <gtest/gtest.h>

#include <thread>

#include "fakes/manual_clock.h"
#include "fakes/temp_repository.h"
#include "fakes/timed_backend.h"
#include "fastpath/metrics/metrics.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/server/server_impl.h"

namespace fastpath::server {
namespace {

std::string WithCanary(const std::string& interval) {
  return std::string(testing::kSimpleConfig) +
         R"(parameters { key: "fastpath.canary.interval_s" value { string_value: ")" + interval +
         R"(" } })";
}

class CanaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_.AddVersion("simple", 1, "simple");
    repo_.WriteConfig("simple", WithCanary("10"));
    repo_.AddVersion("bad", 1, "simple");
    std::string bad = WithCanary("0");
    bad.replace(bad.find("\"simple\""), 8, "\"bad\"");
    repo_.WriteConfig("bad", bad);
    Prepare();
    ServerOptions options;
    options.repository.roots = {repo_.root()};
    options.clock = &clock_;
    options.memory_sample_interval = std::chrono::milliseconds(0);
    options.drift_sample_interval = std::chrono::milliseconds(0);
    options.canary_tick = std::chrono::milliseconds(0);  // the test runs them
    auto ort = onnxruntime::CreateOrtBackend();
    ASSERT_TRUE(ort.ok());
    backend_ = std::make_shared<testing::TimedBackend>(std::move(ort).value(), &clock_);
    auto created = Server::Create(options, backend_);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    server_ = std::move(created).value();
  }

  void TearDown() override {
    if (backend_) backend_->Release();  // a failed test may leave a run held
  }

  // More models, before the server starts.
  virtual void Prepare() {}

  std::optional<admission::CanaryStatus> Canary(const std::string& model = "simple") {
    for (const admission::ModelAdmission& m : server_->Admission().models) {
      if (m.name == model) return m.canary;
    }
    return std::nullopt;
  }
  // Moves 10 s on, runs the canaries that are due and waits (real time, at most 30 s) until
  // simple's has answered `runs` times.
  void RunOnce(uint64_t runs, const std::string& model = "simple") {
    clock_.Advance(std::chrono::seconds(10));
    server_->RunCanaries();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!Canary(model) || Canary(model)->runs < runs) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the canary never answered";
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  testing::TempRepository repo_{FASTPATH_TEST_MODELS_DIR};
  testing::ManualClock clock_;
  std::shared_ptr<testing::TimedBackend> backend_;
  std::unique_ptr<Server> server_;
};

TEST_F(CanaryTest, RunsOnScheduleApartFromUserTrafficAndCatchesChangedOutputs) {
  server_->RunCanaries();  // the first sight: the first run is one interval on
  ASSERT_TRUE(Canary().has_value());
  EXPECT_EQ(Canary()->interval_s, 10);
  EXPECT_DOUBLE_EQ(Canary()->reference_ms, 1.0) << "each run takes 1 ms of the manual clock";
  EXPECT_EQ(Canary()->runs, 0u);
  server_->RunCanaries();
  EXPECT_EQ(Canary()->runs, 0u) << "not due yet";

  RunOnce(1);
  RunOnce(2);
  EXPECT_EQ(Canary()->mismatches, 0u);
  EXPECT_EQ(Canary()->failures, 0u);
  EXPECT_DOUBLE_EQ(*Canary()->latency_ratio, 1.0);
  // Counted apart: the user statistics saw nothing.
  auto stats = server_->GetModelStatistics("simple", "");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].inference_stats.success.count, 0u);
  EXPECT_EQ((*stats)[0].inference_count, 0u);

  // Another engine answers differently; then every run takes twice as long.
  backend_->corrupt = true;
  RunOnce(3);
  EXPECT_EQ(Canary()->mismatches, 1u);
  EXPECT_NE(Canary()->last_problem.find("the canary's outputs differ from admission's: output "
                                        "'OUTPUT0' element 0"),
            std::string::npos)
      << Canary()->last_problem;
  backend_->corrupt = false;
  backend_->cost_us = 2000;
  RunOnce(4);
  RunOnce(5);
  RunOnce(6);
  EXPECT_EQ(Canary()->mismatches, 1u);
  EXPECT_DOUBLE_EQ(*Canary()->latency_ratio, 2.0) << "the median of 1, 1, 2, 2, 2 ms";

  bool runs = false, mismatches = false, ratio = false;
  for (const prometheus::MetricFamily& f : metrics::AdmissionFamilies(server_->Admission())) {
    if (f.name == "fastpath_canary_runs_total") runs = f.metric.at(0).counter.value == 6;
    if (f.name == "fastpath_canary_output_mismatch_total") {
      mismatches = f.metric.at(0).counter.value == 1;
    }
    if (f.name == "fastpath_canary_latency_ratio") ratio = f.metric.at(0).gauge.value == 2.0;
  }
  EXPECT_TRUE(runs);
  EXPECT_TRUE(mismatches);
  EXPECT_TRUE(ratio);
}

TEST_F(CanaryTest, AHungCanaryCountsAFailureEachMinuteAndTheChecksGoOnWhenItAnswers) {
  server_->RunCanaries();  // the first sight
  RunOnce(1);
  const int entered = backend_->runs_entered.load();
  backend_->Hold();
  clock_.Advance(std::chrono::seconds(10));
  server_->RunCanaries();  // sent; its execution hangs
  clock_.Advance(std::chrono::seconds(30));
  server_->RunCanaries();
  EXPECT_EQ(Canary()->failures, 0u) << "30 s unanswered is not yet hung";
  clock_.Advance(std::chrono::seconds(30));
  server_->RunCanaries();
  EXPECT_EQ(Canary()->failures, 1u);
  EXPECT_EQ(Canary()->last_problem,
            "the canary sent 60 s ago has not answered: an execution hangs or the model's queue "
            "does not move");
  clock_.Advance(std::chrono::seconds(30));
  server_->RunCanaries();
  EXPECT_EQ(Canary()->failures, 1u) << "90 s: still the first minute's failure";
  clock_.Advance(std::chrono::seconds(30));
  server_->RunCanaries();
  EXPECT_EQ(Canary()->failures, 2u) << "2 minutes unanswered: the failures keep counting";
  EXPECT_EQ(Canary()->last_problem,
            "the canary sent 120 s ago has not answered: an execution hangs or the model's "
            "queue does not move");
  // The model's Run was entered once, by the held canary: none was sent onto the hung path.
  while (backend_->runs_entered.load() == entered) std::this_thread::yield();
  EXPECT_EQ(backend_->runs_entered.load(), entered + 1);

  backend_->Release();  // it answers at last, with the right outputs
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (Canary()->runs < 2) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the held canary never answered";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(Canary()->runs, 2u);
  EXPECT_EQ(Canary()->failures, 2u) << "its late answer adds nothing";
  EXPECT_EQ(Canary()->mismatches, 0u);
  RunOnce(3);  // and the checks go on
  EXPECT_EQ(Canary()->failures, 2u);
  EXPECT_EQ(backend_->runs_entered.load(), entered + 2);
}

class ReshapedCanaryTest : public CanaryTest {
 protected:
  void Prepare() override {
    repo_.Remove("simple");
    // Clients see OUTPUT0 as [4, 4] where the model produces [16]: the canary compares what
    // clients see, at admission as later.
    repo_.AddVersion("reshaped", 1, "simple");
    std::string reshaped = WithCanary("10");
    reshaped.replace(reshaped.find("\"simple\""), 8, "\"reshaped\"");
    reshaped.replace(reshaped.find("{ name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 16 ] }"),
                     std::string("{ name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 16 ] }").size(),
                     "{ name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 4, 4 ] reshape: { shape: [ 16 ] } }");
    repo_.WriteConfig("reshaped", reshaped);
  }
};

TEST_F(ReshapedCanaryTest, AReshapedOutputMatchesWhatItAnsweredAtAdmission) {
  server_->RunCanaries();
  RunOnce(1, "reshaped");
  RunOnce(2, "reshaped");
  EXPECT_EQ(Canary("reshaped")->mismatches, 0u) << Canary("reshaped")->last_problem;
  EXPECT_EQ(Canary("reshaped")->failures, 0u) << Canary("reshaped")->last_problem;
}

TEST_F(CanaryTest, ABadIntervalRefusesTheModelNamingTheParameter) {
  bool found = false;
  for (const RepositoryEntry& e : server_->RepositoryIndex(false)) {
    if (e.name != "bad") continue;
    found = true;
    EXPECT_EQ(e.state, ModelState::kUnavailable);
    EXPECT_NE(e.reason.find("'fastpath.canary.interval_s' is '0'; it must be a whole number of "
                            "seconds from 1 to 86400"),
              std::string::npos)
        << e.reason;
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace fastpath::server
