// The GPU watch in the server (issue 14 §5) with scripted samples: a GPU that reports an
// uncorrected ECC error is quarantined. Readiness turns off with the reason, liveness stays
// on, a request already running on that GPU finishes, new requests for a model on it are
// refused with 503 and the reason (and counted as refused), an ensemble with a step on it is
// not ready either, the index and the admission report call both UNAVAILABLE, and a model on
// the CPU keeps serving. The instances of "ongpu" are real ORT CPU instances that say their
// nodes and memory are on gpu0.
#include <gtest/gtest.h>

#include <condition_variable>
#include <future>

#include "fakes/manual_clock.h"
#include "fakes/temp_repository.h"
#include "fakes/wrapping_backend.h"
#include "fastpath/metrics/metrics.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/server/server_impl.h"

namespace fastpath::server {
namespace {

// Runs on a real CPU instance, and holds each run until `gate` opens when one is set.
class GpuInstance final : public backend::ModelInstance {
 public:
  GpuInstance(std::unique_ptr<backend::ModelInstance> inner, std::shared_future<void>* gate,
              std::promise<void>* entered)
      : inner_(std::move(inner)), gate_(gate), entered_(entered) {
    // Every node on the GPU: what the quarantine goes by.
    placement_.total_nodes = inner_->placement() ? inner_->placement()->total_nodes : 1;
    placement_.providers.push_back(
        {std::string(backend::kCudaProviderName), placement_.total_nodes, 0, {}, {}});
  }
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                    const std::vector<std::string>& names) override {
    if (gate_->valid()) {
      entered_->set_value();
      gate_->wait();
    }
    return inner_->Run(inputs, names);
  }
  const backend::PlacementAudit* placement() const override { return &placement_; }

 private:
  std::unique_ptr<backend::ModelInstance> inner_;
  backend::PlacementAudit placement_;
  std::shared_future<void>* gate_;
  std::promise<void>* entered_;
};

// What the test says the GPU reports; while hung, a read does not return (as NVML's on a
// GPU that fell off the bus) until Answer().
class ScriptedSource final : public gpu::GpuSource {
 public:
  std::string Describe() const override { return "scripted"; }
  std::vector<gpu::GpuSample> Sample(std::chrono::milliseconds) override {
    std::unique_lock lock(mu_);
    if (hung_) {
      reading_ = true;
      cv_.notify_all();
      cv_.wait(lock, [this] { return !hung_; });
    }
    return {sample_};
  }
  void Set(gpu::GpuSample sample) {
    std::lock_guard lock(mu_);
    sample_ = std::move(sample);
  }
  void Hang() {
    std::lock_guard lock(mu_);
    hung_ = true;
  }
  // Waits until a read is hanging (false: none in 30 s).
  bool WaitForAHungRead() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [this] { return reading_; });
  }
  void Answer() {
    std::lock_guard lock(mu_);
    hung_ = false;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  gpu::GpuSample sample_;
  bool hung_ = false;
  bool reading_ = false;
};

InferRequest SimpleRequest(const std::string& model) {
  InferRequest r;
  r.model_name = model;
  for (const char* name : {"INPUT0", "INPUT1"}) {
    r.inputs.push_back(Tensor{name, DataType::kInt32, {1, 16}, std::string(64, '\1')});
  }
  return r;
}

