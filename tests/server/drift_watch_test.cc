// The drift watch through the facade (issue 14 §4), on a manual clock: a model placed on
// GPU 0 (real ORT CPU instances that take exactly `cost` of the server's clock per run)
// slows down by 30% while the scripted GPU reports a clock-event reason. The drift is
// judged against the start-up baseline with the right cause, shown in the admission report
// (DEGRADED with --drift-degrades) and exported; a steady model raises nothing.
#include <gtest/gtest.h>

#include <future>

#include "fakes/manual_clock.h"
#include "fakes/temp_repository.h"
#include "fakes/timed_backend.h"
#include "fastpath/metrics/metrics.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/server/server_impl.h"

namespace fastpath::server {
namespace {

class ScriptedGpu final : public gpu::GpuSource {
 public:
  std::string Describe() const override { return "scripted"; }
  std::vector<gpu::GpuSample> Sample(std::chrono::milliseconds) override {
    gpu::GpuSample s;
    s.clocks_event_reasons = reasons.load();
    // Held down (1410 MHz) by a throttle reason; GPU idle (0x1) is none.
    s.sm_clock_mhz = (reasons.load() & ~uint64_t{0x1}) == 0 ? 1980 : 1410;
    s.ecc_uncorrected_volatile = 0;
    return {s};
  }
  std::atomic<uint64_t> reasons{0};
};

InferRequest SimpleRequest() {
  InferRequest r;
  r.model_name = "simple";
  for (const char* name : {"INPUT0", "INPUT1"}) {
    r.inputs.push_back(Tensor{name, DataType::kInt32, {1, 16}, std::string(64, '\1')});
  }
  return r;
}

struct Case {
  uint64_t reasons;  // during the slowdown
  const char* cause;
  const char* why;
};

class DriftWatchTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    repo_.AddVersion("simple", 1, "simple");
    std::string config = testing::kSimpleConfig;
    config.replace(config.find("KIND_CPU"), 8, "KIND_GPU");
    repo_.WriteConfig("simple", config);
    ServerOptions options;
    options.repository.roots = {repo_.root()};
    options.clock = &clock_;
    options.memory_sample_interval = std::chrono::milliseconds(0);
    options.gpu_source = gpu_;
    options.gpu_sample_interval = std::chrono::milliseconds(0);
    options.drift.window = std::chrono::seconds(60);
    options.drift_sample_interval = std::chrono::milliseconds(0);  // the test observes
    options.drift_degrades = true;
    auto ort = onnxruntime::CreateOrtBackend();
    ASSERT_TRUE(ort.ok());
    backend_ = std::make_shared<testing::TimedBackend>(std::move(ort).value(), &clock_);
    auto created = Server::Create(options, backend_);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    server_ = std::move(created).value();
  }

  // 30 requests, one after the other, then 10 s on; the GPU and the drift are observed.
  void Step() {
    for (int i = 0; i < 30; ++i) {
      std::promise<StatusOr<InferResponse>> done;
      server_->InferAsync(SimpleRequest(),
                          [&done](StatusOr<InferResponse> r) { done.set_value(std::move(r)); });
      ASSERT_TRUE(done.get_future().get().ok());
    }
    clock_.Advance(std::chrono::seconds(10));
    server_->SampleGpus();
    server_->SampleDrift();
  }
  const admission::ModelAdmission& Simple(const admission::AdmissionReport& report) {
    return report.models.at(0);
  }

  testing::TempRepository repo_{FASTPATH_TEST_MODELS_DIR};
  testing::ManualClock clock_;
  std::shared_ptr<ScriptedGpu> gpu_ = std::make_shared<ScriptedGpu>();
  std::shared_ptr<testing::TimedBackend> backend_;
  std::unique_ptr<Server> server_;
};

TEST_P(DriftWatchTest, ASlowdownIsJudgedWithItsCause) {
  for (int i = 0; i < 8; ++i) Step();  // the baseline, then a steady window
  admission::AdmissionReport report = server_->Admission();
  ASSERT_TRUE(Simple(report).drift.has_value());
  ASSERT_TRUE(Simple(report).drift->ratio.has_value());
  EXPECT_DOUBLE_EQ(*Simple(report).drift->ratio, 1.0);
  EXPECT_FALSE(Simple(report).drift->alert);
  EXPECT_EQ(Simple(report).state, admission::AdmissionState::kReady);

  gpu_->reasons = GetParam().reasons;
  backend_->cost_us = 1300;
  for (int i = 0; i < 7; ++i) Step();
  report = server_->Admission();
  const admission::DriftVerdict& v = *Simple(report).drift;
  EXPECT_NEAR(*v.ratio, 1.3, 1e-6);
  EXPECT_TRUE(v.alert);
  EXPECT_EQ(v.cause, GetParam().cause);
  EXPECT_NE(v.detail.find(GetParam().why), std::string::npos) << v.detail;
  EXPECT_EQ(Simple(report).state, admission::AdmissionState::kDegraded);
  EXPECT_NE(Simple(report).reasons.at(0).find("throughput drift: compute per execution 1.30x"),
            std::string::npos);
  EXPECT_TRUE(server_->IsReady()) << "drift keeps readiness";

  int alerting = 0;
  for (const prometheus::MetricFamily& f : metrics::AdmissionFamilies(report)) {
    if (f.name != "fastpath_drift_alert") continue;
    for (const auto& m : f.metric) {
      if (m.gauge.value == 1) {
        ++alerting;
        EXPECT_EQ(m.label.at(2).value, GetParam().cause);
      }
    }
  }
  EXPECT_EQ(alerting, 1);

  // Fast again, with the GPU healthy: the drift ends.
  gpu_->reasons = 0;
  backend_->cost_us = 1000;
  for (int i = 0; i < 7; ++i) Step();
  EXPECT_FALSE(server_->Admission().models.at(0).drift->alert);
  EXPECT_EQ(server_->Admission().models.at(0).state, admission::AdmissionState::kReady);
}

INSTANTIATE_TEST_SUITE_P(
    Causes, DriftWatchTest,
    ::testing::Values(Case{0x40, "thermal", "GPU 0 held down by thermal slowdown 100% of the window"},
                      Case{0x20, "thermal", "GPU 0 held down by thermal slowdown"},
                      Case{0x4, "power", "GPU 0 held down by power cap or power brake"},
                      Case{0x80, "power", "GPU 0 held down by power cap or power brake"},
                      Case{0x8, "reliability", "GPU 0 held down by HW slowdown"},
                      Case{0x0, "not_gpu", "the GPU clocks held; GPU 0 SM clock 1980 MHz (1980 MHz at start)"},
                      Case{0x1, "not_gpu", "the GPU clocks held"}),  // idle is no throttle
    [](const ::testing::TestParamInfo<Case>& info) {
      return std::string(info.param.cause) + "_" + std::to_string(info.index);
    });

}  // namespace
}  // namespace fastpath::server
