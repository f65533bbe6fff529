// The fragmentation detector on synthetic arena statistics at injected times: an arena
// that grows while it holds free more than the largest run needs is suspected; one that
// grows for need, one that does not grow, and growth older than the window are not.
#include "fastpath/admission/fragmentation_detector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fastpath::admission {
namespace {

using std::chrono::minutes;
using ::testing::HasSubstr;

constexpr uint64_t kMiB = uint64_t{1} << 20;
const Clock::time_point kStart = Clock::time_point(std::chrono::hours(24));

backend::MemoryStats Stats(uint64_t in_use_mib, uint64_t reserved_mib, uint64_t peak_mib,
                           uint64_t extensions) {
  backend::MemoryStats s;
  s.in_use_bytes = in_use_mib * kMiB;
  s.reserved_bytes = reserved_mib * kMiB;
  s.peak_bytes = peak_mib * kMiB;
  s.arena_extensions = extensions;
  return s;
}

TEST(FragmentationDetectorTest, GrowthWithEnoughFreeForTheLargestRunIsFragmentation) {
  FragmentationDetector detector(minutes(30));
  // 100 MiB at rest; the largest run takes 40 MiB more (peak 140). The arena holds 200 MiB,
  // so 100 MiB free at rest, and still grows twice.
  detector.Observe(kStart, Stats(100, 200, 140, 3));
  detector.Observe(kStart + minutes(5), Stats(100, 200, 140, 3));
  detector.Observe(kStart + minutes(10), Stats(100, 264, 140, 4));
  detector.Observe(kStart + minutes(15), Stats(100, 328, 140, 5));
  const FragmentationVerdict v = detector.Judge();
  EXPECT_TRUE(v.suspected) << v.reason;
  EXPECT_EQ(v.extensions_in_window, 2u);
  EXPECT_EQ(v.largest_run_bytes, 40 * kMiB);
  EXPECT_EQ(v.free_bytes, 100 * kMiB);  // just before it grew
  EXPECT_THAT(v.reason, HasSubstr("grew 2 times"));
  EXPECT_THAT(v.reason, HasSubstr("100.0 MiB free"));
}

TEST(FragmentationDetectorTest, GrowthForALargerRunThanFreeIsNeedNotFragmentation) {
  FragmentationDetector detector(minutes(30));
  detector.Observe(kStart, Stats(100, 120, 110, 1));  // 20 MiB free
  // A run of 80 MiB beyond the rest: the arena must grow.
  detector.Observe(kStart + minutes(1), Stats(100, 200, 180, 2));
  const FragmentationVerdict v = detector.Judge();
  EXPECT_FALSE(v.suspected);
  EXPECT_THAT(v.reason, HasSubstr("growth for need"));
}

TEST(FragmentationDetectorTest, AnArenaThatDoesNotGrowIsNotSuspected) {
  FragmentationDetector detector(minutes(30));
  for (int i = 0; i < 10; ++i) detector.Observe(kStart + minutes(i), Stats(100, 400, 140, 7));
  const FragmentationVerdict v = detector.Judge();
  EXPECT_FALSE(v.suspected);
  EXPECT_EQ(v.free_bytes, 300 * kMiB);  // a large free share alone is caching, not a verdict
  EXPECT_EQ(v.reason, "the arena did not grow in the window");
}

TEST(FragmentationDetectorTest, GrowthOlderThanTheWindowIsForgotten) {
  FragmentationDetector detector(minutes(30));
  detector.Observe(kStart, Stats(100, 200, 140, 3));
  detector.Observe(kStart + minutes(1), Stats(100, 264, 140, 4));
  for (int m = 2; m <= 40; ++m) detector.Observe(kStart + minutes(m), Stats(100, 264, 140, 4));
  EXPECT_EQ(detector.Judge().extensions_in_window, 0u);
  EXPECT_FALSE(detector.Judge().suspected);
}

TEST(FragmentationDetectorTest, GrowingBackAfterAShrinkIsNotFragmentation) {
  FragmentationDetector detector(minutes(30));
  backend::MemoryStats before = Stats(100, 300, 140, 3);  // 200 MiB free, cached
  detector.Observe(kStart, before);
  // An out-of-memory run shrank the arena to what is in use; runs then grow it back.
  backend::MemoryStats shrunk = Stats(100, 100, 140, 3);
  shrunk.arena_shrinkages = 1;
  detector.Observe(kStart + minutes(1), shrunk);
  backend::MemoryStats regrown = Stats(100, 164, 140, 4);
  regrown.arena_shrinkages = 1;
  detector.Observe(kStart + minutes(2), regrown);
  const FragmentationVerdict v = detector.Judge();
  EXPECT_FALSE(v.suspected) << v.reason;
  EXPECT_EQ(v.extensions_in_window, 1u);
  EXPECT_THAT(v.reason, HasSubstr("growth for need"));
}

TEST(FragmentationDetectorTest, NothingSampledSaysSo) {
  EXPECT_EQ(FragmentationDetector().Judge().reason, "not sampled yet");
}

}  // namespace
}  // namespace fastpath::admission
