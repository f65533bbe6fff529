// The server's admission hook (issue 4 §5, §6) with an injected clock: the self-test's
// latencies are synthetic, so a miss and a pass are decided by the test, never by the
// machine's speed; the requests themselves run on the real ORT backend and scheduler.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "fakes/manual_clock.h"
#include "fakes/temp_repository.h"
#include "fakes/wrapping_backend.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/server/server_impl.h"

namespace fastpath::server {
namespace {

using ::testing::HasSubstr;

constexpr const char* kBudgetedSimple = R"(
name: "simple"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
instance_group [ { kind: KIND_CPU count: 1 } ]
model_warmup {
  name: "zeros" batch_size: 2 count: 2
  inputs { key: "INPUT0" value { data_type: TYPE_INT32 dims: [ 16 ] zero_data: true } }
  inputs { key: "INPUT1" value { data_type: TYPE_INT32 dims: [ 16 ] random_data: true } }
}
parameters { key: "fastpath.slo.p95_ms" value { string_value: "1" } }
parameters { key: "fastpath.slo.iterations" value { string_value: "4" } }
parameters { key: "fastpath.slo.warmup_iterations" value { string_value: "1" } }
)";

class ServerAdmissionTest : public ::testing::Test {
 protected:
  // Each reading of the server's one clock moves it by `step`. Between the self-test's two
  // readings around a run the clock is read four more times (the server's arrival stamp,
  // and the instance pool's start, ran and end), so every run "takes" exactly 5 steps.
  std::unique_ptr<Server> Start(admission::Profile profile, std::chrono::microseconds step) {
    repo_.AddVersion("simple", 1, "simple");
    repo_.WriteConfig("simple", kBudgetedSimple);
    ServerOptions options;
    options.repository.roots = {repo_.root()};
    options.policy.profile = profile;
    options.capability_snapshot_json = R"({"ort_version": "test"})";
    clock_ = std::make_unique<testing::ManualClock>(step);
    options.clock = clock_.get();
    auto backend = onnxruntime::CreateOrtBackend();
    EXPECT_TRUE(backend.ok());
    auto server = Server::Create(options, std::move(backend).value());
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    return server.ok() ? std::move(server).value() : nullptr;
  }
  testing::TempRepository repo_{FASTPATH_TEST_MODELS_DIR};
  std::unique_ptr<testing::ManualClock> clock_;  // outlives the servers Start makes
};

TEST_F(ServerAdmissionTest, WithinBudgetIsReady) {
  auto server = Start(admission::Profile::kProduction, std::chrono::microseconds(100));
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(server->IsReady());
  const admission::AdmissionReport report = server->Admission();
  EXPECT_TRUE(report.ready);
  ASSERT_EQ(report.models.size(), 1u);
  const admission::ModelAdmission& m = report.models[0];
  EXPECT_EQ(m.state, admission::AdmissionState::kReady);
  ASSERT_TRUE(m.self_test.has_value());
  EXPECT_TRUE(m.self_test->passed());
  EXPECT_EQ(m.self_test->warmup_runs, 3u);  // model_warmup count 2, then 1 untimed
  EXPECT_DOUBLE_EQ(m.self_test->figures->p95_ms, 0.5);
  EXPECT_EQ(m.self_test->figures->iterations, 4u);
  EXPECT_EQ(report.snapshot_json, R"({"ort_version": "test"})");
}

// Counts the runs of the instance it stands in front of.
class CountingInstance final : public backend::ModelInstance {
 public:
  CountingInstance(std::unique_ptr<backend::ModelInstance> real, std::atomic<int>* runs)
      : real_(std::move(real)), runs_(runs) {}
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                    const std::vector<std::string>& output_names) override {
    ++*runs_;
    return real_->Run(inputs, output_names);
  }
  const backend::PlacementAudit* placement() const override { return real_->placement(); }

 private:
  std::unique_ptr<backend::ModelInstance> real_;
  std::atomic<int>* runs_;
};

