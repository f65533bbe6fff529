// --soak without a server: the duration and URL flags, the GPU series of a metrics scrape
// (and their absence), the per-window GPU fields and throttle time, the drift, the windows of
// a continuous load on a fake target with a scripted metrics source, and the table, JSON
// and SVG. Asserts behaviour, never timings.
#include "fastpath/bench/soak.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <mutex>
#include <regex>
#include <thread>

#include "xml_check.h"

namespace fastpath::bench {
namespace {

using std::chrono::milliseconds;

// ---- Flags ----

TEST(SoakDurationTest, IntegerAndUnit) {
  EXPECT_EQ(ParseSoakDuration("90s", "--soak").value(), milliseconds(90000));
  EXPECT_EQ(ParseSoakDuration("30m", "--soak").value(), milliseconds(30 * 60000));
  EXPECT_EQ(ParseSoakDuration("2h", "--soak").value(), milliseconds(2 * 3600000));
  EXPECT_EQ(ParseSoakDuration("1500ms", "--soak").value(), milliseconds(1500));
  EXPECT_EQ(FormatDuration(milliseconds(30 * 60000)), "30m");
  EXPECT_EQ(FormatDuration(milliseconds(90000)), "90s");
  EXPECT_EQ(FormatDuration(milliseconds(7200000)), "2h");
  EXPECT_EQ(FormatDuration(milliseconds(1500)), "1500ms");
}

TEST(SoakDurationTest, ErrorsNameTheFlag) {
  for (const char* bad :
       {"", "abc", "10", "0s", "500ms", "-1m", "1.5m", "8d", "30 m", "m", "999999999999h"}) {
    auto d = ParseSoakDuration(bad, "--soak-window");
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(d.status().message().find("--soak-window"), std::string::npos)
        << d.status().message();
    EXPECT_NE(d.status().message().find("'" + std::string(bad) + "'"), std::string::npos);
  }
}

TEST(MetricsUrlTest, DefaultsToPort8002AndMetrics) {
  MetricsUrl u = ParseMetricsUrl("gpu-node").value();
  EXPECT_EQ(u.host, "gpu-node");
  EXPECT_EQ(u.port, 8002);
  EXPECT_EQ(u.path, "/metrics");
  u = ParseMetricsUrl("http://10.0.0.7:9102/prom/metrics").value();
  EXPECT_EQ(u.host, "10.0.0.7");
  EXPECT_EQ(u.port, 9102);
  EXPECT_EQ(u.path, "/prom/metrics");
  u = ParseMetricsUrl("[::1]:18002").value();
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(DescribeMetricsUrl(u), "http://[::1]:18002/metrics");

  ServerAddress server;
  server.host = "infer.example";
  server.port = 8000;
  EXPECT_EQ(DescribeMetricsUrl(DefaultMetricsUrl(server)), "http://infer.example:8002/metrics");

  for (const char* bad : {"", "https://h:8002", "h:0", "h:99999", ":8002", "h:x/metrics"}) {
    auto r = ParseMetricsUrl(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--metrics-url"), std::string::npos)
        << r.status().message();
  }
}

// ---- The GPU series of a scrape ----

// What `fastpath serve` exports for two GPUs (abridged), with families that must not be
// read: the power limit, Triton's names, a histogram.
constexpr const char* kTwoGpus = R"(# HELP fastpath_gpu_temperature_celsius GPU core temperature
# TYPE fastpath_gpu_temperature_celsius gauge
fastpath_gpu_temperature_celsius{gpu="10",uuid="GPU-b"} 48
fastpath_gpu_temperature_celsius{gpu="2",uuid="GPU-a"} 71
# TYPE fastpath_gpu_sm_clock_mhz gauge
fastpath_gpu_sm_clock_mhz{gpu="2",uuid="GPU-a"} 1410
fastpath_gpu_sm_clock_mhz{gpu="10",uuid="GPU-b"} 1980
# TYPE fastpath_gpu_power_watts gauge
fastpath_gpu_power_watts{gpu="2",uuid="GPU-a"} 305.25 1712345678000
# TYPE fastpath_gpu_utilization_ratio gauge
fastpath_gpu_utilization_ratio{gpu="2",uuid="GPU-a"} 0.87
nv_gpu_utilization{gpu_uuid="GPU-a"} 0.5
# TYPE fastpath_gpu_memory_used_bytes gauge
fastpath_gpu_memory_used_bytes{gpu="2",uuid="GPU-a"} 1073741824
# TYPE fastpath_gpu_memory_total_bytes gauge
fastpath_gpu_memory_total_bytes{gpu="2",uuid="GPU-a"} 85899345920
# TYPE fastpath_gpu_power_limit_watts gauge
fastpath_gpu_power_limit_watts{gpu="2",uuid="GPU-a"} 700
nv_gpu_power_usage{gpu_uuid="GPU-a"} 999
# TYPE fastpath_gpu_clocks_event_active gauge
fastpath_gpu_clocks_event_active{gpu="2",uuid="GPU-a",reason="sw_power_cap"} 0
fastpath_gpu_clocks_event_active{gpu="2",uuid="GPU-a",reason="hw_thermal"} 1
fastpath_gpu_clocks_event_active{gpu="2",uuid="GPU-a",reason="sw_thermal"} 1
# TYPE fastpath_gpu_throttle_seconds_total counter
fastpath_gpu_throttle_seconds_total{gpu="2",uuid="GPU-a",reason="hw_thermal"} 12.5
fastpath_inference_request_duration_seconds_bucket{model="m",le="+Inf"} 7
)";

TEST(GpuMetricsTest, ReadsTheEightFamiliesPerGpuInNumericOrder) {
  auto gpus = ParseGpuMetrics(kTwoGpus);
  ASSERT_TRUE(gpus.ok()) << gpus.status().message();
  ASSERT_EQ(gpus->size(), 2u);
  const GpuMetrics& a = (*gpus)[0];
  EXPECT_EQ(a.gpu, "2");
  EXPECT_EQ(a.uuid, "GPU-a");
  EXPECT_EQ(a.temperature_c, 71.0);
  EXPECT_EQ(a.sm_clock_mhz, 1410.0);
  EXPECT_EQ(a.power_w, 305.25)
      << "the timestamp is not the value; the power limit is not the power";
  EXPECT_EQ(a.utilization_ratio, 0.87) << "fastpath's series, not Triton's";
  EXPECT_EQ(a.memory_used_bytes, 1073741824.0);
  EXPECT_EQ(a.memory_total_bytes, 85899345920.0);
  EXPECT_EQ(a.clocks_event_active, (std::map<std::string, double>{
                                       {"hw_thermal", 1}, {"sw_power_cap", 0}, {"sw_thermal", 1}}));
  EXPECT_EQ(a.throttle_seconds_total, (std::map<std::string, double>{{"hw_thermal", 12.5}}));
  const GpuMetrics& b = (*gpus)[1];
  EXPECT_EQ(b.gpu, "10");
  EXPECT_EQ(b.temperature_c, 48.0);
  EXPECT_FALSE(b.power_w.has_value()) << "not exported: absent, not 0";
  EXPECT_FALSE(b.utilization_ratio.has_value());
  EXPECT_TRUE(b.clocks_event_active.empty());
}

TEST(GpuMetricsTest, AServerWithoutAGpuHasNone) {
  const char* cpu_only = R"(# HELP fastpath_inference_count_total Inferences
# TYPE fastpath_inference_count_total counter
fastpath_inference_count_total{model="cnn",version="1"} 120
nv_inference_count{model="cnn",version="1"} 120
)";
  auto gpus = ParseGpuMetrics(cpu_only);
  ASSERT_TRUE(gpus.ok());
  EXPECT_TRUE(gpus->empty());
  EXPECT_TRUE(ParseGpuMetrics("").value().empty());
}

TEST(GpuMetricsTest, EscapedLabelsCrLfAndSpecialValues) {
  auto gpus = ParseGpuMetrics(
      "fastpath_gpu_temperature_celsius{uuid=\"GPU-\\\"q\\\\\",gpu=\"0\"} +Inf\r\n"
      "fastpath_gpu_sm_clock_mhz{gpu=\"0\",uuid=\"GPU-\\\"q\\\\\",} 1.41e3\r\n");
  ASSERT_TRUE(gpus.ok()) << gpus.status().message();
  ASSERT_EQ(gpus->size(), 1u);
  EXPECT_EQ((*gpus)[0].uuid, "GPU-\"q\\");
  EXPECT_TRUE(std::isinf(*(*gpus)[0].temperature_c));
  EXPECT_EQ((*gpus)[0].sm_clock_mhz, 1410.0);
}

TEST(GpuMetricsTest, ABrokenGpuLineIsAnErrorNamingItsLine) {
  struct Case {
    std::string text;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {"# ok\nfastpath_gpu_temperature_celsius{gpu=\"0\"} hot\n", "metrics line 2"},
           {"fastpath_gpu_power_watts{gpu=\"0\" 300\n", "metrics line 1"},
           {"fastpath_gpu_power_watts{gpu=\"0\"}\n", "no value"},
           {"x 1\nfastpath_gpu_sm_clock_mhz{uuid=\"GPU-1\"} 1410\n", "has no gpu label"},
           {"fastpath_gpu_clocks_event_active{gpu=\"0\"} 1\n", "has no reason label"},
           {"fastpath_gpu_throttle_seconds_total{gpu=\"0\",reason=\"hw_thermal} 1\n",
            "not closed"}}) {
    auto gpus = ParseGpuMetrics(c.text);
    ASSERT_FALSE(gpus.ok()) << c.text;
    EXPECT_NE(gpus.status().message().find(c.says), std::string::npos) << gpus.status().message();
  }
  // Lines of other families are not ours to judge.
  EXPECT_TRUE(ParseGpuMetrics("nv_gpu_utilization{gpu_uuid=\"x\"} garbage\n").ok());
}

