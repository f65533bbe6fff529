#include "fastpath/admission/self_test.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "fakes/manual_clock.h"
#include "fastpath/admission/accuracy_guard.h"
#include "fastpath/admission/memory_budget.h"
#include "fastpath/config/model_config.h"

namespace fastpath::admission {
namespace {

using ::testing::HasSubstr;

inference::ModelConfig Config(const std::string& extra) {
  const std::string text = R"(name: "m"
max_batch_size: 8
input { name: "x" data_type: TYPE_FP32 dims: [ 4 ] }
input { name: "ids" data_type: TYPE_INT64 dims: [ 2 ] }
output { name: "y" data_type: TYPE_FP32 dims: [ 4 ] }
)" + extra;
  auto parsed = config::ParseModelConfig(text, "config.pbtxt");
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : inference::ModelConfig();
}

std::string Param(const std::string& key, const std::string& value) {
  return "parameters { key: \"" + key + "\" value { string_value: \"" + value + "\" } }\n";
}

SelfTestBudget Budget(double p95_ms, uint32_t batch_size = 0, uint32_t iterations = 20,
                      std::optional<double> min_throughput = std::nullopt) {
  SelfTestBudget budget;
  budget.p95_ms = p95_ms;
  budget.batch_size = batch_size;
  budget.iterations = iterations;
  budget.min_throughput = min_throughput;
  return budget;
}

TEST(SelfTestBudget, NoKeysNoBudget) {
  auto budget = ParseBudget(Config(""));
  ASSERT_TRUE(budget.ok());
  EXPECT_FALSE(budget->declared());
}

TEST(SelfTestBudget, ParsesEveryKey) {
  auto budget = ParseBudget(Config(
      Param(kSloP95Ms, "0.000001") + Param(kSloMinThroughput, "250.5") + Param(kSloBatchSize, "4") +
      Param(kSloIterations, "50") + Param(kSloWarmupIterations, "0") + Param(kSloSeed, "42")));
  ASSERT_TRUE(budget.ok()) << budget.status().ToString();
  EXPECT_DOUBLE_EQ(*budget->p95_ms, 0.000001);
  EXPECT_DOUBLE_EQ(*budget->min_throughput, 250.5);
  EXPECT_EQ(budget->batch_size, 4u);
  EXPECT_EQ(budget->iterations, 50u);
  EXPECT_EQ(budget->warmup_iterations, 0u);
  EXPECT_EQ(budget->seed, 42u);
}

TEST(SelfTestBudget, BadValuesNameTheKey) {
  auto error = [](const std::string& params) {
    return ParseBudget(Config(params)).status().message();
  };
  EXPECT_EQ(error(Param(kSloP95Ms, "fast")),
            "parameters: 'fastpath.slo.p95_ms' is 'fast'; it must be a number greater than 0");
  EXPECT_THAT(error(Param(kSloP95Ms, "0")), HasSubstr("greater than 0"));
  EXPECT_THAT(error(Param(kSloP95Ms, "inf")), HasSubstr("greater than 0"));
  EXPECT_THAT(
      error(Param(kSloP95Ms, "1") + Param(kSloIterations, "0")),
      HasSubstr("'fastpath.slo.iterations' is '0'; it must be an integer between 1 and 10000"));
  EXPECT_THAT(error(Param(kSloP95Ms, "1") + Param(kSloBatchSize, "9")),
              HasSubstr("between 1 and 8 (max_batch_size)"));
  EXPECT_THAT(error(Param("fastpath.slo.p99_ms", "1")),
              HasSubstr("unknown key 'fastpath.slo.p99_ms'"));
  EXPECT_THAT(error(Param(kSloIterations, "5")), HasSubstr("settings without a budget"));
}

TEST(SelfTestData, SeededAndDeterministic) {
  const std::string a = SeededData(DataType::kFp32, 16, 7, "x");
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a, SeededData(DataType::kFp32, 16, 7, "x"));
  EXPECT_NE(a, SeededData(DataType::kFp32, 16, 8, "x"));
  EXPECT_NE(a, SeededData(DataType::kFp32, 16, 7, "other"));
  for (int i = 0; i < 16; ++i) {
    float f;
    std::memcpy(&f, a.data() + 4 * i, 4);
    EXPECT_GE(f, 0.0f);
    EXPECT_LT(f, 1.0f);
  }
  const std::string ids = SeededData(DataType::kInt64, 8, 7, "ids");
  for (int i = 0; i < 8; ++i) {
    int64_t v;
    std::memcpy(&v, ids.data() + 8 * i, 8);
    EXPECT_GE(v, 0);
    EXPECT_LT(v, 16);
  }
  Tensor words{"w", DataType::kBytes, {3}, SeededData(DataType::kBytes, 3, 1, "w")};
  EXPECT_TRUE(ValidateTensorData(words).ok());
}

