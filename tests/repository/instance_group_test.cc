// Instance groups: `count` instances per group (and per GPU of a KIND_GPU group), each
// its own backend instance (ORT session) with its own execution thread, behind either
// scheduler; KIND_GPU always asks the backend for a GPU provider, never the CPU.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "fakes/temp_repository.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/repository/model_repository.h"

namespace fastpath::repository {
namespace {

using testing::TempRepository;

// Instances whose Run blocks until the test opens the gate, so the test can count how
// many run at the same time.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int running = 0;
  void Open() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
  void WaitRunning(int n) {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return running >= n; });
  }
};

class GatedInstance : public backend::ModelInstance {
 public:
  explicit GatedInstance(Gate* gate) : gate_(gate) {}
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                    const std::vector<std::string>& names) override {
    std::unique_lock lock(gate_->mu);
    ++gate_->running;
    gate_->cv.notify_all();
    gate_->cv.wait(lock, [&] { return gate_->open; });
    --gate_->running;
    std::vector<Tensor> out;
    for (size_t i = 0; i < names.size(); ++i) {
      out.push_back(inputs.at(i % inputs.size()));
      out.back().name = names[i];
    }
    return out;
  }

 private:
  Gate* gate_;
};

// Reads signatures with the real ORT backend; records every instance asked for and hands
// out gated fakes (no GPU needed to see what a KIND_GPU group asks for).
class RecordingBackend : public backend::Backend {
 public:
  RecordingBackend(std::unique_ptr<backend::Backend> real, Gate* gate)
      : real_(std::move(real)), gate_(gate) {}
  std::string Name() const override { return "onnxruntime"; }
  StatusOr<backend::ModelSignature> Inspect(const std::filesystem::path& file) override {
    return real_->Inspect(file);
  }
  StatusOr<std::unique_ptr<backend::ModelInstance>> CreateInstance(
      const std::filesystem::path&, const backend::InstanceOptions& options) override {
    created.push_back(options);
    return std::unique_ptr<backend::ModelInstance>(std::make_unique<GatedInstance>(gate_));
  }
  std::vector<backend::InstanceOptions> created;

 private:
  std::unique_ptr<backend::Backend> real_;
  Gate* gate_;
};

constexpr const char* kSimpleIo = R"(
name: "simple"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
)";

class InstanceGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto real = onnxruntime::CreateOrtBackend();
    ASSERT_TRUE(real.ok()) << real.status().ToString();
    backend_ = std::make_unique<RecordingBackend>(std::move(real).value(), &gate_);
  }
  void TearDown() override {
    gate_.Open();
    repository_.reset();
  }

  std::shared_ptr<ModelVersion> Load(const std::string& extra) {
    repo_.AddVersion("simple", 1, "simple");
    repo_.WriteConfig("simple", std::string(kSimpleIo) + extra);
    RepositoryOptions options;
    options.roots = {repo_.root()};
    repository_ = std::make_unique<ModelRepository>(options, backend_.get());
    EXPECT_TRUE(repository_->Load("simple").ok());
    auto v = repository_->FindReady("simple", "");
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : nullptr;
  }

  // Enqueues `n` one-row requests and waits until all of them run at the same time.
  void ExpectConcurrentRuns(ModelVersion& version, int n) {
    for (int i = 0; i < n; ++i) {
      scheduler::Job job;
      job.request.model_name = "simple";
      for (const char* name : {"INPUT0", "INPUT1"}) {
        job.request.inputs.push_back({name, DataType::kInt32, {1, 16}, std::string(64, '\0')});
      }
      job.output_names = {"OUTPUT0"};
      job.arrival = SteadyClock()->Now();
      job.done = [](StatusOr<InferResponse> r) { EXPECT_TRUE(r.ok()) << r.status().ToString(); };
      version.scheduler->Enqueue(std::move(job));
    }
    gate_.WaitRunning(n);  // each instance has its own thread: n runs at once
    gate_.Open();
  }

  Gate gate_;
  TempRepository repo_{FASTPATH_TEST_MODELS_DIR};
  std::unique_ptr<RecordingBackend> backend_;
  std::unique_ptr<ModelRepository> repository_;
};

TEST_F(InstanceGroupTest, CountCpuInstancesEachWithItsOwnThread) {
  auto v = Load("instance_group [ { kind: KIND_CPU count: 3 } ]\n");
  ASSERT_NE(v, nullptr);
  ASSERT_EQ(backend_->created.size(), 3u);
  for (const auto& o : backend_->created) {
    EXPECT_EQ(o.providers,
              std::vector<backend::ExecutionProvider>{backend::ExecutionProvider::kCpu});
  }
  ExpectConcurrentRuns(*v, 3);
}

TEST_F(InstanceGroupTest, DynamicBatcherRunsBatchesOnEveryInstance) {
  auto v = Load(
      "instance_group [ { kind: KIND_CPU count: 2 } ]\n"
      "dynamic_batching { }\n");
  ASSERT_NE(v, nullptr);
  ASSERT_EQ(backend_->created.size(), 2u);
  // Window 0 and a free instance: each request goes at once, one per instance.
  ExpectConcurrentRuns(*v, 2);
}

TEST_F(InstanceGroupTest, GpuGroupCreatesCountInstancesPerListedGpuAndNeverTheCpu) {
  auto v = Load(
      "instance_group [ { kind: KIND_GPU count: 2 gpus: [ 0, 1 ] },"
      " { kind: KIND_CPU count: 1 } ]\n"
      "dynamic_batching { max_queue_delay_microseconds: 0 }\n");
  ASSERT_NE(v, nullptr);
  ASSERT_EQ(backend_->created.size(), 5u);
  std::vector<int> gpu_devices;
  for (size_t i = 0; i < 4; ++i) {
    const auto& o = backend_->created[i];
    gpu_devices.push_back(o.device_id);
    EXPECT_FALSE(o.providers.empty());
    for (auto ep : o.providers) {
      EXPECT_NE(ep, backend::ExecutionProvider::kCpu) << "a KIND_GPU instance asked for the CPU";
    }
  }
  EXPECT_EQ(gpu_devices, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(backend_->created[4].providers,
            std::vector<backend::ExecutionProvider>{backend::ExecutionProvider::kCpu});
  ExpectConcurrentRuns(*v, 5);
}

}  // namespace
}  // namespace fastpath::repository