// ---- The GPU fields of a window ----

GpuMetrics Gpu(const std::string& gpu, std::map<std::string, double> throttle,
               std::map<std::string, double> active = {{"hw_thermal", 1}, {"sw_power_cap", 0}}) {
  GpuMetrics g;
  g.gpu = gpu;
  g.uuid = "GPU-" + gpu;
  g.temperature_c = 70;
  g.sm_clock_mhz = 1410;
  g.clocks_event_active = std::move(active);
  g.throttle_seconds_total = std::move(throttle);
  return g;
}

TEST(SoakGpusTest, ThrottleTimeIsTheIncreaseWithinTheWindow) {
  const std::vector<GpuMetrics> start = {Gpu("0", {{"hw_thermal", 10}, {"sw_power_cap", 4}})};
  const std::vector<GpuMetrics> end = {
      Gpu("0", {{"hw_thermal", 70}, {"sw_power_cap", 4}, {"hw_slowdown", 1.5}})};
  const std::vector<SoakGpu> w = SoakGpusBetween(start, end);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].temperature_c, 70.0);
  EXPECT_FALSE(w[0].power_w.has_value());
  ASSERT_TRUE(w[0].active_reasons.has_value());
  EXPECT_EQ(*w[0].active_reasons, std::vector<std::string>{"hw_thermal"});
  ASSERT_TRUE(w[0].throttle_seconds.has_value());
  // sw_power_cap did not increase; hw_slowdown appeared in the window and counts from 0.
  EXPECT_EQ(*w[0].throttle_seconds,
            (std::map<std::string, double>{{"hw_slowdown", 1.5}, {"hw_thermal", 60}}));
}