TEST(SelfTestPlan, WithoutWarmupUsesRandomInputsAtTheBudgetBatch) {
  auto plan = MakeSelfTestPlan(Config(""), "/nonexistent", Budget(5.0, 3));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->warmups.empty());
  ASSERT_TRUE(plan->timed.has_value());
  EXPECT_EQ(plan->batch_size, 3u);
  ASSERT_EQ(plan->timed->inputs.size(), 2u);
  for (const Tensor& t : plan->timed->inputs) EXPECT_EQ(t.shape[0], 3);
}

TEST(SelfTestPlan, NoBudgetNoWarmupIsEmpty) {
  auto plan = MakeSelfTestPlan(Config(""), "/nonexistent", {});
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->empty());
}

TEST(SelfTestPlan, ModelWarmupZeroRandomAndFile) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "fastpath_self_test_plan";
  std::filesystem::create_directories(dir / "warmup");
  { std::ofstream(dir / "warmup" / "ids.bin", std::ios::binary) << std::string(16, '\0'); }
  auto plan = MakeSelfTestPlan(Config(R"(model_warmup {
  name: "w" batch_size: 2 count: 3
  inputs { key: "x" value { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } }
  inputs { key: "ids" value { data_type: TYPE_INT64 dims: [ 2 ] input_data_file: "ids.bin" } }
}
)"),
                               dir, Budget(5.0));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->warmups.size(), 1u);
  EXPECT_EQ(plan->warmups[0].name, "w");
  EXPECT_EQ(plan->warmups[0].count, 3u);
  EXPECT_EQ(plan->batch_size, 2u);  // the warm-up's batch when the budget names none
  for (const Tensor& t : plan->warmups[0].request.inputs) {
    EXPECT_EQ(t.shape[0], 2);
    EXPECT_EQ(t.data, std::string(t.data.size(), '\0'));
  }

  std::ofstream(dir / "warmup" / "ids.bin", std::ios::binary) << "short";
  auto bad = MakeSelfTestPlan(Config(R"(model_warmup {
  name: "w" batch_size: 1
  inputs { key: "x" value { data_type: TYPE_FP32 dims: [ 4 ] random_data: true } }
  inputs { key: "ids" value { data_type: TYPE_INT64 dims: [ 2 ] input_data_file: "ids.bin" } }
}
)"),
                              dir, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("model_warmup[0] 'w': input 'ids': warm-up data"));
  EXPECT_THAT(bad.status().message(),
              HasSubstr("has 5 bytes; one batch element of [2] INT64 needs 16"));
  std::filesystem::remove_all(dir);
}

TEST(SelfTestPlan, DynamicDimsNeedAModelWarmup) {
  auto config = config::ParseModelConfig(R"(name: "m" max_batch_size: 4
input { name: "x" data_type: TYPE_FP32 dims: [ -1 ] }
output { name: "y" data_type: TYPE_FP32 dims: [ -1 ] })",
                                         "config.pbtxt");
  ASSERT_TRUE(config.ok());
  auto plan = MakeSelfTestPlan(*config, "/nonexistent", Budget(1.0));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(
      plan.status().message(),
      "its timed request: input 'x' has a dynamic shape [-1]; declare a model_warmup with "
      "concrete dims "
      "for the self-test");
}