// As Triton: model_warmup runs on every instance. Through the scheduler it ran on whichever
// was free, and the others paid the first run's cost (a GPU's initialisation) on clients.
TEST(WarmUpTest, EveryInstanceRunsTheModelWarmup) {
  for (const std::string batching : {"", "dynamic_batching { }\n"}) {
    SCOPED_TRACE(batching.empty() ? "instance pool" : "dynamic batcher");
    testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
    repo.AddVersion("simple", 1, "simple");
    std::string config = kBudgetedSimple;
    config = config.substr(0, config.find("parameters {"));  // warm-up only, no budget
    config.replace(config.find("count: 1 }"), 10, "count: 3 }");
    repo.WriteConfig("simple", config + batching);
    std::mutex mu;
    std::vector<std::unique_ptr<std::atomic<int>>> runs;  // per instance, in creation order
    auto inner = onnxruntime::CreateOrtBackend();
    ASSERT_TRUE(inner.ok());
    auto backend = std::make_shared<testing::WrappingBackend>(
        std::move(inner).value(),
        [&](const std::filesystem::path&, std::unique_ptr<backend::ModelInstance> real)
            -> std::unique_ptr<backend::ModelInstance> {
          std::lock_guard lock(mu);
          runs.push_back(std::make_unique<std::atomic<int>>(0));
          return std::make_unique<CountingInstance>(std::move(real), runs.back().get());
        });
    ServerOptions options;
    options.repository.roots = {repo.root()};
    auto server = Server::Create(options, backend);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    ASSERT_TRUE((*server)->IsReady());
    ASSERT_EQ(runs.size(), 3u);
    for (size_t i = 0; i < runs.size(); ++i) {
      EXPECT_GE(runs[i]->load(), 2) << "instance " << i << " was not warmed";
    }
    const admission::AdmissionReport report = (*server)->Admission();
    ASSERT_EQ(report.models.size(), 1u);
    ASSERT_TRUE(report.models[0].self_test.has_value());
    EXPECT_EQ(report.models[0].self_test->warmup_runs, 6u);  // count 2 on each of 3
  }
}

// Run on each instance, the warm-up's answers are checked as a client's are: a model whose
// outputs never fit its config was refused with one instance and admitted with two.
TEST(WarmUpTest, AWarmUpWhoseOutputsDoNotFitRefusesTheModelWhateverItsInstances) {
  for (const int count : {1, 2}) {
    SCOPED_TRACE("count " + std::to_string(count));
    testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
    repo.AddVersion("misfit", 1, "identity_fp32");
    repo.WriteConfig("misfit", R"(max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape: { shape: [ 4 ] } } ]
instance_group [ { kind: KIND_CPU count: )" +
                                   std::to_string(count) + R"( } ]
model_warmup {
  name: "five" batch_size: 1
  inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 5 ] zero_data: true } }
})");
    ServerOptions options;
    options.repository.roots = {repo.root()};
    auto backend = onnxruntime::CreateOrtBackend();
    ASSERT_TRUE(backend.ok());
    auto server = Server::Create(options, std::move(backend).value());
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    EXPECT_FALSE((*server)->IsReady());
    const admission::AdmissionReport report = (*server)->Admission();
    ASSERT_EQ(report.models.size(), 1u);
    EXPECT_EQ(report.models[0].state, admission::AdmissionState::kUnavailable);
    ASSERT_FALSE(report.models[0].reasons.empty());
    EXPECT_THAT(report.models[0].reasons[0], HasSubstr("warm-up 'five'"));
  }
}

TEST_F(ServerAdmissionTest, ProductionRefusesAMiss) {
  auto server = Start(admission::Profile::kProduction, std::chrono::microseconds(1000));
  ASSERT_NE(server, nullptr);
  EXPECT_FALSE(server->IsReady());
  EXPECT_FALSE(*server->IsModelReady("simple", ""));
  const admission::AdmissionReport report = server->Admission();
  EXPECT_FALSE(report.ready);
  ASSERT_EQ(report.models.size(), 1u);
  const admission::ModelAdmission& m = report.models[0];
  EXPECT_EQ(m.state, admission::AdmissionState::kUnavailable);
  ASSERT_EQ(m.reasons.size(), 1u);
  EXPECT_THAT(m.reasons[0], HasSubstr("self-test missed its budget: p95 5 ms > budget 1 ms"));
  ASSERT_TRUE(m.self_test.has_value());  // the figures stay with the refused version
  EXPECT_FALSE(m.self_test->passed());
  EXPECT_DOUBLE_EQ(m.self_test->figures->p95_ms, 5.0);
  ASSERT_EQ(report.reasons.size(), 1u);
  EXPECT_THAT(report.reasons[0],
              HasSubstr("model 'simple' version 1 is not READY: self-test missed"));
}

TEST_F(ServerAdmissionTest, DevServesAMissDegraded) {
  auto server = Start(admission::Profile::kDev, std::chrono::microseconds(1000));
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(server->IsReady());
  EXPECT_TRUE(*server->IsModelReady("simple", ""));
  const admission::AdmissionReport report = server->Admission();
  ASSERT_EQ(report.models.size(), 1u);
  EXPECT_EQ(report.models[0].state, admission::AdmissionState::kDegraded);
  EXPECT_THAT(report.models[0].reasons[0], HasSubstr("p95 5 ms > budget 1 ms"));
  EXPECT_THAT(admission::ReportToJson(report), HasSubstr("\"state\": \"DEGRADED\""));
}