TEST(SoakGpusTest, ResetsAndAnotherGpuCountFromZero) {
  const std::vector<GpuMetrics> start = {Gpu("0", {{"hw_thermal", 100}}),
                                         Gpu("1", {{"hw_thermal", 50}})};
  std::vector<GpuMetrics> end = {Gpu("0", {{"hw_thermal", 3}}), Gpu("1", {{"hw_thermal", 58}})};
  end[1].uuid = "GPU-replaced";
  const std::vector<SoakGpu> w = SoakGpusBetween(start, end);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(*w[0].throttle_seconds, (std::map<std::string, double>{{"hw_thermal", 3}}));
  EXPECT_EQ(*w[1].throttle_seconds, (std::map<std::string, double>{{"hw_thermal", 58}}));
}

TEST(SoakGpusTest, UnknownIsAbsentNotZero) {
  // The scrape at the window's start failed: the throttle time is unknown.
  std::vector<SoakGpu> w = SoakGpusBetween(std::nullopt, {Gpu("0", {{"hw_thermal", 5}})});
  EXPECT_FALSE(w[0].throttle_seconds.has_value());
  EXPECT_TRUE(w[0].active_reasons.has_value());
  // No reasons exported at all (NVML does not support them): both absent.
  w = SoakGpusBetween(std::vector<GpuMetrics>{}, {Gpu("0", {}, {})});
  EXPECT_FALSE(w[0].active_reasons.has_value());
  EXPECT_FALSE(w[0].throttle_seconds.has_value());
  // Reasons exported, none ever active: known, nothing throttled.
  w = SoakGpusBetween(std::vector<GpuMetrics>{}, {Gpu("0", {}, {{"hw_thermal", 0}})});
  ASSERT_TRUE(w[0].active_reasons.has_value());
  EXPECT_TRUE(w[0].active_reasons->empty());
  ASSERT_TRUE(w[0].throttle_seconds.has_value());
  EXPECT_TRUE(w[0].throttle_seconds->empty());
  // A server without a GPU: no GPU fields.
  EXPECT_TRUE(SoakGpusBetween(std::vector<GpuMetrics>{}, {}).empty());
}

// ---- Drift ----

SoakWindow Window(int index, double ips, double p95_us, uint64_t requests = 1000) {
  SoakWindow w;
  w.index = index;
  w.start_s = (index - 1) * 60.0;
  w.end_s = index * 60.0;
  w.load.mode = "soak";
  w.load.concurrency = 4;
  w.load.throughput_rps = ips;
  w.load.throughput_ips = ips;
  w.load.requests = requests;
  w.load.latency.count = requests;
  w.load.latency.p50_us = p95_us / 2;
  w.load.latency.p95_us = p95_us;
  w.load.latency.p99_us = p95_us * 1.5;
  w.load.measured_seconds = 60;
  return w;
}

TEST(SoakDriftTest, RatiosAgainstTheFirstWindowAndTheWorst) {
  SoakResult soak;
  soak.windows = {Window(1, 1000, 2000), Window(2, 950, 2300), Window(3, 800, 2200),
                  Window(4, 900, 2100)};
  ComputeSoakDrift(&soak);
  EXPECT_DOUBLE_EQ(*soak.windows[0].throughput_ratio, 1.0);
  EXPECT_DOUBLE_EQ(*soak.windows[0].p95_ratio, 1.0);
  EXPECT_DOUBLE_EQ(*soak.windows[1].throughput_ratio, 0.95);
  EXPECT_DOUBLE_EQ(*soak.windows[1].p95_ratio, 1.15);
  EXPECT_DOUBLE_EQ(*soak.windows[2].throughput_ratio, 0.8);
  const auto d = SummarizeSoakDrift(soak);
  ASSERT_TRUE(d.has_value());
  EXPECT_DOUBLE_EQ(*d->last_throughput_ratio, 0.9);
  EXPECT_DOUBLE_EQ(*d->last_p95_ratio, 1.05);
  EXPECT_DOUBLE_EQ(*d->min_throughput_ratio, 0.8);
  EXPECT_EQ(d->min_throughput_window, 3);
  EXPECT_DOUBLE_EQ(*d->max_p95_ratio, 1.15);
  EXPECT_EQ(d->max_p95_window, 2);
}

