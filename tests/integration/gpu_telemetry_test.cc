// GPU telemetry end to end on the real binary (issue 14 §1, §2, §3, §5): `serve --gpu-trace`
// replays recorded GPU samples against the server's clock while 8 clients send requests.
// A steady trace changes nothing; an uncorrected ECC error or XID 79 quarantines the GPU:
// readiness answers 503 with the reason, liveness stays 200, fastpath_gpu_quarantined is 1,
// and the CPU model keeps serving every request. An application XID (13) quarantines
// nothing. A model that slows down drifts, and a throttled GPU is not blamed when the model
// is on the CPU. On a GPU (the suite's fake CUDA provider, which computes on the host), the
// drift's cause is the trace's: thermal, power or HW slowdown, and "not the GPU" when its
// clocks held; an ECC error refuses the GPU's model while the CPU model serves. A bad trace
// stops `serve` with the line named.
#include <atomic>
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
constexpr int kEventMs = 4000;
constexpr int kTraceEndMs = 4500;

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

    // The failed probe says why.
    const HttpResponse ready = http().Get("/v2/health/ready");
    EXPECT_EQ(ready.status, 503);
    EXPECT_NE(ready.body.find("not ready: GPU 0 (GPU-7e57) is quarantined: " + reason),
              std::string::npos)
        << ready.body;
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

// --- Drift (issue 14 §4) ---

// square (X times X, for n x n matrices) on the CPU. A larger n is more work per execution:
// what a slower device looks like to the detector. The work grows as n^3 and the request as
// n^2, so the slow executions are slow in ONNX Runtime's own compute, not in the fixed costs
// around it (with x + 1 over a longer vector, the dispatch and copies that do not grow with
// the work could keep the measured ratio under the threshold on a busy machine). The causes
// on a GPU (thermal, power, reliability) are tested through the facade with a model placed
// on a scripted GPU (tests/server/drift_watch_test.cc); here the binary shows that a
// throttled GPU is not blamed for a model that does not run on it. One intra-op thread: with
// ORT's pool of two spinning threads on a machine running several servers at once (ctest
// -j, under ASan), an execution's time is mostly waiting for the other thread to be
// scheduled, small or large, and the 64x-larger product measured 1.5x its baseline.
constexpr const char* kDriftingConfig = R"(
name: "drifting"
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
parameters { key: "intra_op_thread_count" value { string_value: "1" } }
)";


class DriftTest : public GpuTraceTest {
 protected:
  std::vector<std::string> Models() override { return {}; }
  void PrepareRepository(testing::TempRepository& repo) override {
    repo.AddVersion("drifting", 1, "square");
    repo.WriteConfig("drifting", Config());
  }
  virtual std::string Config() { return kDriftingConfig; }
  // The matrix sizes of the steady and the slow requests: 16 KiB and 1 MiB requests, 512x
  // the multiply-adds.
  virtual size_t SteadyN() { return 64; }
  virtual size_t SlowN() { return 512; }
  // The clock-event reasons the GPU reports for the whole trace, and its SM clock.
  virtual uint64_t Reasons() { return 0; }
  std::string Trace() override {
    const std::string extra = "\"clocks_event_reasons\": " + std::to_string(Reasons()) +
                              ", \"sm_clock_mhz\": " + (Reasons() == 0 ? "1980" : "1410");
    std::string out;
    for (int t = 0; t <= kTraceEndMs; t += 250) out += Line(t, extra);  // the last one holds
    return out;
  }
  std::vector<std::string> ExtraArgs() override {
    std::vector<std::string> args = GpuTraceTest::ExtraArgs();
    // This machine's CPU is shared and noisy: the same work has taken up to 2.1x its
    // baseline over a 3 s window while other jobs ran. The threshold (4x) is above that
    // noise and far below the slowdown the tests cause (512x the work). The window (5 s)
    // holds the 20 executions a verdict needs also under AddressSanitizer and beside other
    // tests. The default threshold's behaviour is tested on a manual clock
    // (tests/server/drift_watch_test.cc).
    for (const char* a : {"--drift-window", "5s", "--drift-threshold", "3"}) args.push_back(a);
    return args;
  }

