#include "fastpath/admission/rollout_gate.h"

#include <gtest/gtest.h>

namespace fastpath::admission {
namespace {

inference::ModelConfig WithParameters(const std::map<std::string, std::string>& parameters) {
  inference::ModelConfig config;
  config.set_name("m");
  for (const auto& [key, value] : parameters) {
    (*config.mutable_parameters())[key].set_string_value(value);
  }
  return config;
}

TEST(RolloutGateForTest, OffUnlessTurnedOn) {
  auto none = RolloutGateFor(WithParameters({}));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto off = RolloutGateFor(WithParameters({{kRolloutGate, "false"}}));
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->has_value());
}

TEST(RolloutGateForTest, DefaultsAndSettings) {
  auto gate = RolloutGateFor(WithParameters({{kRolloutGate, "true"}}));
  ASSERT_TRUE(gate.ok()) << gate.status().message();
  ASSERT_TRUE(gate->has_value());
  EXPECT_DOUBLE_EQ((*gate)->max_p95_ratio, 1.10);
  EXPECT_DOUBLE_EQ((*gate)->min_throughput_ratio, 0.90);
  EXPECT_FALSE((*gate)->output_tolerance.has_value());
  EXPECT_EQ((*gate)->rounds, 30u);

  gate = RolloutGateFor(WithParameters({{kRolloutGate, "true"},
                                        {kRolloutMaxP95Ratio, "1.25"},
                                        {kRolloutMinThroughputRatio, "0.8"},
                                        {kRolloutOutputTolerance, "0"},
                                        {kRolloutRounds, "12"}}));
  ASSERT_TRUE(gate.ok()) << gate.status().message();
  EXPECT_DOUBLE_EQ((*gate)->max_p95_ratio, 1.25);
  EXPECT_DOUBLE_EQ((*gate)->min_throughput_ratio, 0.8);
  EXPECT_EQ((*gate)->output_tolerance, 0.0);
  EXPECT_EQ((*gate)->rounds, 12u);
}

TEST(RolloutGateForTest, BadSettingsNameTheKey) {
  const std::vector<std::map<std::string, std::string>> bad = {
      {{kRolloutGate, "yes"}},
      {{kRolloutGate, "true"}, {kRolloutMaxP95Ratio, "0.9"}},
      {{kRolloutGate, "true"}, {kRolloutMinThroughputRatio, "1.5"}},
      {{kRolloutGate, "true"}, {kRolloutOutputTolerance, "-1"}},
      {{kRolloutGate, "true"}, {kRolloutRounds, "2"}},
      {{kRolloutGate, "true"}, {kRolloutRounds, "10.5"}},
      {{kRolloutGate, "true"}, {"fastpath.rollout.typo", "1"}},
      // A tolerance for a gate that is off is a mistake, not a no-op.
      {{kRolloutMaxP95Ratio, "1.2"}},
  };
  for (const auto& parameters : bad) {
    auto gate = RolloutGateFor(WithParameters(parameters));
    ASSERT_FALSE(gate.ok()) << parameters.rbegin()->first;
    EXPECT_NE(gate.status().message().find(parameters.rbegin()->first), std::string::npos)
        << gate.status().message();
  }
}

TEST(RolloutGateForTest, AnEnsembleIsRefusedTheGate) {
  inference::ModelConfig config = WithParameters({{kRolloutGate, "true"}});
  config.set_platform("ensemble");
  auto gate = RolloutGateFor(config);
  ASSERT_FALSE(gate.ok());
  EXPECT_NE(gate.status().message().find("step models"), std::string::npos)
      << gate.status().message();
}

GateSamples Samples(std::vector<double> baseline, std::vector<double> candidate) {
  GateSamples s;
  s.baseline_ms = std::move(baseline);
  s.candidate_ms = std::move(candidate);
  return s;
}

TEST(JudgeGateTest, AnEqualCandidatePasses) {
  const GateVerdict v = JudgeGate(GatePolicy{}, Samples({1, 1.1, 0.9, 1, 1}, {1, 0.9, 1.1, 1, 1}));
  EXPECT_TRUE(v.passed) << v.summary;
  EXPECT_DOUBLE_EQ(v.p95_ratio, 1.0);
  EXPECT_DOUBLE_EQ(v.throughput_ratio, 1.0);
  EXPECT_EQ(v.summary.rfind("passed: ", 0), 0u) << v.summary;
}

TEST(JudgeGateTest, ASlowerCandidateIsRefusedWithBothFigures) {
  const GateVerdict v = JudgeGate(GatePolicy{}, Samples({2, 2, 2, 2}, {2.6, 2.6, 2.6, 2.6}));
  EXPECT_FALSE(v.passed);
  EXPECT_NEAR(v.p95_ratio, 1.3, 1e-9);
  EXPECT_NEAR(v.throughput_ratio, 1 / 1.3, 1e-9);
  ASSERT_EQ(v.failures.size(), 2u);
  EXPECT_NE(v.failures[0].find("p95 1.3x"), std::string::npos) << v.failures[0];
  EXPECT_NE(v.summary.find("candidate p50 2.6 ms"), std::string::npos) << v.summary;
  EXPECT_NE(v.summary.find("serving p50 2 ms"), std::string::npos) << v.summary;
}

TEST(JudgeGateTest, ThroughputIsJudgedPerRoundSoDriftBetweenRoundsCancels) {
  // The machine slows down 3x half way through; each candidate run is 5% slower than the
  // serving run beside it. Medians of each side alone would mix the two halves; per-round
  // ratios see 0.95 throughout.
  GateSamples s = Samples({1, 1, 3, 3}, {1.05, 1.05, 3.15, 3.15});
  const GateVerdict v = JudgeGate(GatePolicy{}, s);
  EXPECT_NEAR(v.throughput_ratio, 1 / 1.05, 1e-9);
  EXPECT_TRUE(v.passed) << v.summary;
}

TEST(JudgeGateTest, ThroughputComesFromTheLargestBatchWhenMeasured) {
  GateSamples s = Samples({1, 1}, {1, 1});
  s.baseline_batch_ms = {4, 4};
  s.candidate_batch_ms = {8, 8};
  s.batch_rows = 8;
  const GateVerdict v = JudgeGate(GatePolicy{}, s);
  EXPECT_DOUBLE_EQ(v.throughput_ratio, 0.5);
  EXPECT_EQ(v.throughput_rows, 8u);
  EXPECT_FALSE(v.passed);
}

TEST(JudgeGateTest, OutputsAreJudgedOnlyWithATolerance) {
  GateSamples s = Samples({1}, {1});
  s.output_difference = 0.02;
  s.output_difference_detail = "output 'Y' element 3: 1.02 candidate, 1 serving";
  EXPECT_TRUE(JudgeGate(GatePolicy{}, s).passed);
  GatePolicy strict;
  strict.output_tolerance = 1e-3;
  const GateVerdict v = JudgeGate(strict, s);
  EXPECT_FALSE(v.passed);
  ASSERT_EQ(v.failures.size(), 1u);
  EXPECT_NE(v.failures[0].find("element 3"), std::string::npos) << v.failures[0];
}

// Two equal versions on a busy machine: runs of about 1 ms, and one in 20 stalled to 2 ms
// by scheduling. The candidate happened to stall once more in 200 runs, so its p95 lands
// on a stall and is 1.9x the serving version's, far past the 1.10x tolerance; but one
// stall more or less moves it, and it passes.
TEST(JudgeGateTest, NoiseAloneNeverRefuses) {
  std::vector<double> baseline, candidate;
  for (int i = 0; i < 200; ++i) {
    baseline.push_back(i % 20 == 3 ? 2.0 : 1.0 + 0.01 * (i % 7));
    candidate.push_back(i % 20 == 11 || i == 100 ? 2.0 : 1.0 + 0.01 * ((i + 3) % 7));
  }
  const GateVerdict v = JudgeGate(GatePolicy{}, Samples(baseline, candidate));
  EXPECT_GT(v.p95_ratio, 1.8);
  EXPECT_LE(v.p95_ratio_low, 1.10);
  EXPECT_TRUE(v.passed) << v.summary;
  EXPECT_NE(v.summary.find("90% interval"), std::string::npos) << v.summary;
}

TEST(JudgeGateTest, AConsistentlySlowerCandidateIsRefusedThroughTheNoise) {
  std::vector<double> baseline, candidate;
  for (int i = 0; i < 200; ++i) {
    const double noise = i % 20 == 3 ? 1.0 : 0.01 * (i % 7);
    baseline.push_back(1.0 + noise);
    candidate.push_back(1.3 * (1.0 + noise));
  }
  const GateVerdict v = JudgeGate(GatePolicy{}, Samples(baseline, candidate));
  EXPECT_FALSE(v.passed) << v.summary;
  EXPECT_GT(v.p95_ratio_low, 1.10);
  EXPECT_LT(v.throughput_ratio_high, 0.90);
}

TEST(JudgeGateTest, AZeroTimeIsNotTrusted) {
  const GateVerdict v = JudgeGate(GatePolicy{}, Samples({0, 1, 1}, {1, 1, 1}));
  EXPECT_FALSE(v.passed);
  ASSERT_EQ(v.failures.size(), 1u);
  EXPECT_NE(v.failures[0].find("0 ms"), std::string::npos) << v.failures[0];
}

TEST(JudgeGateTest, NothingMeasuredIsRefused) {
  EXPECT_FALSE(JudgeGate(GatePolicy{}, GateSamples{}).passed);
}

TEST(GateInconclusiveTest, APointPastTheToleranceWithAnIntervalBackOverItIsNotClear) {
  GateVerdict v;
  v.p95_ratio = v.p95_ratio_low = v.p95_ratio_high = 1.0;
  v.throughput_ratio = 0.85;
  v.throughput_ratio_low = 0.79;
  v.throughput_ratio_high = 0.93;  // reaches back over 0.90
  EXPECT_TRUE(GateInconclusive(GatePolicy(), v));
  v.throughput_ratio_high = 0.88;  // clearly slower: refused, no more to measure
  EXPECT_FALSE(GateInconclusive(GatePolicy(), v));
  v.throughput_ratio = 0.95;  // within the tolerance: passes
  v.throughput_ratio_high = 1.0;
  EXPECT_FALSE(GateInconclusive(GatePolicy(), v));
  v.p95_ratio = 1.2;  // p95 past 1.10, its interval back over it
  v.p95_ratio_low = 1.05;
  EXPECT_TRUE(GateInconclusive(GatePolicy(), v));
}

TEST(RolloutGateForTest, TheCanaryPhaseIsOffUnlessAShareIsSet) {
  auto gate = RolloutGateFor(WithParameters({{kRolloutGate, "true"}}));
  ASSERT_TRUE(gate.ok());
  EXPECT_EQ((*gate)->canary_percent, 0u);
  gate = RolloutGateFor(WithParameters({{kRolloutGate, "true"}, {kRolloutCanaryPercent, "10"}}));
  ASSERT_TRUE(gate.ok()) << gate.status().message();
  EXPECT_EQ((*gate)->canary_percent, 10u);
  EXPECT_EQ((*gate)->canary_duration_s, 300u);
  EXPECT_DOUBLE_EQ((*gate)->canary_max_p95_ratio, 1.5);
  gate = RolloutGateFor(WithParameters(
      {{kRolloutGate, "true"}, {kRolloutCanaryPercent, "5"}, {kRolloutCanaryDuration, "900"}}));
  ASSERT_TRUE(gate.ok()) << gate.status().message();
  EXPECT_EQ((*gate)->canary_duration_s, 900u);

  const std::vector<std::pair<std::map<std::string, std::string>, const char*>> bad = {
      {{{kRolloutCanaryPercent, "0"}}, kRolloutCanaryPercent},
      {{{kRolloutCanaryPercent, "60"}}, kRolloutCanaryPercent},
      {{{kRolloutCanaryPercent, "12.5"}}, kRolloutCanaryPercent},
      {{{kRolloutCanaryPercent, "10"}, {kRolloutCanaryDuration, "5"}}, kRolloutCanaryDuration},
      // A duration without a share is a phase that never happens.
      {{{kRolloutCanaryDuration, "60"}}, kRolloutCanaryDuration},
      {{{kRolloutCanaryMaxP95Ratio, "2"}}, kRolloutCanaryMaxP95Ratio},
      {{{kRolloutCanaryPercent, "10"}, {kRolloutCanaryMaxP95Ratio, "0.5"}},
       kRolloutCanaryMaxP95Ratio},
  };
  for (auto [parameters, key] : bad) {
    parameters[kRolloutGate] = "true";
    gate = RolloutGateFor(WithParameters(parameters));
    ASSERT_FALSE(gate.ok()) << key;
    EXPECT_NE(gate.status().message().find(key), std::string::npos) << gate.status().message();
  }
}

CanaryCounts Counts(uint64_t requests, uint64_t errors, std::vector<double> latency_ms = {}) {
  return {requests, errors, std::move(latency_ms)};
}

// `n` latencies around `ms`, spread by up to 20% (a deterministic pattern).
std::vector<double> Around(double ms, size_t n) {
  std::vector<double> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back(ms * (1.0 + 0.2 * static_cast<double>((i * 7) % 11) / 10));
  return out;
}

TEST(JudgeCanaryTest, ErrorsLikeTheServingLoadsGoOn) {
  const CanaryVerdict v = JudgeCanary(GatePolicy(), Counts(900, 9), Counts(100, 1), false);
  EXPECT_EQ(v.call, CanaryVerdict::Call::kContinue) << v.summary;
  EXPECT_DOUBLE_EQ(v.candidate_error_rate, 0.01);
}

TEST(JudgeCanaryTest, ACandidateFailingItsShareIsRolledBackAtOnce) {
  const CanaryVerdict v = JudgeCanary(GatePolicy(), Counts(800, 0), Counts(200, 20), false);
  EXPECT_EQ(v.call, CanaryVerdict::Call::kRollBack) << v.summary;
  EXPECT_NE(v.summary.find("candidate 20 errors in 200 requests (10.0%), serving 0 in 800 (0%)"),
            std::string::npos)
      << v.summary;
}

TEST(JudgeCanaryTest, AFewErrorsAreNotARegression) {
  // One request to the candidate, failed (a client's malformed request, say): no rate known.
  EXPECT_EQ(JudgeCanary(GatePolicy(), Counts(4, 0), Counts(1, 1), false).call,
            CanaryVerdict::Call::kContinue);
  EXPECT_EQ(JudgeCanary(GatePolicy(), Counts(16, 0), Counts(4, 4), false).call,
            CanaryVerdict::Call::kContinue);
  // 2 of 20 is 10%, but so few requests cannot tell it from the serving load's 1%.
  EXPECT_EQ(JudgeCanary(GatePolicy(), Counts(1000, 10), Counts(20, 2), false).call,
            CanaryVerdict::Call::kContinue);
  // An excess within the one-point margin never rolls back, however many requests.
  EXPECT_EQ(JudgeCanary(GatePolicy(), Counts(1000000, 10000), Counts(1000000, 15000), false).call,
            CanaryVerdict::Call::kContinue);
}

TEST(JudgeCanaryTest, LatencyIsJudgedAtTheEndOnly) {
  const CanaryCounts stable = Counts(400, 0, Around(1.0, 400));
  const CanaryCounts slow = Counts(100, 0, Around(2.0, 100));
  // Within the canary's own tolerance (1.5), not the gate's (1.1): passes.
  EXPECT_EQ(JudgeCanary(GatePolicy(), stable, Counts(100, 0, Around(1.3, 100)), true).call,
            CanaryVerdict::Call::kPromote);
  EXPECT_EQ(JudgeCanary(GatePolicy(), stable, slow, false).call, CanaryVerdict::Call::kContinue);
  const CanaryVerdict v = JudgeCanary(GatePolicy(), stable, slow, true);
  EXPECT_EQ(v.call, CanaryVerdict::Call::kRollBack) << v.summary;
  EXPECT_NEAR(v.p95_ratio, 2.0, 0.01);
  EXPECT_GT(v.p95_ratio_low, 1.1);

  const CanaryVerdict same =
      JudgeCanary(GatePolicy(), stable, Counts(100, 0, Around(1.0, 100)), true);
  EXPECT_EQ(same.call, CanaryVerdict::Call::kPromote) << same.summary;
  EXPECT_NEAR(same.p95_ratio, 1.0, 0.05);
}

TEST(JudgeCanaryTest, TooFewRequestsPromoteWithTheLatencyNotJudged) {
  const CanaryVerdict v = JudgeCanary(GatePolicy(), Counts(400, 0, Around(1.0, 400)),
                                      Counts(10, 0, Around(5.0, 10)), true);
  EXPECT_EQ(v.call, CanaryVerdict::Call::kPromote);
  EXPECT_EQ(v.p95_ratio, 0);
  EXPECT_NE(v.summary.find("p95 not judged, too few requests (10 candidate, 400 serving"),
            std::string::npos)
      << v.summary;
}

TEST(PercentileTest, NearestRank) {
  EXPECT_EQ(Percentile({}, 95), 0);
  EXPECT_EQ(Percentile({3, 1, 2}, 50), 2);
  std::vector<double> twenty;
  for (int i = 1; i <= 20; ++i) twenty.push_back(i);
  EXPECT_EQ(Percentile(twenty, 95), 19);
  EXPECT_EQ(Percentile(twenty, 100), 20);
}

}  // namespace
}  // namespace fastpath::admission