TEST(SoakDriftTest, WindowsWithoutRequests) {
  SoakResult soak;
  EXPECT_FALSE(SummarizeSoakDrift(soak).has_value());
  // A window that completed nothing: throughput fell to 0, its p95 does not exist.
  soak.windows = {Window(1, 1000, 2000), Window(2, 0, 0, 0)};
  ComputeSoakDrift(&soak);
  EXPECT_DOUBLE_EQ(*soak.windows[1].throughput_ratio, 0.0);
  EXPECT_FALSE(soak.windows[1].p95_ratio.has_value());
  // A first window that completed nothing: no ratio at all.
  soak.windows = {Window(1, 0, 0, 0), Window(2, 1000, 2000)};
  ComputeSoakDrift(&soak);
  EXPECT_FALSE(soak.windows[1].throughput_ratio.has_value());
  EXPECT_FALSE(soak.windows[1].p95_ratio.has_value());
}

// ---- Windows of a continuous load ----

// A target whose requests take ~0.3 ms; every `fail_every`-th one fails with http_503.
// Statistics count what succeeded.
class FakeTarget : public Target {
 public:
  explicit FakeTarget(uint64_t fail_every = 0) : fail_every_(fail_every) {}
  StatusOr<ModelMetadata> Metadata() override { return ModelMetadata{}; }
  StatusOr<std::optional<ModelStatsSnapshot>> Stats() override {
    ModelStatsSnapshot s;
    s.success.count = ok_.load();
    s.inference_count = s.success.count;
    s.execution_count = s.success.count;
    s.compute_infer = {s.success.count, s.success.count * 300000};
    s.batch_executions[1] = s.success.count;
    return std::optional<ModelStatsSnapshot>(s);
  }
  Status Prepare(const std::vector<std::vector<Tensor>>&) override { return Status::Ok(); }
  StatusOr<std::unique_ptr<InferSession>> NewSession() override {
    return std::unique_ptr<InferSession>(std::make_unique<Session>(this));
  }
  std::string Describe() const override { return "fake"; }

  uint64_t calls() const { return calls_.load(); }

 private:
  class Session : public InferSession {
   public:
    explicit Session(FakeTarget* t) : t_(t) {}
    InferOutcome Infer(size_t) override {
      std::this_thread::sleep_for(std::chrono::microseconds(300));
      const uint64_t n = ++t_->calls_;
      if (t_->fail_every_ > 0 && n % t_->fail_every_ == 0) return {false, "http_503", "queue full"};
      ++t_->ok_;
      return {};
    }

   private:
    FakeTarget* t_;
  };
  uint64_t fail_every_;
  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> ok_{0};
};

MeasureOptions NoWarmup() {
  MeasureOptions o;
  o.warmup = milliseconds(0);
  return o;
}

TEST(MeasureSoakTest, ConsecutiveWindowsOfOneLoadWithBoundariesInOrder) {
  FakeTarget target(/*fail_every=*/3);
  SoakSchedule schedule;
  schedule.duration = milliseconds(600);
  schedule.window = milliseconds(200);
  std::vector<int> boundaries;
  std::vector<BenchPoint> windows;
  ASSERT_TRUE(MeasureSoak(target, 2, NoWarmup(), schedule, [&](int index, const BenchPoint* w) {
                boundaries.push_back(index);
                EXPECT_EQ(w == nullptr, index == 0);
                if (w != nullptr) windows.push_back(*w);
              }).ok());
  EXPECT_EQ(boundaries, (std::vector<int>{0, 1, 2, 3}));
  ASSERT_EQ(windows.size(), 3u);
  uint64_t counted = 0;
  for (const BenchPoint& w : windows) {
    EXPECT_EQ(w.mode, "soak");
    EXPECT_EQ(w.concurrency, 2);
    EXPECT_GT(w.requests, 0u);
    EXPECT_EQ(w.latency.count, w.requests);
    EXPECT_GT(w.throughput_ips, 0.0);
    EXPECT_GT(w.errors, 0u);
    EXPECT_EQ(w.errors_by_kind.at("http_503"), w.errors);
    EXPECT_EQ(w.error_samples.at("http_503"), "queue full");
    // The server split of this window alone: statistics read at its two ends.
    ASSERT_TRUE(w.server.available);
    EXPECT_GT(w.server.requests, 0u);
    counted += w.requests + w.errors;
  }
  // No request is counted in two windows.
  EXPECT_LE(counted, target.calls());
}