  // `requests` requests of an n x n matrix from each of 4 clients (forever when 0, until
  // `stop`); every one must succeed.
  void Send(size_t n, int requests, const std::atomic<bool>* stop = nullptr) {
    const size_t elements = n * n;
    const std::string json =
        R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,)" + std::to_string(n) + "," +
        std::to_string(n) + R"(],"parameters":{"binary_data_size":)" +
        std::to_string(elements * 4) +
        R"(}}],"parameters":{"binary_data_output":true}})";
    const BinaryBody body = MakeBinaryBody(json, {std::string(elements * 4, '\0')});
    std::vector<std::thread> clients;
    std::atomic<int> failed{0};
    for (int c = 0; c < 4; ++c) {
      clients.emplace_back([&] {
        HttpClient client(server().http_port());
        for (int i = 0; requests == 0 || i < requests; ++i) {
          if (stop != nullptr && stop->load()) break;
          const HttpResponse r =
              client.Post("/v2/models/drifting/infer", body.body,
                          {{"Inference-Header-Content-Length", std::to_string(body.json_length)}});
          if (r.status != 200 && failed++ == 0) ADD_FAILURE() << r.Describe();
        }
      });
    }
    for (auto& t : clients) t.join();
    EXPECT_EQ(failed.load(), 0);
  }
  // The drift verdict of `drifting` in /v2/health/admission; Null until there is one.
  rapidjson::Document Drift() {
    rapidjson::Document d = Admission();
    rapidjson::Document out;
    for (const auto& m : d["models"].GetArray()) {
      if (std::string(m["name"].GetString()) == "drifting") out.CopyFrom(m["drift"], out.GetAllocator());
    }
    return out;
  }
  // Slows the model down (larger matrices) under load until the drift watch alerts; returns
  // the verdict, Null after 60 s.
  rapidjson::Document SlowDownUntilDrift() {
    Send(SteadyN(), 40);  // the baseline: at least 20 executions
    // The drift watch observes every 100 ms: wait until it has set the baseline from these
    // executions alone before the slow ones begin.
    const auto baseline_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!Drift().IsObject() || !Drift()["ratio"].IsNumber()) {
      if (std::chrono::steady_clock::now() > baseline_deadline) {
        ADD_FAILURE() << "no drift ratio after the baseline; log:\n" << server().LogTail();
        return {};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::atomic<bool> stop{false};
    std::thread load([&] { Send(SlowN(), 0, &stop); });
    rapidjson::Document verdict;
    std::string last;  // the last verdict seen, for the failure message
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      rapidjson::Document d = Drift();
      if (d.IsObject() && d["alert"].GetBool()) {
        verdict = std::move(d);
        break;
      }
      last = ToJson(d);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    stop = true;
    load.join();
    if (verdict.IsNull()) {
      ADD_FAILURE() << "no drift alert in 60 s; the last verdict: " << last << "\nlog:\n"
                    << server().LogTail();
    }
    return verdict;
  }
  void ExpectDriftCause(const std::string& cause, const std::string& why) {
    const rapidjson::Document v = SlowDownUntilDrift();
    ASSERT_TRUE(v.IsObject());
    EXPECT_EQ(std::string(v["cause"].GetString()), cause) << v["detail"].GetString();
    EXPECT_GE(v["ratio"].GetDouble(), 4.0);
    EXPECT_NE(std::string(v["detail"].GetString()).find(why), std::string::npos)
        << v["detail"].GetString();
    const std::string m = Scrape();
    const std::string labels = "{model=\"drifting\",version=\"1\",cause=";
    EXPECT_EQ(MetricValue(m, "fastpath_drift_alert" + labels + "\"" + cause + "\"}"), 1.0) << m;
    for (const char* other : {"thermal", "power", "reliability", "not_gpu"}) {
      if (other == cause) continue;
      EXPECT_EQ(MetricValue(m, "fastpath_drift_alert" + labels + "\"" + other + "\"}"), 0.0);
    }
    EXPECT_GE(MetricValue(m, "fastpath_drift_ratio{model=\"drifting\"").value_or(0), 4.0) << m;
    EXPECT_NE(server().LogTail(100000).find("!!! model 'drifting' version 1 drifted: "),
              std::string::npos);
    EXPECT_EQ(http().Get("/v2/health/ready").status, 200) << "drift alone keeps readiness";
  }
};

