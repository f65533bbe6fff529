// Throughput drift with its cause (admission/drift_detector.h), on a manual timeline: the
// tests play executions and GPU readings the way the drift watch would observe them.
#include "fastpath/admission/drift_detector.h"

#include "fastpath/gpu/telemetry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fastpath::admission {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr uint64_t kMs = 1000 * 1000;  // ns

// A version's cumulative statistics and one GPU's cumulative throttle time, advanced by
// hand, observed every 10 s.
class Timeline {
 public:
  explicit Timeline(DriftOptions options = Options()) : detector_(options) {}
  static DriftOptions Options() {
    DriftOptions o;
    o.window = seconds(60);
    return o;
  }
  // `n` executions of batch `size`, each taking `ns`.
  void Run(uint64_t size, uint64_t ns, uint64_t n) {
    totals_[size].count += n;
    totals_[size].ns += ns * n;
  }
  // Advances 10 s during which reason `bit` (or none, -1) held the GPU's clocks at `mhz`,
  // then observes.
  void Tick(int bit = -1, double mhz = 1980) { TickMask(bit >= 0 ? uint64_t{1} << bit : 0, mhz); }
  void TickMask(uint64_t reasons, double mhz = 1980) {
    now_ += seconds(10);
    for (const std::string& cause : gpu::ThrottleCauses(reasons)) gpu_.cause_seconds[cause] += 10;
    gpu_.sm_clock_mhz = mhz;
    gpu_.idle = (reasons & 0x1) != 0;
    Observe();
  }
  void Observe() {
    std::vector<BatchStatistics> stats;
    for (const auto& [size, total] : totals_) {
      BatchStatistics b;
      b.batch_size = size;
      b.compute_infer = total;
      stats.push_back(b);
    }
    detector_.Observe(now_, stats, on_gpu_,
                      on_gpu_ && telemetry_ ? std::vector<GpuReading>{gpu_} : std::vector<GpuReading>{});
  }
  DriftVerdict Judge() const { return detector_.Judge(); }
  void OnCpu() { on_gpu_ = false; }
  void WithoutTelemetry() { telemetry_ = false; }

 private:
  DriftDetector detector_;
  Clock::time_point now_{};
  std::map<uint64_t, StatDuration> totals_;
  GpuReading gpu_;
  bool on_gpu_ = true;
  bool telemetry_ = true;
};

// The start: self-test runs (slow, cold) before the first observation, then a minute at
// 1 ms per execution of batch 1, which sets the baseline.
void Start(Timeline& t) {
  t.Run(1, 50 * kMs, 30);  // the self-test and warm-up: excluded
  t.Observe();
  for (int i = 0; i < 6; ++i) {
    t.Run(1, kMs, 100);
    t.Tick();
  }
}

TEST(DriftDetectorTest, ASteadyVersionDoesNotDrift) {
  Timeline t;
  Start(t);
  for (int i = 0; i < 12; ++i) {
    t.Run(1, kMs, 100);
    t.Tick();
  }
  const DriftVerdict v = t.Judge();
  ASSERT_TRUE(v.ratio.has_value());
  EXPECT_DOUBLE_EQ(*v.ratio, 1.0) << "the self-test's cold runs are not the baseline";
  EXPECT_FALSE(v.alert);
  EXPECT_EQ(v.cause, "");
  EXPECT_THAT(v.detail, HasSubstr("compute per execution 1.00x its start-up baseline over the "
                                   "last 60 s ("));
}

TEST(DriftDetectorTest, ASlowdownUnderThermalThrottlingIsThermal) {
  Timeline t;
  Start(t);
  for (int i = 0; i < 6; ++i) {
    t.Run(1, 1300 * 1000, 100);  // 1.3 ms: 30% slower
    t.Tick(/*hw_thermal*/ 6, 1410);
  }
  const DriftVerdict v = t.Judge();
  ASSERT_TRUE(v.ratio.has_value());
  EXPECT_NEAR(*v.ratio, 1.3, 1e-9);
  EXPECT_TRUE(v.alert);
  EXPECT_EQ(v.cause, "thermal");
  EXPECT_THAT(v.detail, HasSubstr("GPU 0 held down by thermal slowdown 100% of the window"));
  EXPECT_THAT(v.detail, HasSubstr("GPU 0 SM clock 1410 MHz (1980 MHz at start)"));
  EXPECT_THAT(v.detail, HasSubstr("cause thermal: check the GPU's cooling"));
}

TEST(DriftDetectorTest, EachReasonNamesItsCause) {
  for (const auto& [bit, cause] : std::vector<std::pair<int, std::string>>{
           {2, "power"}, {7, "power"}, {3, "reliability"}, {5, "thermal"}}) {
    Timeline t;
    Start(t);
    for (int i = 0; i < 6; ++i) {
      t.Run(1, 2 * kMs, 100);
      t.Tick(bit);
    }
    EXPECT_EQ(t.Judge().cause, cause) << "bit " << bit;
  }
}

