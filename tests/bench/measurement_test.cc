#include "fastpath/bench/measurement.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

namespace fastpath::bench {
namespace {

TEST(PercentileTest, NearestRankOnOneToHundred) {
  std::vector<int64_t> v(100);
  std::iota(v.begin(), v.end(), 1);
  EXPECT_EQ(PercentileNs(v, 50), 50);
  EXPECT_EQ(PercentileNs(v, 90), 90);
  EXPECT_EQ(PercentileNs(v, 95), 95);
  EXPECT_EQ(PercentileNs(v, 99), 99);
  EXPECT_EQ(PercentileNs(v, 100), 100);
  EXPECT_EQ(PercentileNs(v, 0.1), 1);
}

TEST(PercentileTest, SmallAndEmptySets) {
  EXPECT_EQ(PercentileNs({}, 50), 0);
  EXPECT_EQ(PercentileNs({7}, 50), 7);
  EXPECT_EQ(PercentileNs({7}, 99), 7);
  // Four values: p50 is the 2nd, p99 the 4th.
  EXPECT_EQ(PercentileNs({10, 20, 30, 40}, 50), 20);
  EXPECT_EQ(PercentileNs({10, 20, 30, 40}, 75), 30);
  EXPECT_EQ(PercentileNs({10, 20, 30, 40}, 99), 40);
}

TEST(SummarizeTest, SortsAndConvertsToMicroseconds) {
  // 1..1000 microseconds, shuffled.
  std::vector<int64_t> v;
  for (int i = 1000; i >= 1; --i) v.push_back(static_cast<int64_t>(i) * 1000);
  LatencySummary s = Summarize(v);
  EXPECT_EQ(s.count, 1000u);
  EXPECT_DOUBLE_EQ(s.min_us, 1);
  EXPECT_DOUBLE_EQ(s.p50_us, 500);
  EXPECT_DOUBLE_EQ(s.p90_us, 900);
  EXPECT_DOUBLE_EQ(s.p95_us, 950);
  EXPECT_DOUBLE_EQ(s.p99_us, 990);
  EXPECT_DOUBLE_EQ(s.max_us, 1000);
  EXPECT_DOUBLE_EQ(s.mean_us, 500.5);
  EXPECT_EQ(Summarize({}).count, 0u);
}

TEST(StabilityTest, NeedsThreeWindowsWithinTheSpread) {
  EXPECT_FALSE(IsStable({{100, 10}, {100, 10}}, 10));
  EXPECT_TRUE(IsStable({{100, 10}, {104, 10.4}, {96, 9.6}}, 10));
  // Throughput spread (110-90)/100 = 20% > 10%.
  EXPECT_FALSE(IsStable({{90, 10}, {100, 10}, {110, 10}}, 10));
  EXPECT_TRUE(IsStable({{90, 10}, {100, 10}, {110, 10}}, 25));
  // p95 spread too large.
  EXPECT_FALSE(IsStable({{100, 10}, {100, 20}, {100, 10}}, 10));
}

TEST(StabilityTest, OnlyTheLastWindowsCount) {
  // An unstable start followed by three steady windows is stable.
  EXPECT_TRUE(IsStable({{10, 1}, {500, 90}, {100, 10}, {101, 10}, {99, 10}}, 5));
  // A steady start followed by a jump is not.
  EXPECT_FALSE(IsStable({{100, 10}, {100, 10}, {100, 10}, {200, 10}}, 5));
}

TEST(StabilityTest, AWindowWithoutRequestsIsNeverStable) {
  EXPECT_FALSE(IsStable({{0, 0}, {0, 0}, {0, 0}}, 10));
  EXPECT_FALSE(IsStable({{100, 10}, {0, 0}, {100, 10}}, 100));
}

TEST(RangeSpecTest, GeometricLinearListAndSingle) {
  EXPECT_EQ(*ParseRangeSpec("1:32:2x", "--concurrency"), (std::vector<int64_t>{1, 2, 4, 8, 16, 32}));
  EXPECT_EQ(*ParseRangeSpec("1:32:4", "--concurrency"), (std::vector<int64_t>{1, 5, 9, 13, 17, 21, 25, 29}));
  EXPECT_EQ(*ParseRangeSpec("4:16", "--concurrency"), (std::vector<int64_t>{4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}));
  // Near INT64_MAX the next step would wrap: it is never taken.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const auto geometric = ParseRangeSpec("1:9223372036854775807:2x", "--concurrency");
  ASSERT_TRUE(geometric.ok()) << geometric.status().ToString();
  EXPECT_EQ(geometric->back(), kMax);
  EXPECT_EQ((*geometric)[geometric->size() - 2], int64_t{1} << 62);
  const auto stepped = ParseRangeSpec("9223372036854775800:9223372036854775807:5", "--concurrency");
  ASSERT_TRUE(stepped.ok()) << stepped.status().ToString();
  EXPECT_EQ(*stepped, (std::vector<int64_t>{kMax - 7, kMax - 2}));
  EXPECT_EQ(*ParseRangeSpec("1,8,16,32", "--concurrency"), (std::vector<int64_t>{1, 8, 16, 32}));
  EXPECT_EQ(*ParseRangeSpec("16", "--concurrency"), (std::vector<int64_t>{16}));
  // The end of a geometric range is always measured, even off the progression.
  EXPECT_EQ(*ParseRangeSpec("1:24:2x", "--concurrency"), (std::vector<int64_t>{1, 2, 4, 8, 16, 24}));
  EXPECT_EQ(*ParseRangeSpec("3:3:2x", "--concurrency"), (std::vector<int64_t>{3}));
}

TEST(RangeSpecTest, ErrorsNameTheFlagAndTheProblem) {
  for (const char* bad : {"", "0", "-1", "a", "1,,2", "1:", ":4", "8:4", "1:32:1x", "1:32:0", "1:2:3:4", "1,1",
                          "1:32:x", "2.5"}) {
    auto r = ParseRangeSpec(bad, "--concurrency");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("--concurrency"), std::string::npos) << r.status().message();
  }
  EXPECT_NE(ParseRangeSpec("8:4", "--concurrency").status().message().find("below the start"), std::string::npos);
  EXPECT_FALSE(ParseRangeSpec("1:100000000", "--concurrency").ok());
}

TEST(IntListTest, AcceptsZeroRefusesGarbage) {
  EXPECT_EQ(*ParseIntList("0,500,1000", "--queue-delays-us"), (std::vector<int64_t>{0, 500, 1000}));
  EXPECT_FALSE(ParseIntList("", "--queue-delays-us").ok());
  EXPECT_FALSE(ParseIntList("1,-2", "--queue-delays-us").ok());
  EXPECT_FALSE(ParseIntList("1;2", "--queue-delays-us").ok());
}

TEST(ScheduleTest, ConstantGapsAreOneOverTheRate) {
  RequestSchedule s(RequestDistribution::kConstant, 200, 1);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s.NextGap(), std::chrono::milliseconds(5));
}