TEST_F(DriftTest, ASteadyModelOnASteadyGpuRaisesNoDrift) {
  // Executions of a few milliseconds: a 64x64 product takes tens of microseconds, and on a
  // machine where other tests start their load after the baseline was taken, the scheduler's
  // preemptions alone made those 11x slower (ctest -j4 beside a CPU hog, under ASan).
  constexpr size_t kN = 256;
  Send(kN, 40);
  // Two windows of the same work: a verdict, and no alert.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    Send(kN, 10);
    const rapidjson::Document d = Drift();
    ASSERT_TRUE(d.IsObject());
    EXPECT_FALSE(d["alert"].GetBool()) << d["detail"].GetString();
  }
  const rapidjson::Document d = Drift();
  EXPECT_TRUE(d["ratio"].IsNumber()) << "a window with executions has a ratio";
  EXPECT_EQ(MetricValue(Scrape(), "fastpath_drift_alert{model=\"drifting\",version=\"1\",cause=\"not_gpu\"}"),
            0.0);
}

TEST_F(DriftTest, ASlowdownOfAModelOnTheCpuIsNotTheGpu) {
  ExpectDriftCause("not_gpu", "the model runs on no GPU");
}

class ThermalDriftTest : public DriftTest {
  uint64_t Reasons() override { return 0x40; }  // HW thermal slowdown, for the whole trace
};
TEST_F(ThermalDriftTest, AThrottledGpuIsNotBlamedForAModelOnTheCpu) {
  ExpectDriftCause("not_gpu", "the model runs on no GPU");
}

// --- Drift of a model on a GPU ---

// kDriftingConfig with its CPU instance on GPU 0 instead.
std::string DriftingOnGpu0() {
  std::string config = kDriftingConfig;
  const std::string cpu = "{ kind: KIND_CPU count: 1 }";
  return config.replace(config.find(cpu), cpu.size(), "{ kind: KIND_GPU count: 1 gpus: [ 0 ] }");
}

// The server's environment for the fake CUDA provider's running mode.
std::vector<std::string> FakeGpuEnvironment() {
  return {"FASTPATH_ORT_EP_LIBRARY_DIR=" FASTPATH_FAKE_ORT_EP_DIR, "FASTPATH_FAKE_EP_RUNS=1"};
}

// The same model on GPU 0: the suite's fake CUDA execution provider (tests/fakes/fake_ort_ep,
// FASTPATH_FAKE_EP_RUNS) takes the MatMul and computes it on the host, so the server places
// and serves a KIND_GPU model as it would on a GPU machine, and the replayed trace is that
// GPU's telemetry. The fake's product is plain loops, far slower than ORT's: smaller
// matrices keep 20 executions in a window under AddressSanitizer.
class GpuDriftTest : public DriftTest {
 protected:
  std::string Config() override { return DriftingOnGpu0(); }
  std::vector<std::string> Environment() override { return FakeGpuEnvironment(); }
  size_t SteadyN() override { return 32; }
  size_t SlowN() override { return 256; }
};

TEST_F(GpuDriftTest, ASlowdownOnAGpuWhoseClocksHeldIsNotTheGpu) {
  EXPECT_NE(server().LogTail(100000).find("CUDAExecutionProvider"), std::string::npos)
      << "the model must be placed on the (fake) CUDA provider; log:\n" << server().LogTail();
  ExpectDriftCause("not_gpu", "the GPU clocks held");
}

