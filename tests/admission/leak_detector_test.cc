// The leak detector on synthetic samples at injected times: a steady leak is caught within
// one window; a steady instance, one whose busy peaks come and go, one whose floor falls
// back, and one whose request mix grew are not flagged.
#include "fastpath/admission/leak_detector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fastpath::admission {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr uint64_t kMiB = uint64_t{1} << 20;
const Clock::time_point kStart = Clock::time_point(std::chrono::hours(24));

// Samples every 10 s for `span`: in_use(t) for t in seconds since kStart, mix(t) rows.
LeakDetector Feed(minutes span, uint64_t (*in_use)(int64_t), double (*mix)(int64_t),
                  LeakDetectorOptions options = {}) {
  LeakDetector detector(options);
  for (int64_t t = 0; t <= std::chrono::duration_cast<seconds>(span).count(); t += 10) {
    detector.Observe(kStart + seconds(t), in_use(t), mix(t));
  }
  return detector;
}

double SteadyMix(int64_t) { return 8.0; }

TEST(LeakDetectorTest, ASteadyLeakIsCaughtWithinOneWindow) {
  // 100 MiB of weights, 10 KiB more held every 10 s (3.5 MiB an hour), with busy samples
  // (a batch's 50 MiB in flight) every third sample.
  const auto leaking = [](int64_t t) -> uint64_t {
    return 100 * kMiB + static_cast<uint64_t>(t / 10) * 10240 + (t % 30 == 0 ? 50 * kMiB : 0);
  };
  // Not before the window is covered...
  const LeakVerdict early = Feed(minutes(20), leaking, SteadyMix).Judge();
  EXPECT_FALSE(early.suspected);
  EXPECT_FALSE(early.judged);
  EXPECT_EQ(early.reason, "the window is not covered yet");
  // ...and at the first moment it is.
  const LeakVerdict verdict = Feed(minutes(30), leaking, SteadyMix).Judge();
  EXPECT_TRUE(verdict.suspected) << verdict.reason;
  EXPECT_TRUE(verdict.judged);
  EXPECT_NEAR(verdict.slope_bytes_per_second, 1024, 10);  // 10 KiB / 10 s
  EXPECT_GE(verdict.growth_bytes, kMiB);
  EXPECT_THAT(verdict.reason, HasSubstr("rose by"));
}

TEST(LeakDetectorTest, ASteadyInstanceWithBusyPeaksIsNotFlagged) {
  const auto steady = [](int64_t t) -> uint64_t {
    return 100 * kMiB + (t % 20 == 0 ? static_cast<uint64_t>(t) * 1024 : 0);  // peaks grow
  };
  const LeakVerdict verdict = Feed(minutes(60), steady, SteadyMix).Judge();
  EXPECT_FALSE(verdict.suspected) << verdict.reason;
  EXPECT_EQ(verdict.growth_bytes, 0u);
}

TEST(LeakDetectorTest, AFloorThatFallsBackIsNotALeak) {
  // A cache that fills for 20 minutes, then is dropped.
  const auto cache = [](int64_t t) -> uint64_t {
    return 100 * kMiB + static_cast<uint64_t>(t % 1200) * 4096;
  };
  const LeakVerdict verdict = Feed(minutes(45), cache, SteadyMix).Judge();
  EXPECT_FALSE(verdict.suspected);
  EXPECT_EQ(verdict.reason, "the memory held at rest fell back within the window");
}

TEST(LeakDetectorTest, GrowthWhileTheRequestMixGrewIsNotFlagged) {
  const auto growing = [](int64_t t) -> uint64_t {
    return 100 * kMiB + static_cast<uint64_t>(t) * 1024;
  };
  const auto bigger_batches = [](int64_t t) { return 4.0 + static_cast<double>(t) / 300.0; };
  const LeakVerdict verdict = Feed(minutes(30), growing, bigger_batches).Judge();
  EXPECT_FALSE(verdict.suspected);
  EXPECT_EQ(verdict.reason, "the request mix changed within the window");
  // The same growth with the mix steady is a leak.
  EXPECT_TRUE(Feed(minutes(30), growing, SteadyMix).Judge().suspected);
}

TEST(LeakDetectorTest, GrowthBelowTheThresholdAndGapsAreNotFlagged) {
  const auto slow = [](int64_t t) -> uint64_t { return 100 * kMiB + static_cast<uint64_t>(t); };
  EXPECT_EQ(Feed(minutes(30), slow, SteadyMix).Judge().reason,
            "the memory held at rest grew by less than the threshold");
  // Two samples half an hour apart leave the buckets between them empty.
  LeakDetector sparse;
  sparse.Observe(kStart, 100 * kMiB, 8.0);
  sparse.Observe(kStart + minutes(30), 200 * kMiB, 8.0);
  EXPECT_EQ(sparse.Judge().reason, "a part of the window has no sample");
  EXPECT_EQ(LeakDetector().Judge().reason, "no samples yet");
}

TEST(LeakDetectorTest, OldSamplesLeaveTheWindow) {
  // A leak that stopped an hour ago: the last window is flat.
  const auto stopped = [](int64_t t) -> uint64_t {
    return 100 * kMiB + static_cast<uint64_t>(std::min<int64_t>(t, 1800)) * 4096;
  };
  EXPECT_FALSE(Feed(minutes(90), stopped, SteadyMix).Judge().suspected);
}

}  // namespace
}  // namespace fastpath::admission