TEST(GpuWatchTest, AnUncorrectedEccErrorDrainsTheGpuAndKeepsTheCpuServing) {
  testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  repo.AddVersion("ongpu", 1, "simple");
  std::string on_gpu = testing::kSimpleConfig;
  on_gpu.replace(on_gpu.find("\"simple\""), 8, "\"ongpu\"");
  on_gpu.replace(on_gpu.find("KIND_CPU"), 8, "KIND_GPU");
  repo.WriteConfig("ongpu", on_gpu);
  repo.AddVersion("oncpu", 1, "simple");
  // KIND_GPU too, but every node of it on the CPU (the dev profile's fallback): the GPU's
  // health is not its own.
  repo.AddVersion("fellback", 1, "simple");
  std::string fell_back = testing::kSimpleConfig;
  fell_back.replace(fell_back.find("\"simple\""), 8, "\"fellback\"");
  fell_back.replace(fell_back.find("KIND_CPU"), 8, "KIND_GPU");
  repo.WriteConfig("fellback", fell_back);
  // An ensemble whose one step runs on the GPU.
  std::filesystem::create_directories(repo.root() / "ens" / "1");
  repo.WriteConfig("ens", R"(
name: "ens"
platform: "ensemble"
max_batch_size: 8
input [
  { name: "A" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "B" data_type: TYPE_INT32 dims: [ 16 ] }
]
output [ { name: "SUM" data_type: TYPE_INT32 dims: [ 16 ] } ]
ensemble_scheduling { step [ {
  model_name: "ongpu" model_version: -1
  input_map { key: "INPUT0" value: "A" }
  input_map { key: "INPUT1" value: "B" }
  output_map { key: "OUTPUT0" value: "SUM" }
} ] }
)");
  testing::ManualClock clock;
  auto source = std::make_shared<ScriptedSource>();
  gpu::GpuSample healthy;
  healthy.uuid = "GPU-test";
  healthy.ecc_uncorrected_volatile = 0;
  source->Set(healthy);
  ServerOptions options;
  options.repository.roots = {repo.root()};
  options.clock = &clock;
  options.memory_sample_interval = std::chrono::milliseconds(0);
  options.gpu_source = source;
  options.gpu_sample_interval = std::chrono::milliseconds(0);  // the test samples
  auto ort = onnxruntime::CreateOrtBackend();
  ASSERT_TRUE(ort.ok());
  // KIND_GPU in the config (the GPU the quarantine goes by), the CPU in fact; the runs of
  // "ongpu" wait on `gate` once it is set.
  std::shared_future<void> gate;  // invalid: runs go straight through
  std::promise<void> entered;
  auto wrapping = std::make_shared<testing::WrappingBackend>(
      std::move(ort).value(),
      [&](const std::filesystem::path& file,
          std::unique_ptr<backend::ModelInstance> real) -> std::unique_ptr<backend::ModelInstance> {
        if (file.string().find("ongpu") == std::string::npos) return real;
        return std::make_unique<GpuInstance>(std::move(real), &gate, &entered);
      },
      /*cpu_only=*/true);
  auto created = Server::Create(options, wrapping);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Server& server = **created;

  const auto infer = [&](const std::string& model) {
    std::promise<StatusOr<InferResponse>> done;
    server.InferAsync(SimpleRequest(model),
                      [&done](StatusOr<InferResponse> r) { done.set_value(std::move(r)); });
    auto answer = done.get_future();
    // A refusal that regressed would queue behind the held run: fail, do not hang.
    if (answer.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      return StatusOr<InferResponse>(DeadlineExceeded("no answer in 30 s"));
    }
    return answer.get();
  };
  ASSERT_TRUE(server.IsReady());
  ASSERT_TRUE(infer("ongpu").ok());
  ASSERT_TRUE(*server.IsModelReady("ens", ""));

  // A request is running on the GPU when the error comes.
  std::promise<void> open;
  gate = open.get_future().share();
  std::promise<StatusOr<InferResponse>> in_flight;
  server.InferAsync(SimpleRequest("ongpu"),
                    [&in_flight](StatusOr<InferResponse> r) { in_flight.set_value(std::move(r)); });
  entered.get_future().wait();

  gpu::GpuSample failing = healthy;
  failing.ecc_uncorrected_volatile = 1;
  source->Set(failing);
  clock.Advance(std::chrono::seconds(1));
  server.SampleGpus();

  EXPECT_FALSE(server.IsReady());
  EXPECT_TRUE(server.IsLive());
  EXPECT_FALSE(*server.IsModelReady("ongpu", ""));
  EXPECT_TRUE(*server.IsModelReady("oncpu", ""));
  const StatusOr<InferResponse> refused = infer("ongpu");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find(
                "model 'ongpu' version 1 runs on GPU 0, which is quarantined: 1 uncorrected ECC "
                "error(s)"),
            std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(infer("oncpu").ok()) << "the CPU model is not on the failing GPU";
  EXPECT_TRUE(*server.IsModelReady("fellback", ""));
  EXPECT_TRUE(infer("fellback").ok()) << "its nodes all run on the CPU";
  // Refused before the model, as a full queue refuses: counted, so that failure rates show it.
  const auto stats = server.GetModelStatistics("ongpu", "");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].failures[static_cast<size_t>(FailureReason::kRejected)], 1u);
  // An ensemble looks up its steps per request: one on the GPU makes it not ready.
  EXPECT_FALSE(*server.IsModelReady("ens", ""));
  InferRequest to_ensemble;
  to_ensemble.model_name = "ens";
  for (const char* name : {"A", "B"}) {
    to_ensemble.inputs.push_back(Tensor{name, DataType::kInt32, {1, 16}, std::string(64, '\1')});
  }
  std::promise<StatusOr<InferResponse>> ensemble_answer;
  server.InferAsync(std::move(to_ensemble),
                    [&](StatusOr<InferResponse> r) { ensemble_answer.set_value(std::move(r)); });
  EXPECT_EQ(ensemble_answer.get_future().get().status().code(), StatusCode::kUnavailable);
  // The index and the admission report (and so fastpath_model_state) say what readiness says.
  for (const RepositoryEntry& entry : server.RepositoryIndex(/*ready_only=*/false)) {
    if (entry.name == "oncpu" || entry.name == "fellback") {
      EXPECT_EQ(entry.state, ModelState::kReady);
    } else {
      EXPECT_EQ(entry.state, ModelState::kUnavailable) << entry.name;
      EXPECT_NE(entry.reason.find("runs on GPU 0, which is quarantined"), std::string::npos)
          << entry.reason;
    }
  }
  EXPECT_EQ(server.RepositoryIndex(/*ready_only=*/true).size(), 2u);
  for (const admission::ModelAdmission& m : server.Admission().models) {
    EXPECT_EQ(m.state, m.name == "oncpu" || m.name == "fellback"
                           ? admission::AdmissionState::kReady
                           : admission::AdmissionState::kUnavailable)
        << m.name;
  }

  open.set_value();
  EXPECT_TRUE(in_flight.get_future().get().ok()) << "what was running finishes";

  // Healthy readings afterwards clear nothing: only a restart does.
  source->Set(healthy);
  clock.Advance(std::chrono::seconds(1));
  server.SampleGpus();
  EXPECT_FALSE(server.IsReady());

  const admission::AdmissionReport report = server.Admission();
  EXPECT_EQ(report.gpu_telemetry, "scripted");
  ASSERT_EQ(report.gpus.size(), 1u);
  EXPECT_EQ(report.gpus[0].quarantined,
            "1 uncorrected ECC error(s) since the driver loaded (volatile count)");
  bool named = false;
  for (const std::string& r : report.reasons) {
    named = named || r.find("GPU 0 (GPU-test) is quarantined") != std::string::npos;
  }
  EXPECT_TRUE(named);
  bool exported = false;
  for (const prometheus::MetricFamily& f : metrics::GpuFamilies(report)) {
    if (f.name != "fastpath_gpu_quarantined") continue;
    ASSERT_EQ(f.metric.size(), 1u);
    EXPECT_EQ(f.metric[0].gauge.value, 1.0);
    exported = true;
  }
  EXPECT_TRUE(exported);
}

