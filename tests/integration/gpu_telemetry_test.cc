// GPU telemetry end to end on the real binary (issue 14 §1, §2, §3, §5): `serve --gpu-trace`
// replays recorded GPU samples against the server's clock while 8 clients send requests.
// A steady trace changes nothing; an uncorrected ECC error or XID 79 quarantines the GPU:
// readiness answers 503 with the reason, liveness stays 200, fastpath_gpu_quarantined is 1,
// and the CPU model keeps serving every request. An application XID (13) quarantines
// nothing. A bad trace stops `serve` with the line named.
#include <chrono>
#include <fstream>
#include <thread>

#include "fakes/run_command.h"
#include "integration_fixture.h"

namespace fastpath::integration {
namespace {

// The value of the first sample line of `text` that starts with `prefix` (a metric name
// with the start of its labels); nullopt when there is none.
std::optional<double> MetricValue(const std::string& text, const std::string& prefix) {
  size_t at = 0;
  while ((at = text.find(prefix, at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') {
      const size_t end = text.find('\n', at);
      const std::string line = text.substr(at, end - at);
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
    at += prefix.size();
  }
  return std::nullopt;
}

// A line of a trace for GPU 0 at `t_ms`, healthy unless `extra` says otherwise.
std::string Line(int t_ms, const std::string& extra = "") {
  return "{\"t_ms\": " + std::to_string(t_ms) +
         ", \"gpu\": 0, \"uuid\": \"GPU-7e57\", \"temperature_c\": 52, \"sm_clock_mhz\": 1980, "
         "\"power_w\": 310.5, \"power_limit_w\": 700, \"utilization_ratio\": 0.6, "
         "\"memory_used_bytes\": 1073741824, \"memory_total_bytes\": 150323855360, "
         "\"ecc_uncorrected_volatile\": 0" +
         (extra.empty() ? "" : ", " + extra) + "}\n";
}

// The whole trace lasts kTraceEndMs; the event, if any, comes at kEventMs: after the
// fixture has seen the server ready.
constexpr int kEventMs = 2500;
constexpr int kTraceEndMs = 3000;

class GpuTraceTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override { return {"simple"}; }
  // The trace's lines; the default is steady.
  virtual std::string Trace() {
    std::string out;
    for (int t = 0; t <= kTraceEndMs; t += 250) out += Line(t);
    return out;
  }
  std::vector<std::string> ExtraArgs() override {
    const std::filesystem::path trace = work_->root() / "gpu-trace.jsonl";
    std::ofstream(trace) << Trace();
    return {"--gpu-trace", trace.string(), "--gpu-sample-interval-ms", "50"};
  }

  std::string Scrape() {
    HttpClient metrics(server().metrics_port());
    const HttpResponse r = metrics.Get("/metrics");
    EXPECT_EQ(r.status, 200);
    return r.body;
  }
  rapidjson::Document Admission() { return ParseJson(http().Get("/v2/health/admission").body); }
  // Waits until the GPU watch has played the whole trace; fails the test after 30 s.
  void WaitTracePlayed() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      const rapidjson::Document d = Admission();
      if (d.IsObject() && d["gpu_telemetry"].IsObject() &&
          d["gpu_telemetry"]["gpus"].Size() == 1 &&
          d["gpu_telemetry"]["gpus"][0]["sampled_at_ms"].GetInt64() >= kTraceEndMs) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "the trace was not played in 30 s; log:\n" << server().LogTail();
  }
  // Waits until /v2/health/ready answers `status`; fails the test after 30 s.
  void WaitReadiness(int status) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (http().Get("/v2/health/ready").status == status) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "readiness never answered " << status << "; log:\n" << server().LogTail();
  }