// The FP16 accuracy guard with real models: Y = X + 0.1 computed in FP16 (fp16_add) and
// its FP32 twin (fp32_add) as the reference, on the seeded warm-up inputs.
class AccuracyGuardAdmissionTest : public ::testing::Test {
 protected:
  std::unique_ptr<Server> Start(admission::Profile profile, const std::string& tolerance,
                                const std::string& reference = "model_fp32.onnx") {
    repo_.AddVersion("fp16", 1, "fp16_add");
    std::filesystem::copy_file(std::filesystem::path(FASTPATH_TEST_MODELS_DIR) / "fp32_add.onnx",
                               repo_.root() / "fp16" / "1" / "model_fp32.onnx");
    repo_.WriteConfig("fp16", R"(
name: "fp16"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
model_warmup {
  name: "random" batch_size: 4 count: 1
  inputs { key: "X" value { data_type: TYPE_FP32 dims: [ 16 ] random_data: true } }
}
parameters { key: "fastpath.accuracy.reference_model" value { string_value: ")" +
                                  reference + R"(" } }
parameters { key: "fastpath.accuracy.tolerance" value { string_value: ")" +
                                  tolerance + R"(" } }
)");
    ServerOptions options;
    options.repository.roots = {repo_.root()};
    options.policy.profile = profile;
    auto backend = onnxruntime::CreateOrtBackend();
    EXPECT_TRUE(backend.ok());
    auto server = Server::Create(options, std::move(backend).value());
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    return server.ok() ? std::move(server).value() : nullptr;
  }
  testing::TempRepository repo_{FASTPATH_TEST_MODELS_DIR};
  std::unique_ptr<testing::ManualClock> clock_;  // outlives the servers Start makes
};

TEST_F(AccuracyGuardAdmissionTest, WithinToleranceIsReady) {
  // FP16 rounding of values in [0.1, 1.1) stays below 1e-3.
  auto server = Start(admission::Profile::kProduction, "1e-3");
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(server->IsReady());
  const admission::AdmissionReport report = server->Admission();
  ASSERT_EQ(report.models.size(), 1u);
  EXPECT_EQ(report.models[0].state, admission::AdmissionState::kReady);
}

TEST_F(AccuracyGuardAdmissionTest, ProductionRefusesAMissNamingTheWorstElement) {
  auto server = Start(admission::Profile::kProduction, "1e-6");
  ASSERT_NE(server, nullptr);
  EXPECT_FALSE(server->IsReady());
  const admission::AdmissionReport report = server->Admission();
  ASSERT_EQ(report.models.size(), 1u);
  const admission::ModelAdmission& m = report.models[0];
  EXPECT_EQ(m.state, admission::AdmissionState::kUnavailable);
  ASSERT_EQ(m.reasons.size(), 1u);
  EXPECT_THAT(m.reasons[0],
              ::testing::MatchesRegex("accuracy guard: outputs differ from the FP32 reference: "
                                      "output 'Y' element [0-9]+: [0-9.e-]+ here, [0-9.e-]+ from "
                                      "the FP32 reference 'model_fp32.onnx'; \\|difference\\| "
                                      "[0-9.e-]+ > tolerance 1e-06 \\(warm-up 'random'\\)"));
}

TEST_F(AccuracyGuardAdmissionTest, DevServesAMissDegraded) {
  auto server = Start(admission::Profile::kDev, "1e-6");
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(server->IsReady());
  const admission::AdmissionReport report = server->Admission();
  ASSERT_EQ(report.models.size(), 1u);
  EXPECT_EQ(report.models[0].state, admission::AdmissionState::kDegraded);
  ASSERT_EQ(report.models[0].reasons.size(), 1u);
  EXPECT_THAT(report.models[0].reasons[0], HasSubstr("> tolerance 1e-06 (warm-up 'random')"));
}

TEST_F(AccuracyGuardAdmissionTest, MissingReferenceIsRefusedNamingIt) {
  auto server = Start(admission::Profile::kDev, "1e-3", "missing_fp32.onnx");
  ASSERT_NE(server, nullptr);
  const admission::AdmissionReport report = server->Admission();
  ASSERT_EQ(report.models.size(), 1u);
  EXPECT_EQ(report.models[0].state, admission::AdmissionState::kUnavailable);
  EXPECT_THAT(report.models[0].reasons[0],
              HasSubstr("accuracy guard: the FP32 reference 'missing_fp32.onnx'"));
  EXPECT_THAT(report.models[0].reasons[0], HasSubstr("missing_fp32.onnx' does not exist"));
}

}  // namespace
}  // namespace fastpath::server