class ThermalGpuDriftTest : public GpuDriftTest {
  uint64_t Reasons() override { return 0x40; }  // HW thermal slowdown
};
TEST_F(ThermalGpuDriftTest, AThermallyThrottledGpuIsTheCause) {
  ExpectDriftCause("thermal", "GPU 0 held down by thermal slowdown");
}

class PowerGpuDriftTest : public GpuDriftTest {
  uint64_t Reasons() override { return 0x04; }  // SW power cap
};
TEST_F(PowerGpuDriftTest, APowerCappedGpuIsTheCause) {
  ExpectDriftCause("power", "GPU 0 held down by power cap or power brake");
}

class HwSlowdownGpuDriftTest : public GpuDriftTest {
  uint64_t Reasons() override { return 0x08; }  // HW slowdown, without thermal or power brake
};
TEST_F(HwSlowdownGpuDriftTest, AHwSlowdownIsAReliabilityCause) {
  ExpectDriftCause("reliability", "GPU 0 held down by HW slowdown");
}

// --- Quarantine of a GPU that serves a model ---

// The square model on GPU 0 (the fake provider) beside the CPU model simple, with an
// uncorrected ECC error on GPU 0: the GPU's model refuses new requests with 503 and is not
// ready, the CPU model keeps serving.
class GpuModelEccTest : public GpuTraceTest {
 protected:
  std::vector<std::string> Models() override { return {"simple"}; }
  void PrepareRepository(testing::TempRepository& repo) override {
    repo.AddVersion("square", 1, "square");
    std::string config = DriftingOnGpu0();
    repo.WriteConfig("square", config.replace(config.find("\"drifting\""), 10, "\"square\""));
  }
  std::vector<std::string> Environment() override { return FakeGpuEnvironment(); }
  std::string Trace() override {
    std::string out;
    for (int t = 0; t < kEventMs; t += 250) out += Line(t);
    out += Line(kEventMs, "\"ecc_uncorrected_volatile\": 1");
    return out + Line(kTraceEndMs, "\"ecc_uncorrected_volatile\": 1");
  }
  HttpResponse InferSquare() {
    const std::string body =
        R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,2,2],"data":[1,2,3,4]}]})";
    return http().Post("/v2/models/square/infer", body);
  }
};

TEST_F(GpuModelEccTest, TheGpusModelIsRefusedAndTheCpuModelServes) {
  // Before the error: the model on GPU 0 computes ([[1,2],[3,4]] squared).
  const HttpResponse before = InferSquare();
  ASSERT_EQ(before.status, 200) << before.Describe() << "\nlog:\n" << server().LogTail();
  const rapidjson::Document out = ParseJson(before.body);
  EXPECT_EQ(ToJson(out["outputs"][0]["data"]), "[7.0,10.0,15.0,22.0]") << before.body;
  EXPECT_EQ(http().Get("/v2/models/square/ready").status, 200);

  ExpectQuarantined("1 uncorrected ECC error(s)");
  const HttpResponse after = InferSquare();
  EXPECT_EQ(after.status, 503) << after.Describe();
  EXPECT_NE(after.body.find("runs on GPU 0, which is quarantined: 1 uncorrected ECC error(s)"),
            std::string::npos)
      << after.body;
  EXPECT_NE(http().Get("/v2/models/square/ready").status, 200);
  EXPECT_EQ(http().Get("/v2/models/simple/ready").status, 200);
}

// CUDA's own default (fastest first) may number GPUs otherwise than NVML: set by hand, it is
// warned of (unset, serve sets PCI_BUS_ID itself).
class FastestFirstOrderTest : public GpuTraceTest {
 protected:
  std::vector<std::string> Environment() override { return {"CUDA_DEVICE_ORDER=FASTEST_FIRST"}; }
};

TEST_F(FastestFirstOrderTest, AnOrderOtherThanNvmlsIsWarnedOf) {
  EXPECT_NE(server().LogTail(100000).find(
                "CUDA_DEVICE_ORDER=FASTEST_FIRST: CUDA ordinals may not be NVML's indices"),
            std::string::npos)
      << server().LogTail();
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
