// Through the facade (issue 13 §3): an instance whose session is broken after running out
// of memory fails its seeded check and is rebuilt; while it cannot be, the model is
// UNAVAILABLE with the reason, in readiness, in the index and to requests; once rebuilt
// it is READY and serves. Real ORT instances, a wrapper that breaks them on cue, and a
// manual clock for the pauses between rebuilds.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <thread>

#include "fakes/manual_clock.h"
#include "fakes/temp_repository.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/server/server_impl.h"

namespace fastpath::server {
namespace {

constexpr int32_t kOutOfMemoryMarker = 12345;  // INPUT0[0] of the request that runs out

struct Faults {
  std::atomic<bool> session_broken{false};  // every run of every copy fails
  std::atomic<bool> creation_fails{false};
  std::atomic<int> created{0};
};

// A real instance that runs out of memory on the marker, and then (as some ORT sessions
// after an arena OOM) fails every run until it is created afresh.
class BreakingInstance final : public backend::ModelInstance {
 public:
  BreakingInstance(std::unique_ptr<backend::ModelInstance> inner, Faults* faults)
      : inner_(std::move(inner)), faults_(faults) {}
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                    const std::vector<std::string>& names) override {
    if (faults_->session_broken) return Internal("CUDA failure 700: an illegal memory access");
    int32_t first = 0;
    if (!inputs.empty() && inputs[0].data.size() >= sizeof(first)) {
      std::memcpy(&first, inputs[0].data.data(), sizeof(first));
    }
    if (first == kOutOfMemoryMarker) {
      faults_->session_broken = true;
      return ResourceExhausted("out of memory: Failed to allocate memory for requested buffer");
    }
    return inner_->Run(inputs, names);
  }
  const backend::PlacementAudit* placement() const override { return inner_->placement(); }

 private:
  std::unique_ptr<backend::ModelInstance> inner_;
  Faults* faults_;
};

class BreakingBackend final : public backend::Backend {
 public:
  BreakingBackend(std::unique_ptr<backend::Backend> inner, Faults* faults)
      : inner_(std::move(inner)), faults_(faults) {}
  std::string Name() const override { return inner_->Name(); }
  StatusOr<backend::ModelSignature> Inspect(const std::filesystem::path& file) override {
    return inner_->Inspect(file);
  }
  StatusOr<std::unique_ptr<backend::ModelInstance>> CreateInstance(
      const std::filesystem::path& file, const backend::InstanceOptions& options) override {
    if (faults_->creation_fails) return Internal("cannot allocate the session's weights");
    FASTPATH_ASSIGN_OR_RETURN(auto instance, inner_->CreateInstance(file, options));
    ++faults_->created;
    faults_->session_broken = false;  // a fresh session works
    return std::unique_ptr<backend::ModelInstance>(
        std::make_unique<BreakingInstance>(std::move(instance), faults_));
  }

 private:
  std::unique_ptr<backend::Backend> inner_;
  Faults* faults_;
};

InferRequest Request(int32_t first) {
  InferRequest r;
  r.model_name = "simple";
  for (const char* name : {"INPUT0", "INPUT1"}) {
    Tensor t{name, DataType::kInt32, {1, 16}, std::string(64, '\1')};
    std::memcpy(t.data.data(), &first, sizeof(first));
    r.inputs.push_back(std::move(t));
  }
  return r;
}

TEST(OutOfMemoryRecoveryTest, ABrokenInstanceIsRebuiltAndTheModelIsUnavailableUntilItIs) {
  testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  repo.AddVersion("simple", 1, "simple");
  testing::ManualClock clock;
  Faults faults;
  ServerOptions options;
  options.repository.roots = {repo.root()};
  options.clock = &clock;
  options.memory_sample_interval = std::chrono::milliseconds(0);
  auto backend = onnxruntime::CreateOrtBackend();
  ASSERT_TRUE(backend.ok());
  auto created =
      Server::Create(options, std::make_shared<BreakingBackend>(std::move(backend).value(), &faults));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Server& server = **created;
  ASSERT_EQ(faults.created, 1);
  const auto infer = [&](int32_t first) {
    std::promise<StatusOr<InferResponse>> done;
    server.InferAsync(Request(first),
                      [&done](StatusOr<InferResponse> r) { done.set_value(std::move(r)); });
    return done.get_future().get();
  };
  const auto wait_ready = [&](bool ready) {
    for (;;) {
      auto now = server.IsModelReady("simple", "");
      ASSERT_TRUE(now.ok());
      if (*now == ready) return;
      std::this_thread::yield();
    }
  };
  ASSERT_TRUE(infer(1).ok());

  // The run that runs out of memory fails alone; the session is broken after it, so the
  // seeded check fails and the rebuild is refused: the only instance is out of service.
  faults.creation_fails = true;
  const auto failed = infer(kOutOfMemoryMarker);
  EXPECT_EQ(failed.status().code(), StatusCode::kResourceExhausted);
  wait_ready(false);
  const auto refused = infer(1);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("could not be rebuilt"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("cannot allocate the session's weights"),
            std::string::npos);
  bool listed = false;
  for (const RepositoryEntry& entry : server.RepositoryIndex(/*ready_only=*/false)) {
    if (entry.name != "simple") continue;
    listed = true;
    EXPECT_EQ(entry.state, ModelState::kUnavailable);
    EXPECT_NE(entry.reason.find("no instance can serve"), std::string::npos) << entry.reason;
  }
  EXPECT_TRUE(listed);

  // A pause later the rebuild works: READY again, and serving.
  faults.creation_fails = false;
  clock.Advance(std::chrono::seconds(1));
  wait_ready(true);
  EXPECT_EQ(faults.created, 2);
  EXPECT_TRUE(infer(1).ok());
}

}  // namespace
}  // namespace fastpath::server