TEST(SelfTestFigures, NearestRankPercentiles) {
  std::vector<std::chrono::nanoseconds> latencies;
  for (int i = 1; i <= 20; ++i) latencies.push_back(std::chrono::milliseconds(i));
  const SelfTestFigures f = ComputeFigures(latencies, 2);
  EXPECT_DOUBLE_EQ(f.p50_ms, 10.0);
  EXPECT_DOUBLE_EQ(f.p95_ms, 19.0);
  EXPECT_DOUBLE_EQ(f.max_ms, 20.0);
  EXPECT_DOUBLE_EQ(f.throughput, 2.0 * 20 / 0.210);
}

// A fake model: each run advances a fake clock by the next synthetic latency.
struct FakeModel {
  testing::ManualClock clock;
  std::vector<std::chrono::microseconds> latencies;
  size_t runs = 0;
  int fail_at = -1;
  RunFn Run() {
    return [this](const InferRequest&) -> Status {
      if (static_cast<int>(runs) == fail_at) return Unavailable("CUDA out of memory");
      clock.Advance(latencies[runs % latencies.size()]);
      ++runs;
      return Status::Ok();
    };
  }
};

SelfTestPlan Plan(SelfTestBudget budget) {
  auto plan = MakeSelfTestPlan(Config(""), "/nonexistent", budget);
  EXPECT_TRUE(plan.ok());
  return *plan;
}

TEST(SelfTest, WithinBudgetPasses) {
  FakeModel model;
  model.latencies = {std::chrono::microseconds(400)};
  auto report = RunSelfTest(Plan(Budget(1.0, 0, 10, 2000)), model.Run(), model.clock);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->passed());
  EXPECT_EQ(report->warmup_runs, 3u);
  EXPECT_EQ(model.runs, 13u);
  EXPECT_DOUBLE_EQ(report->figures->p95_ms, 0.4);
  EXPECT_DOUBLE_EQ(report->figures->throughput, 2500.0);
  EXPECT_EQ(
      report->Summary(),
      "p95 0.4 ms (budget 1 ms), throughput 2500/s (budget >= 2000/s), batch 1, 10 timed runs");
}

TEST(SelfTest, SlowTailMissesTheP95Budget) {
  FakeModel model;
  // 18 fast runs and 2 slow ones: p95 (the 19th of 20) is slow.
  for (int i = 0; i < 3 + 18; ++i) model.latencies.push_back(std::chrono::microseconds(500));
  model.latencies.push_back(std::chrono::microseconds(12000));
  model.latencies.push_back(std::chrono::microseconds(12000));
  auto report = RunSelfTest(Plan(Budget(10.0, 0, 20, 10000)), model.Run(), model.clock);
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->passed());
  EXPECT_THAT(report->misses, ::testing::ElementsAre("p95 12 ms > budget 10 ms",
                                                     "throughput 606.061/s < budget 10000/s"));
}

TEST(SelfTest, AFailedRunIsAnErrorNamingTheRun) {
  FakeModel model;
  model.latencies = {std::chrono::microseconds(100)};
  model.fail_at = 5;
  auto report = RunSelfTest(Plan(Budget(1.0)), model.Run(), model.clock);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().message(), "self-test timed run 3 failed: CUDA out of memory");
}

}  // namespace
}  // namespace fastpath::admission

namespace fastpath::admission {
namespace {

// The config module refuses "fastpath." keys it does not know; every key admission reads
// must be among them, or a budget could never be declared.
TEST(AdmissionParameters, EveryKeyAdmissionReadsIsKnownToTheConfigCheck) {
  const std::vector<std::string>& known = config::KnownFastpathParameters();
  for (const char* key : {kSloP95Ms, kSloMinThroughput, kSloBatchSize, kSloIterations,
                          kSloWarmupIterations, kSloSeed, kAccuracyReferenceModel,
                          kAccuracyTolerance, kMemoryMargin}) {
    EXPECT_TRUE(std::find(known.begin(), known.end(), key) != known.end()) << key;
  }
}

}  // namespace
}  // namespace fastpath::admission