// A read that never returns (a GPU fallen off the bus hangs NVML) left every GPU healthy for
// ever, and the shutdown waited on it before draining anything.
TEST(GpuWatchTest, AReadThatHangsQuarantinesEveryGpuAndTheShutdownGoesOn) {
  testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  repo.AddVersion("ongpu", 1, "simple");
  std::string on_gpu = testing::kSimpleConfig;
  on_gpu.replace(on_gpu.find("\"simple\""), 8, "\"ongpu\"");
  on_gpu.replace(on_gpu.find("KIND_CPU"), 8, "KIND_GPU");
  repo.WriteConfig("ongpu", on_gpu);
  // Static: the thread left to the hung read may still use it after the test returns.
  static testing::ManualClock clock;
  auto source = std::make_shared<ScriptedSource>();
  gpu::GpuSample healthy;
  healthy.uuid = "GPU-test";
  source->Set(healthy);
  ServerOptions options;
  options.repository.roots = {repo.root()};
  options.clock = &clock;
  options.memory_sample_interval = std::chrono::milliseconds(0);
  options.gpu_source = source;
  options.gpu_sample_interval = std::chrono::milliseconds(1000);  // a thread samples
  auto ort = onnxruntime::CreateOrtBackend();
  ASSERT_TRUE(ort.ok());
  std::shared_future<void> gate;  // never set: runs go straight through
  std::promise<void> entered;
  auto wrapping = std::make_shared<testing::WrappingBackend>(
      std::move(ort).value(),
      [&](const std::filesystem::path&,
          std::unique_ptr<backend::ModelInstance> real) -> std::unique_ptr<backend::ModelInstance> {
        return std::make_unique<GpuInstance>(std::move(real), &gate, &entered);
      },
      /*cpu_only=*/true);
  auto created = Server::Create(options, wrapping);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::unique_ptr<Server> server = std::move(created).value();
  ASSERT_TRUE(server->IsReady());

  source->Hang();
  clock.Advance(std::chrono::seconds(1));  // the sampling thread's next pass
  ASSERT_TRUE(source->WaitForAHungRead()) << "the sampling thread never read";
  clock.Advance(GpuWatch::kHungAfter - std::chrono::seconds(1));
  server->CheckGpusHung();
  EXPECT_TRUE(server->IsReady()) << "a read of 9 s is slow, not yet hung";
  clock.Advance(std::chrono::seconds(1));
  server->CheckGpusHung();
  EXPECT_FALSE(server->IsReady());
  EXPECT_FALSE(*server->IsModelReady("ongpu", ""));
  const std::vector<gpu::GpuStatus> gpus = server->Admission().gpus;
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].quarantined,
            "a read of the GPU telemetry (scripted) has not returned for 10 s: the driver or the "
            "GPU hangs, and what it would report (ECC errors, XIDs, throttling) cannot be seen");

  // The shutdown leaves the hung read to its thread and drains.
  auto shutdown = std::async(std::launch::async,
                             [&] { return server->Shutdown(std::chrono::milliseconds(0)); });
  ASSERT_EQ(shutdown.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "the shutdown waits on the hung read";
  shutdown.get();
  server.reset();
  source->Answer();  // the read returns into a watch that is still there
}

}  // namespace
}  // namespace fastpath::server
