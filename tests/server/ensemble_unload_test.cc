// An ensemble request accepted before its ensemble or a step model is unloaded runs to its
// answer: each request holds its steps' versions from its acceptance (StepHold), as
// Triton's ensembles hold their steps' models. Unloading `ens` with unload_dependents, or a
// step alone, failed every request in flight at its next step with "unknown model". The
// step model "first" holds its runs until the test opens the gate, so the requests are in
// flight when the unload comes; the retire grace then passes on a manual clock. An ensemble
// that is another's step ("inner" in "outer") has its steps bound with the outer request.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "fakes/manual_clock.h"
#include "fakes/temp_repository.h"
#include "fakes/wrapping_backend.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/server/server_impl.h"

namespace fastpath::server {
namespace {

// Holds each run until `gate` opens, and says when the first one has started.
class GatedInstance final : public backend::ModelInstance {
 public:
  GatedInstance(std::unique_ptr<backend::ModelInstance> inner, std::shared_future<void> gate,
                std::promise<void>* entered)
      : inner_(std::move(inner)), gate_(std::move(gate)), entered_(entered) {}
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                    const std::vector<std::string>& names) override {
    if (!told_) {
      told_ = true;
      entered_->set_value();
    }
    gate_.wait();
    return inner_->Run(inputs, names);
  }
  const backend::PlacementAudit* placement() const override { return inner_->placement(); }

 private:
  std::unique_ptr<backend::ModelInstance> inner_;
  std::shared_future<void> gate_;
  std::promise<void>* entered_;
  bool told_ = false;
};

class EnsembleUnloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* step : {"first", "second"}) {
      repo_.AddVersion(step, 1, "simple");
      std::string config = testing::kSimpleConfig;
      config.replace(config.find("\"simple\""), 8, std::string("\"") + step + "\"");
      repo_.WriteConfig(step, config);
    }
    // SUM = (A + B) + B: "first" then "second".
    std::filesystem::create_directories(repo_.root() / "ens" / "1");
    repo_.WriteConfig("ens", R"(
name: "ens"
platform: "ensemble"
max_batch_size: 8
input [
  { name: "A" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "B" data_type: TYPE_INT32 dims: [ 16 ] }
]
output [ { name: "SUM" data_type: TYPE_INT32 dims: [ 16 ] } ]
ensemble_scheduling { step [
  { model_name: "first" model_version: -1
    input_map { key: "INPUT0" value: "A" } input_map { key: "INPUT1" value: "B" }
    output_map { key: "OUTPUT0" value: "AB" } },
  { model_name: "second" model_version: -1
    input_map { key: "INPUT0" value: "AB" } input_map { key: "INPUT1" value: "B" }
    output_map { key: "OUTPUT0" value: "SUM" } }
] }
)");
    // The same sum, with "second" inside an ensemble of its own: "outer" runs "first", then
    // "inner", which runs "second".
    std::filesystem::create_directories(repo_.root() / "inner" / "1");
    repo_.WriteConfig("inner", R"(
name: "inner"
platform: "ensemble"
max_batch_size: 8
input [
  { name: "X" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "Y" data_type: TYPE_INT32 dims: [ 16 ] }
]
output [ { name: "SUM" data_type: TYPE_INT32 dims: [ 16 ] } ]
ensemble_scheduling { step [
  { model_name: "second" model_version: -1
    input_map { key: "INPUT0" value: "X" } input_map { key: "INPUT1" value: "Y" }
    output_map { key: "OUTPUT0" value: "SUM" } }
] }
)");
    std::filesystem::create_directories(repo_.root() / "outer" / "1");
    repo_.WriteConfig("outer", R"(
name: "outer"
platform: "ensemble"
max_batch_size: 8
input [
  { name: "A" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "B" data_type: TYPE_INT32 dims: [ 16 ] }
]
output [ { name: "SUM" data_type: TYPE_INT32 dims: [ 16 ] } ]
ensemble_scheduling { step [
  { model_name: "first" model_version: -1
    input_map { key: "INPUT0" value: "A" } input_map { key: "INPUT1" value: "B" }
    output_map { key: "OUTPUT0" value: "AB" } },
  { model_name: "inner" model_version: -1
    input_map { key: "X" value: "AB" } input_map { key: "Y" value: "B" }
    output_map { key: "SUM" value: "SUM" } }
] }
)");
    ServerOptions options;
    options.repository.roots = {repo_.root()};
    options.repository.mode = repository::ControlMode::kExplicit;
    options.startup_models = {startup_model_};
    options.clock = &clock_;
    options.memory_sample_interval = std::chrono::milliseconds(0);
    auto ort = onnxruntime::CreateOrtBackend();
    ASSERT_TRUE(ort.ok());
    // The runs of "first" wait on the gate.
    auto backend = std::make_shared<testing::WrappingBackend>(
        std::move(ort).value(),
        [this](const std::filesystem::path& file, std::unique_ptr<backend::ModelInstance> real)
            -> std::unique_ptr<backend::ModelInstance> {
          if (file.string().find("/first/") == std::string::npos) return real;
          return std::make_unique<GatedInstance>(std::move(real), open_.get_future().share(),
                                                 &entered_);
        });
    auto created = Server::Create(options, backend);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    server_ = std::move(created).value();
    ASSERT_TRUE(*server_->IsModelReady(startup_model_, ""));
  }

  static InferRequest Request(const std::string& model = "ens") {
    InferRequest r;
    r.model_name = model;
    int32_t one[16];
    std::fill(std::begin(one), std::end(one), 1);
    for (const char* name : {"A", "B"}) {
      r.inputs.push_back(Tensor{name,
                                DataType::kInt32,
                                {1, 16},
                                std::string(reinterpret_cast<const char*>(one), sizeof(one))});
    }
    return r;
  }

  // Sends one request to `model`, waits until "first" runs it, unloads with `unload`, lets
  // the retire grace pass, opens the gate and returns the answer.
  StatusOr<InferResponse> AnswerAcrossUnload(const std::function<Status()>& unload,
                                             const std::string& model = "ens") {
    std::promise<StatusOr<InferResponse>> answer;
    server_->InferAsync(Request(model),
                        [&answer](StatusOr<InferResponse> r) { answer.set_value(std::move(r)); });
    entered_.get_future().wait();
    if (Status s = unload(); !s.ok()) return s;
    clock_.Advance(std::chrono::seconds(5));  // past kRetireGrace, several times
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the retire thread acts
    open_.set_value();
    auto future = answer.get_future();
    if (future.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      return DeadlineExceeded("no answer in 30 s");
    }
    return future.get();
  }

  static void ExpectSum3(const StatusOr<InferResponse>& answer) {
    ASSERT_TRUE(answer.ok()) << answer.status().ToString();
    ASSERT_EQ(answer->outputs.size(), 1u);
    const auto* sum = reinterpret_cast<const int32_t*>(answer->outputs[0].data.data());
    EXPECT_EQ(sum[0], 3);
    EXPECT_EQ(sum[15], 3);
  }

  std::string startup_model_ = "ens";  // with its steps
  testing::TempRepository repo_{FASTPATH_TEST_MODELS_DIR};
  testing::ManualClock clock_;
  std::promise<void> open_;     // the gate of "first"'s runs
  std::promise<void> entered_;  // set by the first run of "first"
  std::unique_ptr<Server> server_;
};