TEST(MeasureSoakTest, TheLastWindowIsShorterAndNeverMissing) {
  FakeTarget target;
  SoakSchedule schedule;
  schedule.duration = milliseconds(250);
  schedule.window = milliseconds(100);
  int windows = 0;
  ASSERT_TRUE(MeasureSoak(target, 1, NoWarmup(), schedule, [&](int index, const BenchPoint* w) {
                windows += w != nullptr;
              }).ok());
  EXPECT_EQ(windows, 3);
  schedule.window = milliseconds(300);
  EXPECT_EQ(MeasureSoak(target, 1, NoWarmup(), schedule, [](int, const BenchPoint*) {}).code(),
            StatusCode::kInvalidArgument);
}

TEST(MeasureSoakTest, AStopEndsTheWindowInProgress) {
  FakeTarget target;
  std::atomic<bool> stop{false};
  SoakSchedule schedule;
  schedule.duration = std::chrono::hours(2);
  schedule.window = std::chrono::hours(1);
  schedule.stop = &stop;
  std::vector<BenchPoint> ended;
  std::thread interrupt;
  ASSERT_TRUE(MeasureSoak(target, 1, NoWarmup(), schedule, [&](int index, const BenchPoint* w) {
                if (w != nullptr) ended.push_back(*w);
                // A SIGINT while the first window runs.
                if (index == 0) {
                  interrupt = std::thread([&stop] {
                    std::this_thread::sleep_for(milliseconds(50));
                    stop = true;
                  });
                }
              }).ok());
  interrupt.join();
  // The first window is reported, cut short; no second one starts.
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_GT(ended[0].requests, 0u);
  EXPECT_LT(ended[0].measured_seconds, 3600.0);
}

// Scripted scrapes: one text (or failure) per boundary, then the last again.
class ScriptedMetrics : public MetricsSource {
 public:
  explicit ScriptedMetrics(std::vector<StatusOr<std::string>> script)
      : script_(std::move(script)) {}
  StatusOr<std::string> Scrape() override {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t i = std::min(next_++, script_.size() - 1);
    return script_[i];
  }
  std::string Describe() const override { return "http://gpu-node:8002/metrics"; }
  size_t scrapes() const { return next_; }

 private:
  std::mutex mu_;
  std::vector<StatusOr<std::string>> script_;
  size_t next_ = 0;
};

std::string Scrape(double temperature, double hw_thermal_seconds) {
  const std::string l = "{gpu=\"0\",uuid=\"GPU-7e57\"";
  return "fastpath_gpu_temperature_celsius" + l + "} " + std::to_string(temperature) + "\n" +
         "fastpath_gpu_sm_clock_mhz" + l + "} 1410\nfastpath_gpu_power_watts" + l + "} 300\n" +
         "fastpath_gpu_clocks_event_active" + l + ",reason=\"hw_thermal\"} 1\n" +
         "fastpath_gpu_throttle_seconds_total" + l + ",reason=\"hw_thermal\"} " +
         std::to_string(hw_thermal_seconds) + "\n";
}

TEST(RunSoakTest, EachWindowGetsTheScrapeAtItsEndAndTheThrottleTimeWithin) {
  FakeTarget target;
  std::vector<StatusOr<std::string>> script;
  script.emplace_back(Scrape(60, 1));
  script.emplace_back(Scrape(64, 3));
  script.emplace_back(Unavailable("GET http://gpu-node:8002/metrics: timed out"));
  script.emplace_back(Scrape(70, 9.5));
  script.emplace_back(std::string("fastpath_gpu_temperature_celsius{gpu=\"0\"} broken\n"));
  ScriptedMetrics metrics(std::move(script));
  SoakOptions options;
  options.concurrency = 1;
  options.measure = NoWarmup();
  options.schedule.duration = milliseconds(400);
  options.schedule.window = milliseconds(100);
  options.metrics = &metrics;
  std::vector<int> seen;
  options.on_window = [&](const SoakWindow& w) {
    seen.push_back(w.index);
    EXPECT_TRUE(w.throughput_ratio.has_value()) << "the drift is there as each window ends";
  };
  auto soak = RunSoak(target, options);
  ASSERT_TRUE(soak.ok()) << soak.status().message();
  EXPECT_EQ(metrics.scrapes(), 5u) << "the start and each window's end";
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(soak->metrics_url, "http://gpu-node:8002/metrics");
  EXPECT_FALSE(soak->interrupted);
  ASSERT_EQ(soak->windows.size(), 4u);
  const auto& w = soak->windows;
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(w[i].index, static_cast<int>(i + 1));
    if (i > 0) {
      EXPECT_DOUBLE_EQ(w[i].start_s, w[i - 1].end_s) << "no gap between windows";
    }
  }
  EXPECT_DOUBLE_EQ(*w[0].throughput_ratio, 1.0);
  // 1: from 1 s to 3 s of hw_thermal.
  ASSERT_EQ(w[0].gpus.size(), 1u);
  EXPECT_EQ(w[0].gpus[0].temperature_c, 64.0);
  EXPECT_EQ(w[0].gpus[0].uuid, "GPU-7e57");
  EXPECT_NEAR(w[0].gpus[0].throttle_seconds->at("hw_thermal"), 2.0, 1e-9);
  EXPECT_TRUE(w[0].metrics_error.empty());
  // 2: the scrape at its end failed: no GPU fields, and why.
  EXPECT_TRUE(w[1].gpus.empty());
  EXPECT_NE(w[1].metrics_error.find("timed out"), std::string::npos);
  // 3: readings again, but the throttle time is unknown (no scrape at its start).
  ASSERT_EQ(w[2].gpus.size(), 1u);
  EXPECT_EQ(w[2].gpus[0].temperature_c, 70.0);
  EXPECT_FALSE(w[2].gpus[0].throttle_seconds.has_value());
  // 4: a scrape that does not parse is a failure too.
  EXPECT_TRUE(w[3].gpus.empty());
  EXPECT_NE(w[3].metrics_error.find("metrics line 1"), std::string::npos) << w[3].metrics_error;
}