TEST(DriftDetectorTest, ASlowdownWithTheClocksHeldIsNotTheGpu) {
  Timeline t;
  Start(t);
  for (int i = 0; i < 6; ++i) {
    t.Run(1, 2 * kMs, 100);
    t.Tick(i == 0 ? 6 : -1);  // 10 s of thermal in 60: below the cause fraction
  }
  DriftVerdict v = t.Judge();
  EXPECT_TRUE(v.alert);
  EXPECT_EQ(v.cause, "not_gpu");
  EXPECT_THAT(v.detail, HasSubstr("the GPU clocks held"));
  EXPECT_THAT(v.detail, HasSubstr("the GPU is not the cause"));

  Timeline cpu;
  cpu.OnCpu();
  Start(cpu);
  for (int i = 0; i < 6; ++i) {
    cpu.Run(1, 2 * kMs, 100);
    cpu.Tick();
  }
  v = cpu.Judge();
  EXPECT_EQ(v.cause, "not_gpu");
  EXPECT_THAT(v.detail, HasSubstr("the model runs on no GPU"));
}

TEST(DriftDetectorTest, HwSlowdownRaisedWithAThermalReasonIsThermal) {
  // NVML raises HW slowdown beside HW thermal slowdown and HW power brake: that is not a
  // board fault.
  Timeline t;
  Start(t);
  for (int i = 0; i < 6; ++i) {
    t.Run(1, 2 * kMs, 100);
    t.TickMask(i == 0 ? 0x8 : 0x48);  // one sample of HW slowdown alone, then with thermal
  }
  EXPECT_EQ(t.Judge().cause, "thermal");
  Timeline brake;
  Start(brake);
  for (int i = 0; i < 6; ++i) {
    brake.Run(1, 2 * kMs, 100);
    brake.TickMask(0x88);
  }
  EXPECT_EQ(brake.Judge().cause, "power");
}

TEST(DriftDetectorTest, LowerClocksWithoutAReasonOrWithoutTelemetryAreNotBlamedOnTheHost) {
  Timeline t;
  Start(t);
  for (int i = 0; i < 6; ++i) {
    t.Run(1, 2 * kMs, 100);
    t.Tick(-1, 1410);
  }
  DriftVerdict v = t.Judge();
  EXPECT_EQ(v.cause, "gpu_clocks");
  EXPECT_THAT(v.detail, HasSubstr("GPU 0's SM clock fell with no clock-event reason"));

  // A GPU that says it idles lowers its clocks waiting for work: a slow host starves it, and
  // it is not the cause.
  Timeline idle;
  Start(idle);
  for (int i = 0; i < 6; ++i) {
    idle.Run(1, 2 * kMs, 100);
    idle.TickMask(0x1, 210);
  }
  v = idle.Judge();
  EXPECT_EQ(v.cause, "not_gpu");
  EXPECT_THAT(v.detail, HasSubstr("GPU 0 idles"));

  Timeline blind;
  blind.WithoutTelemetry();
  Start(blind);
  for (int i = 0; i < 6; ++i) {
    blind.Run(1, 2 * kMs, 100);
    blind.Tick();
  }
  v = blind.Judge();
  EXPECT_EQ(v.cause, "unknown");
  EXPECT_THAT(v.detail, HasSubstr("its GPUs have no telemetry"));
}

TEST(DriftDetectorTest, LargerBatchesAreComparedWithTheirOwnBaseline) {
  Timeline t;
  Start(t);
  // Batches of 8 appear: 5 ms each, more than batch 1's 1 ms, but that is their own cost.
  for (int i = 0; i < 3; ++i) {
    t.Run(8, 5 * kMs, 20);
    t.Run(1, kMs, 50);
    t.Tick();
  }
  for (int i = 0; i < 6; ++i) {
    t.Run(8, 5 * kMs, 40);
    t.Tick();
  }
  DriftVerdict v = t.Judge();
  ASSERT_TRUE(v.ratio.has_value());
  EXPECT_NEAR(*v.ratio, 1.0, 1e-9);
  EXPECT_FALSE(v.alert);
  // And then batch 8 slows down.
  for (int i = 0; i < 6; ++i) {
    t.Run(8, 6 * kMs, 40);
    t.Tick();
  }
  v = t.Judge();
  EXPECT_NEAR(*v.ratio, 1.2, 1e-9);
  EXPECT_TRUE(v.alert);
}

TEST(DriftDetectorTest, TheAlertEndsWhenAWindowIsFastAgain) {
  Timeline t;
  Start(t);
  for (int i = 0; i < 6; ++i) {
    t.Run(1, 2 * kMs, 100);
    t.Tick(6);
  }
  EXPECT_TRUE(t.Judge().alert);
  for (int i = 0; i < 6; ++i) {
    t.Run(1, kMs, 100);
    t.Tick();
  }
  const DriftVerdict v = t.Judge();
  EXPECT_FALSE(v.alert);
  EXPECT_NEAR(*v.ratio, 1.0, 1e-9);
}

TEST(DriftDetectorTest, NoVerdictWithoutEnoughExecutions) {
  Timeline t;
  t.Observe();
  EXPECT_FALSE(t.Judge().ratio.has_value());
  t.Run(1, kMs, 19);  // one short of a baseline
  t.Tick();
  t.Run(1, kMs, 100);
  t.Tick();
  EXPECT_TRUE(t.Judge().ratio.has_value());
  t.Tick();
  t.Tick();
  t.Tick();
  t.Tick();
  t.Tick();
  t.Tick();
  t.Tick();  // a window with no executions
  EXPECT_FALSE(t.Judge().ratio.has_value());
  EXPECT_FALSE(t.Judge().alert);
}

}  // namespace
}  // namespace fastpath::admission