  // Under load until the trace has played: readiness turns 503, liveness stays 200, the CPU
  // model fails no request, and the reason is in the admission report, the log and the
  // metrics.
  void ExpectQuarantined(const std::string& reason) {
    SimpleLoad load(server().http_port());
    load.WaitSucceeded(100);
    WaitReadiness(503);
    WaitTracePlayed();
    EXPECT_EQ(http().Get("/v2/health/live").status, 200);
    load.WaitSucceeded(100);
    load.Stop();
    EXPECT_EQ(load.failed(), 0) << load.first_failure();

    const rapidjson::Document d = Admission();
    EXPECT_FALSE(d["ready"].GetBool());
    const std::string reasons = ToJson(d["reasons"]);
    EXPECT_NE(reasons.find("GPU 0 (GPU-7e57) is quarantined: " + reason), std::string::npos)
        << reasons;
    const rapidjson::Value& gpu = d["gpu_telemetry"]["gpus"][0];
    EXPECT_NE(std::string(gpu["quarantined"].GetString()).find(reason), std::string::npos);
    EXPECT_NE(server().LogTail(100000).find("!!! GPU 0 (GPU-7e57) is QUARANTINED: " + reason),
              std::string::npos);
    EXPECT_EQ(MetricValue(Scrape(), "fastpath_gpu_quarantined{gpu=\"0\""), 1.0);
  }
};

TEST_F(GpuTraceTest, ASteadyTraceChangesNothingAndIsExported) {
  SimpleLoad load(server().http_port());
  load.WaitSucceeded(100);
  WaitTracePlayed();
  EXPECT_EQ(http().Get("/v2/health/ready").status, 200);
  load.Stop();
  EXPECT_EQ(load.failed(), 0) << load.first_failure();

  const rapidjson::Document d = Admission();
  EXPECT_TRUE(d["ready"].GetBool());
  const rapidjson::Value& t = d["gpu_telemetry"];
  EXPECT_NE(std::string(t["source"].GetString()).find("gpu-trace.jsonl"), std::string::npos);
  const rapidjson::Value& gpu = t["gpus"][0];
  EXPECT_TRUE(gpu["quarantined"].IsNull());
  EXPECT_EQ(gpu["temperature_c"].GetDouble(), 52);
  EXPECT_TRUE(gpu["clocks_event_reasons"].IsNull()) << "the trace has no reasons: unsupported";
  EXPECT_TRUE(gpu["mem_clock_mhz"].IsNull());

  const std::string m = Scrape();
  const std::string labels = "{gpu=\"0\",uuid=\"GPU-7e57\"}";
  EXPECT_EQ(MetricValue(m, "fastpath_gpu_quarantined" + labels), 0.0);
  EXPECT_EQ(MetricValue(m, "fastpath_gpu_temperature_celsius" + labels), 52.0);
  EXPECT_EQ(MetricValue(m, "fastpath_gpu_sm_clock_mhz" + labels), 1980.0);
  EXPECT_EQ(MetricValue(m, "fastpath_gpu_power_watts" + labels), 310.5);
  EXPECT_EQ(MetricValue(m, "fastpath_gpu_power_limit_watts" + labels), 700.0);
  EXPECT_EQ(MetricValue(m, "fastpath_gpu_utilization_ratio" + labels), 0.6);
  EXPECT_EQ(MetricValue(m, "fastpath_gpu_memory_total_bytes" + labels), 150323855360.0);
  EXPECT_EQ(MetricValue(m, "fastpath_gpu_ecc_uncorrected_total" + labels), 0.0);
  // Triton's names, labelled by UUID.
  EXPECT_EQ(MetricValue(m, "nv_gpu_utilization{gpu_uuid=\"GPU-7e57\"}"), 0.6);
  EXPECT_EQ(MetricValue(m, "nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-7e57\"}"), 1073741824.0);
  EXPECT_EQ(MetricValue(m, "nv_gpu_power_usage{gpu_uuid=\"GPU-7e57\"}"), 310.5);
  // Unsupported readings are left out, never exported as 0.
  EXPECT_EQ(m.find("fastpath_gpu_memory_clock_mhz{"), std::string::npos);
  EXPECT_EQ(m.find("fastpath_gpu_clocks_event_active{"), std::string::npos);
  EXPECT_EQ(m.find("fastpath_gpu_xid_total{"), std::string::npos);
}

class ThermalTraceTest : public GpuTraceTest {
 protected:
  std::string Trace() override {
    std::string out = Line(0, "\"clocks_event_reasons\": 0");
    for (int t = 500; t <= kTraceEndMs; t += 250) {
      out += Line(t, "\"clocks_event_reasons\": \"0x40\", \"sm_clock_mhz\": 1410");
    }
    return out;
  }
};

TEST_F(ThermalTraceTest, ThrottlingIsExportedPerReasonWithItsTime) {
  WaitTracePlayed();
  EXPECT_EQ(http().Get("/v2/health/ready").status, 200) << "throttling is no quarantine";
  const std::string m = Scrape();
  const std::string labels = "{gpu=\"0\",uuid=\"GPU-7e57\",reason=";
  EXPECT_EQ(MetricValue(m, "fastpath_gpu_clocks_event_active" + labels + "\"hw_thermal\"}"), 1.0);
  EXPECT_EQ(MetricValue(m, "fastpath_gpu_clocks_event_active" + labels + "\"sw_power_cap\"}"), 0.0);
  // From 500 ms to the end of the trace, at least: the reason holds until the next sample.
  const std::optional<double> seconds =
      MetricValue(m, "fastpath_gpu_throttle_seconds_total" + labels + "\"hw_thermal\"}");
  ASSERT_TRUE(seconds.has_value()) << m;
  EXPECT_GE(*seconds, (kTraceEndMs - 500) / 1000.0 - 0.3);
  EXPECT_EQ(MetricValue(m, "fastpath_gpu_sm_clock_mhz{gpu=\"0\""), 1410.0);
  const rapidjson::Document d = Admission();
  EXPECT_EQ(ToJson(d["gpu_telemetry"]["gpus"][0]["clocks_event_reasons"]),
            "[\"HW thermal slowdown\"]");
}

class EccTraceTest : public GpuTraceTest {
 protected:
  std::string Trace() override {
    std::string out;
    for (int t = 0; t < kEventMs; t += 250) out += Line(t);
    out += Line(kEventMs, "\"ecc_uncorrected_volatile\": 1");
    return out + Line(kTraceEndMs, "\"ecc_uncorrected_volatile\": 1");
  }
};

TEST_F(EccTraceTest, AnUncorrectedEccErrorQuarantinesTheGpu) {
  ExpectQuarantined("1 uncorrected ECC error(s)");
  EXPECT_EQ(MetricValue(Scrape(), "fastpath_gpu_ecc_uncorrected_total{gpu=\"0\""), 1.0);
}

class Xid79TraceTest : public GpuTraceTest {
 protected:
  std::string Trace() override {
    std::string out;
    for (int t = 0; t < kEventMs; t += 250) out += Line(t);
    out += Line(kEventMs, "\"xid\": 79");
    return out + Line(kTraceEndMs);
  }
};

TEST_F(Xid79TraceTest, ACriticalXidQuarantinesTheGpu) {
  ExpectQuarantined("critical XID 79 (GPU has fallen off the bus)");
  // A counter per XID, not a last value.
  EXPECT_EQ(MetricValue(Scrape(), "fastpath_gpu_xid_total{gpu=\"0\",uuid=\"GPU-7e57\",xid=\"79\"}"),
            1.0);
}

class ApplicationXidTraceTest : public GpuTraceTest {
 protected:
  std::string Trace() override {
    std::string out;
    for (int t = 0; t < kEventMs; t += 250) out += Line(t);
    out += Line(kEventMs, "\"xid\": 13");
    out += Line(kEventMs + 100, "\"xid\": 13");
    return out + Line(kTraceEndMs);
  }
};

TEST_F(ApplicationXidTraceTest, AnApplicationXidIsCountedButQuarantinesNothing) {
  WaitTracePlayed();
  EXPECT_EQ(http().Get("/v2/health/ready").status, 200);
  const std::string m = Scrape();
  EXPECT_EQ(MetricValue(m, "fastpath_gpu_xid_total{gpu=\"0\",uuid=\"GPU-7e57\",xid=\"13\"}"), 2.0);
  EXPECT_EQ(MetricValue(m, "fastpath_gpu_quarantined{gpu=\"0\""), 0.0);
}

TEST(GpuTraceCommandLineTest, ABadTraceStopsServeWithTheLineNamed) {
  testing::TempRepository work(FASTPATH_TEST_MODELS_DIR);
  const std::filesystem::path trace = work.root() / "bad.jsonl";
  std::ofstream(trace) << Line(0) << "{\"t_ms\": 250, \"gpu\": 0, \"temperature\": 50}\n";
  const testing::CommandRun run = testing::RunCommand(
      {FastpathBinary(), "serve", "--model-repository", work.root().string(), "--gpu-trace",
       trace.string()});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("bad.jsonl line 2: unknown field \"temperature\""), std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace fastpath::integration