TEST(RunSoakTest, WithoutMetricsNoGpuFields) {
  FakeTarget target;
  SoakOptions options;
  options.measure = NoWarmup();
  options.schedule.duration = milliseconds(200);
  options.schedule.window = milliseconds(100);
  auto soak = RunSoak(target, options);
  ASSERT_TRUE(soak.ok());
  EXPECT_EQ(soak->windows.size(), 2u);
  EXPECT_TRUE(soak->metrics_url.empty());
  for (const auto& w : soak->windows) {
    EXPECT_TRUE(w.gpus.empty());
    EXPECT_TRUE(w.metrics_error.empty());
  }
}

// ---- Table, JSON, SVG ----

BenchReport SoakReport(bool with_gpu) {
  BenchReport r;
  r.label = "cnn soak";
  r.model = "cnn_classifier";
  r.transport = "http";
  r.encoding = "binary";
  r.url = "http://127.0.0.1:8000";
  SoakResult soak;
  soak.concurrency = 4;
  soak.duration_s = 180;
  soak.window_s = 60;
  soak.metrics_url = "http://127.0.0.1:8002/metrics";
  soak.windows = {Window(1, 1000, 2000), Window(2, 950, 2300), Window(3, 900, 2100)};
  soak.windows[1].load.errors = 2;
  soak.windows[1].load.errors_by_kind = {{"http_503", 2}};
  if (with_gpu) {
    for (size_t i = 0; i < soak.windows.size(); ++i) {
      SoakGpu g;
      g.gpu = "0";
      g.uuid = "GPU-7e57";
      g.temperature_c = 60 + 5.0 * i;
      g.sm_clock_mhz = 1980 - 100.0 * i;
      g.power_w = 310.5;
      g.utilization_avg = 0.5 + 0.1 * i;
      g.memory_used_max_bytes = (1.0 + i) * 1024 * 1024 * 1024;
      g.active_reasons =
          i == 0 ? std::vector<std::string>{} : std::vector<std::string>{"hw_thermal"};
      g.throttle_seconds = i == 0 ? std::map<std::string, double>{}
                                  : std::map<std::string, double>{{"hw_thermal", 30.0 * i}};
      soak.windows[i].gpus.push_back(g);
    }
    // A second GPU without power or reasons in the last window.
    SoakGpu other;
    other.gpu = "1";
    other.temperature_c = 41;
    soak.windows[2].gpus.push_back(other);
  }
  ComputeSoakDrift(&soak);
  r.soak = soak;
  return r;
}