TEST_F(EnsembleUnloadTest, ARequestInFlightOutlivesTheEnsemblesUnloadWithItsDependents) {
  ExpectSum3(
      AnswerAcrossUnload([&] { return server_->UnloadModel("ens", /*unload_dependents=*/true); }));
  EXPECT_FALSE(*server_->IsModelReady("second", ""));
}

TEST_F(EnsembleUnloadTest, ARequestInFlightOutlivesItsStepsUnloadAndTheNextOneIsRefused) {
  ExpectSum3(AnswerAcrossUnload([&] { return server_->UnloadModel("second"); }));
  std::promise<StatusOr<InferResponse>> later;
  server_->InferAsync(Request(),
                      [&later](StatusOr<InferResponse> r) { later.set_value(std::move(r)); });
  const StatusOr<InferResponse> refused = later.get_future().get();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
}

class NestedEnsembleUnloadTest : public EnsembleUnloadTest {
 protected:
  NestedEnsembleUnloadTest() { startup_model_ = "outer"; }
};

TEST_F(NestedEnsembleUnloadTest, TheInnerEnsemblesStepsAreHeldFromTheOuterRequestsAcceptance) {
  // "second" is unloaded while the outer request runs "first", before "inner" starts.
  ExpectSum3(AnswerAcrossUnload([&] { return server_->UnloadModel("second"); }, "outer"));
}

TEST_F(NestedEnsembleUnloadTest, AShutdownDrainsTheOuterEnsembleBeforeTheInnerOne) {
  // "inner" sorts before "outer": stopped first, it refused the outer request's step.
  std::promise<StatusOr<InferResponse>> answer;
  server_->InferAsync(Request("outer"),
                      [&answer](StatusOr<InferResponse> r) { answer.set_value(std::move(r)); });
  entered_.get_future().wait();
  std::thread shutdown([&] { server_->Shutdown(std::chrono::milliseconds(0)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the ensembles are stopping
  open_.set_value();
  ExpectSum3(answer.get_future().get());
  shutdown.join();
}

}  // namespace
}  // namespace fastpath::server