TEST(ScheduleTest, PoissonIsDeterministicForASeed) {
  RequestSchedule a(RequestDistribution::kPoisson, 1000, 42);
  RequestSchedule b(RequestDistribution::kPoisson, 1000, 42);
  RequestSchedule c(RequestDistribution::kPoisson, 1000, 43);
  bool differs = false;
  for (int i = 0; i < 1000; ++i) {
    const auto ga = a.NextGap();
    EXPECT_EQ(ga, b.NextGap());
    differs = differs || ga != c.NextGap();
  }
  EXPECT_TRUE(differs);
}

TEST(ScheduleTest, PoissonGapsHaveTheRightMeanAndSpread) {
  RequestSchedule s(RequestDistribution::kPoisson, 1000, 7);  // mean gap 1 ms
  const int n = 20000;
  double sum = 0;
  double sum_sq = 0;
  int64_t min_ns = INT64_MAX;
  for (int i = 0; i < n; ++i) {
    const double g = static_cast<double>(s.NextGap().count());
    sum += g;
    sum_sq += g * g;
    min_ns = std::min<int64_t>(min_ns, static_cast<int64_t>(g));
  }
  const double mean = sum / n;
  const double stddev = std::sqrt(sum_sq / n - mean * mean);
  // Exponential: mean = stddev = 1/rate. 20000 samples put both within a few percent.
  EXPECT_NEAR(mean, 1e6, 0.05e6);
  EXPECT_NEAR(stddev, 1e6, 0.08e6);
  EXPECT_GE(min_ns, 0);
}

TEST(ScheduleTest, DistributionNames) {
  EXPECT_EQ(*ParseRequestDistribution("poisson"), RequestDistribution::kPoisson);
  EXPECT_EQ(*ParseRequestDistribution("constant"), RequestDistribution::kConstant);
  EXPECT_FALSE(ParseRequestDistribution("uniform").ok());
}

}  // namespace
}  // namespace fastpath::bench
