#include "fastpath/bench/gpu_sampler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace fastpath::bench {
namespace {

using Clock = GpuSampler::Clock;
using std::chrono::milliseconds;

// One GPU's gauges as `fastpath serve` exports them.
std::string GpuText(const std::string& gpu, double utilization, double power_w, double used) {
  const std::string labels = "{gpu=\"" + gpu + "\",uuid=\"GPU-" + gpu + "\"}";
  return "fastpath_gpu_utilization_ratio" + labels + " " + std::to_string(utilization) + "\n" +
         "fastpath_gpu_power_watts" + labels + " " + std::to_string(power_w) + "\n" +
         "fastpath_gpu_memory_used_bytes" + labels + " " + std::to_string(used) + "\n" +
         "fastpath_gpu_memory_total_bytes" + labels + " 1000\n";
}

TEST(GpuSamplerTest, APointAveragesTheScrapesWithinItsWindowsOnly) {
  GpuSampler sampler(nullptr, milliseconds(1000));  // never started: fed by hand
  const Clock::time_point t0 = Clock::now();
  auto at = [&](int ms) { return t0 + milliseconds(ms); };
  sampler.Record(at(0), GpuText("0", 0.10, 100, 900));  // before the point: left out
  sampler.Record(at(1000), GpuText("0", 0.80, 300, 500) + GpuText("1", 0.40, 50, 10));
  sampler.Record(at(3000), GpuText("0", 0.60, 200, 700));  // recorded out of order
  sampler.Record(at(2000), StatusOr<std::string>(Unavailable("connection refused")));
  sampler.Record(at(4000), GpuText("0", 1.00, 400, 600));  // after the point: left out

  const PointGpuMetrics m = sampler.Between(at(1000), at(3000));
  EXPECT_EQ(m.scrapes, 3);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.error, "connection refused");
  ASSERT_EQ(m.gpus.size(), 2u);
  const PointGpu& a = m.gpus[0];
  EXPECT_EQ(a.gpu, "0");
  EXPECT_EQ(a.uuid, "GPU-0");
  EXPECT_EQ(a.scrapes, 2);
  ASSERT_TRUE(a.utilization_avg);
  EXPECT_DOUBLE_EQ(*a.utilization_avg, 0.70);
  ASSERT_TRUE(a.power_avg_w);
  EXPECT_DOUBLE_EQ(*a.power_avg_w, 250);
  EXPECT_EQ(a.memory_used_max_bytes, 700.0) << "the largest, not the last";
  EXPECT_EQ(a.memory_total_bytes, 1000.0);
  // A GPU seen in one scrape only averages that one.
  EXPECT_EQ(m.gpus[1].gpu, "1");
  EXPECT_EQ(m.gpus[1].scrapes, 1);
  EXPECT_DOUBLE_EQ(m.gpus[1].utilization_avg.value_or(-1), 0.40);

  // What came before a point that has been measured is let go; the rest stays.
  sampler.Forget(at(2000));
  EXPECT_EQ(sampler.Between(at(0), at(4000)).scrapes, 3);  // 2000 (failed), 3000, 4000
  EXPECT_EQ(sampler.Between(at(0), at(1999)).scrapes, 0);
}

TEST(GpuSamplerTest, AbsentReadingsStayAbsentAndACpuServerHasNoGpus) {
  GpuSampler sampler(nullptr, milliseconds(1000));
  const Clock::time_point t0 = Clock::now();
  // Only a temperature: no utilization, power or memory exported for this GPU.
  sampler.Record(t0, std::string("fastpath_gpu_temperature_celsius{gpu=\"0\",uuid=\"u\"} 60\n"));
  PointGpuMetrics m = sampler.Between(t0, t0);
  ASSERT_EQ(m.gpus.size(), 1u);
  EXPECT_FALSE(m.gpus[0].utilization_avg);
  EXPECT_FALSE(m.gpus[0].power_avg_w);
  EXPECT_FALSE(m.gpus[0].memory_used_max_bytes);

  GpuSampler cpu(nullptr, milliseconds(1000));
  cpu.Record(t0, std::string("fastpath_inference_count_total{model=\"m\",version=\"1\"} 3\n"));
  m = cpu.Between(t0, t0 + milliseconds(1));
  EXPECT_EQ(m.scrapes, 1);
  EXPECT_EQ(m.failed, 0);
  EXPECT_TRUE(m.gpus.empty());
  // Text that does not parse counts as a failed scrape, with the parser's words.
  cpu.Record(t0, std::string("fastpath_gpu_power_watts{uuid=\"u\"} 5\n"));
  m = cpu.Between(t0, t0);
  EXPECT_EQ(m.failed, 1);
  EXPECT_NE(m.error.find("no gpu label"), std::string::npos) << m.error;
  // Nothing in the window: no scrapes at all.
  EXPECT_EQ(cpu.Between(t0 + milliseconds(5), t0 + milliseconds(9)).scrapes, 0);
}

class CountingSource final : public MetricsSource {
 public:
  StatusOr<std::string> Scrape() override {
    ++count;
    return GpuText("0", 0.5, 100, 1);
  }
  std::string Describe() const override { return "counting"; }
  std::atomic<int> count{0};
};

TEST(GpuSamplerTest, StartedItScrapesUntilDestroyed) {
  CountingSource source;
  const Clock::time_point start = Clock::now();
  int seen = 0;
  {
    GpuSampler sampler(&source, milliseconds(5));
    EXPECT_EQ(source.count.load(), 0) << "nothing before Start";
    sampler.Start();
    for (int i = 0; i < 2000 && source.count.load() < 3; ++i)
      std::this_thread::sleep_for(milliseconds(5));
    ASSERT_GE(source.count.load(), 3);
    const PointGpuMetrics m = sampler.Between(start, Clock::now());
    EXPECT_GE(m.scrapes, 2);
    ASSERT_EQ(m.gpus.size(), 1u);
    EXPECT_DOUBLE_EQ(m.gpus[0].utilization_avg.value_or(-1), 0.5);
  }
  seen = source.count.load();
  std::this_thread::sleep_for(milliseconds(30));
  EXPECT_EQ(source.count.load(), seen) << "no scrape after the sampler is gone";
}

}  // namespace
}  // namespace fastpath::bench