TEST(SoakTableTest, OneRowPerWindowWithDriftAndGpuFields) {
  const std::string t = RenderTable(SoakReport(true));
  EXPECT_NE(t.find("soak at concurrency 4 for 3m in windows of 1m"), std::string::npos) << t;
  EXPECT_NE(t.find("tput ratio"), std::string::npos);
  EXPECT_NE(t.find("p95 ratio"), std::string::npos);
  // Window 2: 0.950x throughput, 1.150x p95, 65 C, 1880 MHz, 60% busy, 2 GiB at most,
  // hw_thermal for 30 s.
  std::regex row2(
      R"(\n\s+2\s+120\.0\s+950\.0\s+1\.150\s+2\.300\s+3\.450\s+2\s+0\.950\s+1\.150\s+65\s+1880\s+310\.5\s+0\.60\s+2\.00\s+hw_thermal\s+hw_thermal:30\.0\n)");
  EXPECT_TRUE(std::regex_search(t, row2)) << t;
  std::regex row1(R"(\n\s+1\s+60\.0 .* 60\s+1980\s+310\.5\s+0\.50\s+1\.00\s+none\s+0\n)");
  EXPECT_TRUE(std::regex_search(t, row1)) << t;
  // The second GPU on a row of its own, its missing readings '-'.
  std::regex gpu1(R"(\n\s+gpu 1\s+41\s+-\s+-\s+-\s+-\s+-\s+-\n)");
  EXPECT_TRUE(std::regex_search(t, gpu1)) << t;
  EXPECT_NE(t.find("window 2 errors: http_503:2"), std::string::npos);
  EXPECT_NE(t.find("the last window runs at 0.900x the throughput with 1.050x the p95"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("lowest throughput 0.900x (window 3), highest p95 1.150x (window 2)"),
            std::string::npos);
  EXPECT_EQ(t.find("absent"), std::string::npos);
}

TEST(SoakTableTest, GpuFieldsAbsentAreDashesNeverZero) {
  BenchReport r = SoakReport(false);
  std::string t = RenderTable(r);
  std::regex row(
      R"(\n\s+3\s+180\.0\s+900\.0\s+1\.050\s+2\.100\s+3\.150\s+0\s+0\.900\s+1\.050\s+-\s+-\s+-\s+-\s+-\s+-\s+-\n)");
  EXPECT_TRUE(std::regex_search(t, row)) << t;
  EXPECT_NE(t.find("GPU fields absent ('-'): http://127.0.0.1:8002/metrics exports no "
                   "fastpath_gpu_* series"),
            std::string::npos)
      << t;
  r.soak->windows[0].metrics_error =
      "GET http://127.0.0.1:8002/metrics: connecting: Connection refused";
  r.soak->interrupted = true;
  t = RenderTable(r);
  EXPECT_NE(t.find("GPU fields absent in 1 window(s): the scrape failed (GET"), std::string::npos)
      << t;
  EXPECT_NE(t.find("interrupted after 3 window(s)"), std::string::npos);
}

TEST(SoakJsonTest, RoundTripsWithAbsentFieldsAsNull) {
  const BenchReport with_gpu = SoakReport(true);
  const BenchReport without = SoakReport(false);
  const std::string json = ReportsToJson({with_gpu, without});
  auto back = ReadReportsJson(json, "soak.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 2u);
  ASSERT_TRUE((*back)[0].soak.has_value());
  const SoakResult& s = *(*back)[0].soak;
  EXPECT_EQ(s.concurrency, 4);
  EXPECT_DOUBLE_EQ(s.duration_s, 180);
  EXPECT_DOUBLE_EQ(s.window_s, 60);
  EXPECT_EQ(s.metrics_url, "http://127.0.0.1:8002/metrics");
  ASSERT_EQ(s.windows.size(), 3u);
  const SoakWindow& w = s.windows[1];
  EXPECT_EQ(w.index, 2);
  EXPECT_DOUBLE_EQ(w.end_s, 120);
  EXPECT_DOUBLE_EQ(w.load.throughput_ips, 950);
  EXPECT_DOUBLE_EQ(w.load.latency.p95_us, 2300);
  EXPECT_EQ(w.load.errors_by_kind.at("http_503"), 2u);
  EXPECT_DOUBLE_EQ(*w.throughput_ratio, 0.95);
  EXPECT_DOUBLE_EQ(*w.p95_ratio, 1.15);
  ASSERT_EQ(w.gpus.size(), 1u);
  EXPECT_EQ(w.gpus[0].temperature_c, 65.0);
  EXPECT_EQ(*w.gpus[0].active_reasons, std::vector<std::string>{"hw_thermal"});
  EXPECT_EQ(*w.gpus[0].throttle_seconds, (std::map<std::string, double>{{"hw_thermal", 30}}));
  EXPECT_EQ(w.gpus[0].utilization_avg, 0.6);
  EXPECT_EQ(w.gpus[0].memory_used_max_bytes, 2.0 * 1024 * 1024 * 1024);
  const SoakGpu& other = s.windows[2].gpus[1];
  EXPECT_EQ(other.temperature_c, 41.0);
  EXPECT_FALSE(other.power_w.has_value());
  EXPECT_FALSE(other.utilization_avg.has_value());
  EXPECT_FALSE(other.active_reasons.has_value());
  EXPECT_FALSE(other.throttle_seconds.has_value());
  for (const SoakWindow& none : (*back)[1].soak->windows) EXPECT_TRUE(none.gpus.empty());
  // Absent is null in the file, never 0.
  EXPECT_NE(json.find("\"gpus\": null"), std::string::npos);
  EXPECT_NE(json.find("\"power_w\": null"), std::string::npos);
  EXPECT_NE(json.find("\"active_reasons\": null"), std::string::npos);
  EXPECT_NE(json.find("\"last_throughput_ratio\": 0.9"), std::string::npos) << json;
  // A report without a soak keeps "soak": null and reads back without one.
  BenchReport plain = without;
  plain.soak.reset();
  const std::string plain_json = ReportsToJson({plain});
  EXPECT_NE(plain_json.find("\"soak\": null"), std::string::npos);
  EXPECT_FALSE(ReadReportsJson(plain_json, "p.json").value()[0].soak.has_value());
}

// An edited or damaged soak report is refused, naming what is wrong: read leniently, a count
// that is a string read as 0 and the windows' times were taken as given, so preflight passed
// a 6 s soak whose last window was edited to end at 1800 s, or one whose errors were strings.
TEST(SoakJsonTest, ADamagedReportIsRefusedNamingWhatIsWrong) {
  const std::string json = ReportsToJson({SoakReport(false)});
  const auto refused = [&](const std::string& from, const std::string& to) {
    std::string edited = json;
    const size_t at = edited.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at == std::string::npos) return std::string();
    edited.replace(at, from.size(), to);
    auto back = ReadReportsJson(edited, "soak.json");
    return back.ok() ? std::string("read") : back.status().message();
  };
  EXPECT_THAT(refused("\"errors\": 0", "\"errors\": \"13586\""),
              ::testing::HasSubstr(".errors is not a count"));
  EXPECT_THAT(refused("\"errors\": 0", "\"errors\": -3"),
              ::testing::HasSubstr(".errors is not a count"));
  EXPECT_THAT(refused("\"interrupted\": false", "\"interrupted\": \"true\""),
              ::testing::HasSubstr(".interrupted is not true or false"));
  EXPECT_THAT(refused("\"end_s\": 180", "\"end_s\": 1800"),
              ::testing::HasSubstr("windows[2] runs from 120.000000 to 1800.000000 s"));
  EXPECT_THAT(refused("\"start_s\": 0", "\"start_s\": 10"),
              ::testing::HasSubstr("windows[0] runs from"));
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SoakSvgTest, LatencyTemperatureThroughputAndUtilizationOnOneTimeAxis) {
  const std::string svg = RenderSoakSvg(SoakReport(true), "cnn <soak> & GPU");
  std::vector<std::string> elements;
  ASSERT_TRUE(WellFormedXml(svg, &elements)) << svg;
  EXPECT_EQ(elements.front(), "svg");
  for (const char* series :
       {"<g class=\"series p50\"", "<g class=\"series p95\"", "<g class=\"series p99\""}) {
    EXPECT_EQ(Count(svg, series), 1u) << series;
  }
  EXPECT_EQ(Count(svg, "<g class=\"series temperature\" data-gpu=\"0\""), 1u) << svg;
  EXPECT_EQ(Count(svg, "<g class=\"series temperature\" data-gpu=\"1\""), 1u);
  // Three windows, three points on each latency line; GPU 0's temperature three, GPU 1's one.
  EXPECT_EQ(Count(svg, "<title>p95 latency "), 3u);
  EXPECT_EQ(Count(svg, "<title>GPU 0 temperature "), 3u);
  EXPECT_EQ(Count(svg, "<title>GPU 1 temperature "), 1u);
  EXPECT_NE(svg.find("<title>GPU 0 temperature 70.000 °C at 3.00 min</title>"), std::string::npos)
      << svg;
  EXPECT_NE(svg.find("time since the soak started (min)"), std::string::npos);
  EXPECT_NE(svg.find(">latency (ms)<"), std::string::npos);
  EXPECT_NE(svg.find(">GPU temperature (°C)<"), std::string::npos);
  EXPECT_NE(svg.find("cnn &lt;soak&gt; &amp; GPU"), std::string::npos);
  EXPECT_NE(svg.find("throughput 0.900x, p95 1.050x"), std::string::npos);
  // The lower panel: the windows' throughput, and the GPU that reported its utilization.
  EXPECT_EQ(Count(svg, "<g class=\"series throughput\""), 1u);
  EXPECT_EQ(Count(svg, "<title>throughput "), 3u);
  EXPECT_NE(svg.find("<title>throughput 950.000 infer/s at 2.00 min</title>"), std::string::npos);
  EXPECT_EQ(Count(svg, "<g class=\"series utilization\" data-gpu=\"0\""), 1u);
  EXPECT_EQ(Count(svg, "<g class=\"series utilization\" data-gpu=\"1\""), 0u)
      << "GPU 1 reported no utilization";
  EXPECT_NE(svg.find("<title>GPU 0 utilization 70.000 % at 3.00 min</title>"), std::string::npos);
  EXPECT_NE(svg.find(">throughput (infer/s)<"), std::string::npos);
  EXPECT_NE(svg.find(">GPU utilization (%)<"), std::string::npos);
}

TEST(SoakSvgTest, WithoutGpuTheTemperatureScaleSaysAbsent) {
  const std::string svg = RenderSoakSvg(SoakReport(false), "cpu soak");
  std::vector<std::string> elements;
  ASSERT_TRUE(WellFormedXml(svg, &elements)) << svg;
  EXPECT_EQ(Count(svg, "class=\"series temperature\""), 0u);
  EXPECT_NE(svg.find("GPU temperature: absent (no GPU series)"), std::string::npos);
  EXPECT_EQ(Count(svg, "class=\"series utilization\""), 0u);
  EXPECT_NE(svg.find(">GPU utilization: absent<"), std::string::npos);
  EXPECT_EQ(Count(svg, "<title>p50 latency "), 3u);
  EXPECT_EQ(Count(svg, "<title>throughput "), 3u);
  // Nothing measured at all still draws.
  BenchReport empty;
  empty.soak = SoakResult{};
  EXPECT_TRUE(WellFormedXml(RenderSoakSvg(empty, "nothing"), &elements));
}

}  // namespace
}  // namespace fastpath::bench
