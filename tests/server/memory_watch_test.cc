// The memory watch in the server (issue 13 §4) with an injected clock: a backend that leaks
// on purpose (real ORT instances whose reported arena grows by a fixed amount per run) is
// caught within one leak window; the same model without the leak is not. Nothing sleeps:
// the test moves a manual clock and asks the server for each sampling pass.
#include <gtest/gtest.h>

#include <future>

#include "fakes/manual_clock.h"
#include "fakes/temp_repository.h"
#include "fakes/wrapping_backend.h"
#include "fastpath/metrics/metrics.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/server/server_impl.h"

namespace fastpath::server {
namespace {

constexpr uint64_t kLeakPerRun = 64 * 1024;

// Delegates to a real instance, and reports its arena holding kLeakPerRun more after every
// run when `leaks`.
class LeakingInstance final : public backend::ModelInstance {
 public:
  LeakingInstance(std::unique_ptr<backend::ModelInstance> inner, bool leaks)
      : inner_(std::move(inner)), leaks_(leaks) {}
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                    const std::vector<std::string>& names) override {
    if (leaks_) runs_.fetch_add(1);
    return inner_->Run(inputs, names);
  }
  const backend::PlacementAudit* placement() const override { return inner_->placement(); }
  std::optional<backend::MemoryStats> memory_stats() const override {
    auto stats = inner_->memory_stats();
    if (stats) stats->in_use_bytes += runs_.load() * kLeakPerRun;
    return stats;
  }

 private:
  std::unique_ptr<backend::ModelInstance> inner_;
  bool leaks_;
  std::atomic<uint64_t> runs_{0};
};

InferRequest SimpleRequest(const std::string& model) {
  InferRequest r;
  r.model_name = model;
  for (const char* name : {"INPUT0", "INPUT1"}) {
    Tensor t{name, DataType::kInt32, {1, 16}, std::string(64, '\1')};
    r.inputs.push_back(std::move(t));
  }
  return r;
}

TEST(MemoryWatchTest, ALeakingInstanceIsCaughtWithinOneWindowAndASteadyOneIsNot) {
  testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  repo.AddVersion("leaky", 1, "simple");
  repo.AddVersion("steady", 1, "simple");
  testing::ManualClock clock;
  ServerOptions options;
  options.repository.roots = {repo.root()};
  options.clock = &clock;
  options.memory_sample_interval = std::chrono::milliseconds(0);  // the test samples
  options.leak_detector.window = std::chrono::seconds(60);
  options.leak_detector.min_growth_bytes = 1 << 20;
  auto ort = onnxruntime::CreateOrtBackend();
  ASSERT_TRUE(ort.ok());
  // The instances of a model whose path names "leaky" leak.
  auto created = Server::Create(
      options,
      std::make_shared<testing::WrappingBackend>(
          std::move(ort).value(),
          [](const std::filesystem::path& file, std::unique_ptr<backend::ModelInstance> real)
              -> std::unique_ptr<backend::ModelInstance> {
            return std::make_unique<LeakingInstance>(
                std::move(real), file.string().find("leaky") != std::string::npos);
          }));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Server& server = **created;

  const auto infer = [&](const std::string& model) {
    std::promise<StatusOr<InferResponse>> done;
    server.InferAsync(SimpleRequest(model),
                      [&done](StatusOr<InferResponse> r) { done.set_value(std::move(r)); });
    return done.get_future().get();
  };
  const auto verdict = [&](const std::string& model) {
    for (const admission::ModelAdmission& m : server.Admission().models) {
      if (m.name == model && !m.instance_leaks.empty()) return m.instance_leaks[0];
    }
    return std::optional<admission::LeakVerdict>();
  };

  // Two runs per model every 2 s: 64 KiB held more per leaky run, 4 MiB over the window.
  for (int step = 0; step < 20; ++step) {
    for (const char* model : {"leaky", "steady"}) {
      for (int i = 0; i < 2; ++i) ASSERT_TRUE(infer(model).ok());
    }
    server.SampleMemory();
    clock.Advance(std::chrono::seconds(2));
  }
  // 40 s in: the window is not covered yet, so nothing is judged a leak.
  ASSERT_TRUE(verdict("leaky").has_value());
  EXPECT_FALSE(verdict("leaky")->suspected);
  for (int step = 0; step < 12; ++step) {
    for (const char* model : {"leaky", "steady"}) {
      for (int i = 0; i < 2; ++i) ASSERT_TRUE(infer(model).ok());
    }
    server.SampleMemory();
    clock.Advance(std::chrono::seconds(2));
  }
  const auto leaky = verdict("leaky");
  ASSERT_TRUE(leaky.has_value());
  EXPECT_TRUE(leaky->suspected) << leaky->reason;
  EXPECT_NEAR(leaky->slope_bytes_per_second, 2 * kLeakPerRun / 2.0, kLeakPerRun / 4.0);
  const auto steady = verdict("steady");
  ASSERT_TRUE(steady.has_value());
  EXPECT_FALSE(steady->suspected) << steady->reason;

  // The same samples judge fragmentation: neither arena grew while it held enough free.
  for (const admission::ModelAdmission& m : server.Admission().models) {
    ASSERT_EQ(m.instance_fragmentation.size(), 1u) << m.name;
    ASSERT_TRUE(m.instance_fragmentation[0].has_value()) << m.name;
    EXPECT_FALSE(m.instance_fragmentation[0]->suspected) << m.instance_fragmentation[0]->reason;
  }

  // And on /metrics.
  const std::string text = metrics::RenderText(metrics::ServerCollector(server));
  EXPECT_NE(text.find("fastpath_memory_leak_suspected{model=\"leaky\",version=\"1\","
                      "model_instance=\"0\",device=\"cpu\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("fastpath_memory_leak_suspected{model=\"steady\",version=\"1\","
                      "model_instance=\"0\",device=\"cpu\"} 0"),
            std::string::npos);
}

}  // namespace
}  // namespace fastpath::server
