// Ensembles in the repository: load order, a missing step model, explicit load and
// unload of step models, and a request run through the EnsembleScheduler on real step
// models (with a minimal step runner standing in for the server facade).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <future>
#include <map>

#include "fakes/temp_repository.h"
#include "fakes/wrapping_backend.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/repository/model_repository.h"

namespace fastpath::repository {
namespace {

using server::ModelState;
using testing::TempRepository;
using testing::WrappingBackend;

constexpr const char* kAddOne = R"(
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
)";
constexpr const char* kDouble = R"(
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
)";
// Named so that it sorts before its steps: start-up must still load it READY.
constexpr const char* kPipeline = R"(
platform: "ensemble"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 16 ] } ]
ensemble_scheduling {
  step [
    { model_name: "add_one" model_version: -1
      input_map { key: "INPUT0" value: "X" } output_map { key: "OUTPUT0" value: "t" } },
    { model_name: "double" model_version: -1
      input_map { key: "INPUT0" value: "t" } output_map { key: "OUTPUT0" value: "Y" } }
  ]
}
)";

class EnsembleRepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = onnxruntime::CreateOrtBackend();
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    backend_ = std::move(backend).value();
    repo_.AddVersion("add_one", 1, "add_one");
    repo_.WriteConfig("add_one", kAddOne);
    repo_.AddVersion("double", 1, "double");
    repo_.WriteConfig("double", kDouble);
    AddEnsemble("a_pipeline", kPipeline);
  }
  void AddEnsemble(const std::string& name, const std::string& config) {
    repo_.WriteConfig(name, config);
    std::filesystem::create_directories(repo_.root() / name / "1");
  }
  // A step binder standing in for the server: the step model's scheduler, no checks.
  std::unique_ptr<ModelRepository> Make(ControlMode mode = ControlMode::kNone) {
    RepositoryOptions options;
    options.roots = {repo_.root()};
    options.mode = mode;
    options.admit = [this](const std::filesystem::path&, ModelVersion& version) {
      return version.model_name == out_of_memory_step_
                 ? ResourceExhausted("out of memory: injected at admission")
                 : Status::Ok();
    };
    auto binder = [this](const std::string& model,
                         const std::string& version) -> StatusOr<scheduler::StepRunner> {
      FASTPATH_ASSIGN_OR_RETURN(auto found, self_->FindReady(model, version));
      auto hold = std::make_shared<const StepHold>(std::move(found));
      return scheduler::StepRunner(
          [this, hold](InferRequest request, std::function<void(StatusOr<InferResponse>)> done) {
            if (request.model_name == fail_step_) return done(Unavailable("injected failure"));
            scheduler::Job job;
            for (const auto& out : request.outputs) job.output_names.push_back(out.name);
            job.request = std::move(request);
            job.arrival = SteadyClock()->Now();
            job.done = [runtime = hold->version(), done](StatusOr<InferResponse> r) {
              done(std::move(r));
            };
            hold->version()->scheduler->Enqueue(std::move(job));
          });
    };
    auto repo = std::make_unique<ModelRepository>(options, backend_.get(), binder);
    self_ = repo.get();
    return repo;
  }
  static bool Ready(const ModelRepository& repo, const std::string& name, bool otherwise) {
    auto ready = repo.IsReady(name, "");
    return ready.ok() ? *ready : otherwise;
  }
  const server::RepositoryEntry* Entry(const std::vector<server::RepositoryEntry>& index,
                                       const std::string& name) {
    for (const auto& e : index) {
      if (e.name == name) return &e;
    }
    return nullptr;
  }
  StatusOr<InferResponse> Run(ModelRepository& repo, const std::vector<float>& x) {
    auto found = repo.FindReady("a_pipeline", "");
    if (!found.ok()) return found.status();
    Tensor tensor{"X", DataType::kFp32, {1, static_cast<int64_t>(x.size())}, {}};
    tensor.data.assign(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float));
    scheduler::Job job;
    job.request.model_name = "a_pipeline";
    job.request.inputs.push_back(std::move(tensor));
    job.output_names = {"Y"};
    job.arrival = SteadyClock()->Now();
    std::promise<StatusOr<InferResponse>> answer;
    job.done = [&answer](StatusOr<InferResponse> r) { answer.set_value(std::move(r)); };
    (*found)->scheduler->Enqueue(std::move(job));
    return answer.get_future().get();
  }

  TempRepository repo_{FASTPATH_TEST_MODELS_DIR};
  std::unique_ptr<backend::Backend> backend_;
  ModelRepository* self_ = nullptr;
  std::string fail_step_;
  std::string out_of_memory_step_;  // refused at admission for memory
};

TEST_F(EnsembleRepositoryTest, LoadsReadyWhateverTheFolderOrder) {
  auto repo = Make();
  ASSERT_TRUE(repo->LoadStartupModels({}).ok());
  EXPECT_TRUE(repo->AllReady());
  auto v = repo->FindReady("a_pipeline", "");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ((*v)->config.platform(), "ensemble");
  EXPECT_EQ((*v)->config.version_policy().latest().num_versions(), 1u);
  EXPECT_EQ(repo->Index(true).size(), 3u);
}

TEST_F(EnsembleRepositoryTest, RunsTheStepsOnTheirModels) {
  auto repo = Make();
  ASSERT_TRUE(repo->LoadStartupModels({}).ok());
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i) - 4;
  auto result = Run(*repo, x);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->outputs.size(), 1u);
  const Tensor& y = result->outputs[0];
  EXPECT_EQ(y.name, "Y");
  EXPECT_EQ(y.shape, (std::vector<int64_t>{1, 16}));
  ASSERT_EQ(y.data.size(), 16 * sizeof(float));
  for (int i = 0; i < 16; ++i) {
    float v = 0;
    std::memcpy(&v, y.data.data() + i * sizeof(float), sizeof(float));
    EXPECT_EQ(v, 2 * (x[i] + 1)) << i;
  }
  auto stats = (*repo->FindReady("a_pipeline", ""))->stats.Snapshot("a_pipeline", "1");
  EXPECT_EQ(stats.inference_stats.success.count, 1u);
  auto step_stats = (*repo->FindReady("double", ""))->stats.Snapshot("double", "1");
  EXPECT_EQ(step_stats.inference_stats.success.count, 1u);
}

TEST_F(EnsembleRepositoryTest, AFailingStepFailsTheRequestNamingTheStep) {
  auto repo = Make();
  ASSERT_TRUE(repo->LoadStartupModels({}).ok());
  fail_step_ = "double";
  auto result = Run(*repo, std::vector<float>(16, 1.0f));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(result.status().message(),
            "ensemble 'a_pipeline' step 2 (model 'double'): injected failure");
  auto stats = (*repo->FindReady("a_pipeline", ""))->stats.Snapshot("a_pipeline", "1");
  EXPECT_EQ(stats.inference_stats.fail.count, 1u);
  EXPECT_EQ((*repo->FindReady("a_pipeline", ""))->scheduler->Pending(), 0u);
}

TEST_F(EnsembleRepositoryTest, MissingStepModelMakesItUnavailableWithTheReason) {
  std::string config = kPipeline;
  config.replace(config.find("\"double\""), 8, "\"triple\"");
  AddEnsemble("b_broken", config);
  auto repo = Make();
  ASSERT_TRUE(repo->LoadStartupModels({}).ok());
  EXPECT_FALSE(repo->AllReady());
  EXPECT_TRUE(repo->FindReady("a_pipeline", "").ok());  // the others still serve
  const auto index = repo->Index(false);
  const server::RepositoryEntry* e = Entry(index, "b_broken");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->state, ModelState::kUnavailable);
  EXPECT_NE(e->reason.find("ensemble 'b_broken' step 2 (model 'triple'): unknown model 'triple'"),
            std::string::npos)
      << e->reason;
  auto found = repo->FindReady("b_broken", "");
  EXPECT_EQ(found.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(found.status().message().find("triple"), std::string::npos)
      << found.status().ToString();
}

// An ensemble loaded with a load request's config and files: the steps that config names
// are loaded first, whatever the folder's config.pbtxt says (here it does not parse).
TEST_F(EnsembleRepositoryTest, ALoadsConfigNamesTheStepsToLoad) {
  repo_.WriteConfig("a_pipeline", "not a config");
  auto repo = Make(ControlMode::kExplicit);
  LoadOverride load;
  load.config_json = R"({
    "platform": "ensemble", "max_batch_size": 8,
    "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [16]}],
    "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [16]}],
    "ensemble_scheduling": {"step": [
      {"model_name": "add_one", "model_version": -1,
       "input_map": {"INPUT0": "X"}, "output_map": {"OUTPUT0": "t"}},
      {"model_name": "double", "model_version": -1,
       "input_map": {"INPUT0": "t"}, "output_map": {"OUTPUT0": "Y"}}]}
  })";
  load.files["1/.keep"] = "";
  ASSERT_TRUE(repo->Load("a_pipeline", load).ok());
  EXPECT_TRUE(Ready(*repo, "add_one", false));
  EXPECT_TRUE(Ready(*repo, "double", false));
  auto result = Run(*repo, std::vector<float>(16, 1.0f));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  float y = 0;
  std::memcpy(&y, result->outputs[0].data.data(), sizeof y);
  EXPECT_EQ(y, 4.0f);  // (1 + 1) * 2

  // A step's reload re-validates it from the config it was loaded with.
  ASSERT_TRUE(repo->Load("double").ok());
  EXPECT_TRUE(Ready(*repo, "a_pipeline", false));
  // unload_dependents takes the steps its load brought in.
  ASSERT_TRUE(repo->Unload("a_pipeline", /*unload_dependents=*/true).ok());
  EXPECT_FALSE(Ready(*repo, "add_one", false));
}

TEST_F(EnsembleRepositoryTest, EnsembleNeedsAVersionFolder) {
  repo_.WriteConfig("c_no_version", kPipeline);
  auto repo = Make();
  ASSERT_TRUE(repo->LoadStartupModels({}).ok());
  const auto index = repo->Index(false);
  const server::RepositoryEntry* e = Entry(index, "c_no_version");
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->reason.find("an ensemble needs an empty one, e.g. c_no_version/1/"),
            std::string::npos)
      << e->reason;
}

TEST_F(EnsembleRepositoryTest, ExplicitLoadBringsItsStepsAndFollowsThem) {
  auto repo = Make(ControlMode::kExplicit);
  ASSERT_TRUE(repo->LoadStartupModels({}).ok());
  EXPECT_TRUE(repo->Index(true).empty());
  ASSERT_TRUE(repo->Load("a_pipeline").ok());
  EXPECT_TRUE(Ready(*repo, "add_one", false));
  EXPECT_TRUE(Ready(*repo, "double", false));
  EXPECT_TRUE(Ready(*repo, "a_pipeline", false));

  ASSERT_TRUE(repo->Unload("double").ok());
  EXPECT_FALSE(Ready(*repo, "a_pipeline", true));
  EXPECT_FALSE(repo->IsReady("double", "").ok());  // not brought back by the ensemble
  const auto index = repo->Index(false);
  const server::RepositoryEntry* e = Entry(index, "a_pipeline");
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->reason.find("step 2 (model 'double')"), std::string::npos) << e->reason;

  ASSERT_TRUE(repo->Load("double").ok());
  EXPECT_TRUE(Ready(*repo, "a_pipeline", false));
  EXPECT_TRUE(Run(*repo, std::vector<float>(16, 0.5f)).ok());

  // A reload of a step model keeps the ensemble READY (it is re-validated).
  ASSERT_TRUE(repo->Load("add_one").ok());
  EXPECT_TRUE(Ready(*repo, "a_pipeline", false));
}

// A step that failed to load is loaded again by the ensemble's next load, once repaired:
// its old failure was quoted for ever (the step counted as loaded), and only a load of the
// step itself, which made it the user's, brought it back.
TEST_F(EnsembleRepositoryTest, TheEnsemblesNextLoadRetriesAStepThatFailedToLoad) {
  const std::filesystem::path file = repo_.root() / "double" / "1" / "model.onnx";
  std::string good;
  {
    std::ifstream in(file, std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(file, std::ios::binary | std::ios::trunc) << "not an ONNX model";
  auto repo = Make(ControlMode::kExplicit);
  // The step's broken file fails the ensemble's load as it fails the step's: not worth a
  // retry until it changes (INVALID_ARGUMENT, as Triton; not UNAVAILABLE).
  const Status failed = repo->Load("a_pipeline");
  EXPECT_EQ(failed.code(), StatusCode::kInvalidArgument) << failed.ToString();
  EXPECT_NE(failed.message().find("model 'double'"), std::string::npos) << failed.ToString();
  EXPECT_FALSE(Ready(*repo, "double", true));

  std::ofstream(file, std::ios::binary | std::ios::trunc) << good;
  const Status again = repo->Load("a_pipeline");
  ASSERT_TRUE(again.ok()) << again.ToString();
  EXPECT_TRUE(Ready(*repo, "double", false));
  EXPECT_TRUE(Run(*repo, std::vector<float>(16, 0.5f)).ok());
  // Still the ensemble's step: unloading it with its dependents takes the step too.
  ASSERT_TRUE(repo->Unload("a_pipeline", /*unload_dependents=*/true).ok());
  EXPECT_FALSE(repo->IsReady("double", "").ok());
}

// A step refused for memory may load when tried again: its ensemble's load is not a 400
// (INVALID_ARGUMENT, not worth a retry) but keeps a retryable code.
TEST_F(EnsembleRepositoryTest, AStepThatMayPassWhenTriedAgainKeepsTheEnsemblesLoadRetryable) {
  out_of_memory_step_ = "double";
  auto repo = Make(ControlMode::kExplicit);
  const Status failed = repo->Load("a_pipeline");
  EXPECT_EQ(failed.code(), StatusCode::kUnavailable) << failed.ToString();
  out_of_memory_step_.clear();
  const Status again = repo->Load("a_pipeline");
  EXPECT_TRUE(again.ok()) << again.ToString();
}

// An ensemble and its steps that appear in one poll: the ensemble's load brings the steps,
// and the poll loaded each a second time after it (a second admission, twice the memory).
TEST_F(EnsembleRepositoryTest, APollLoadsAnEnsemblesNewStepsOnce) {
  std::map<std::string, int> created;  // instances, by model folder
  backend_ = std::make_unique<WrappingBackend>(
      std::move(backend_),
      [&created](const std::filesystem::path& file, std::unique_ptr<backend::ModelInstance> real) {
        ++created[file.parent_path().parent_path().filename().string()];
        return real;
      });
  auto repo = Make(ControlMode::kPoll);
  repo->Poll();
  EXPECT_TRUE(Ready(*repo, "a_pipeline", false));
  EXPECT_EQ(created["add_one"], 1);
  EXPECT_EQ(created["double"], 1);
}

TEST_F(EnsembleRepositoryTest, AStepModelThatFailsToReloadKeepsServingAndSoDoesTheEnsemble) {
  auto repo = Make(ControlMode::kExplicit);
  ASSERT_TRUE(repo->Load("a_pipeline").ok());
  // add_one's config now says FP64, which contradicts its model file: the reload fails.
  std::string changed = kAddOne;
  changed.replace(changed.find("TYPE_FP32"), 9, "TYPE_FP64");
  repo_.WriteConfig("add_one", changed);
  const Status reload = repo->Load("add_one");
  EXPECT_EQ(reload.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(reload.message().find("the previous load keeps serving"), std::string::npos)
      << reload.message();
  // The previous add_one serves on, and the ensemble with it (issue 12).
  EXPECT_TRUE(Ready(*repo, "add_one", false));
  EXPECT_TRUE(Ready(*repo, "a_pipeline", false));
  EXPECT_TRUE(Run(*repo, std::vector<float>(16, 0.5f)).ok());
  const auto index = repo->Index(false);
  const server::RepositoryEntry* e = Entry(index, "add_one");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->state, server::ModelState::kReady);
  EXPECT_NE(e->reason.find("TYPE_FP64"), std::string::npos) << e->reason;
}

// A step model's reload re-validates the ensemble from the config it was loaded with: an
// edit of the ensemble's own config.pbtxt, half written or whole, waits for the ensemble's
// own load (it took a broken one down before, and published a valid one unasked).
TEST_F(EnsembleRepositoryTest, AStepReloadLeavesTheEnsemblesEditedConfigForItsOwnLoad) {
  auto repo = Make(ControlMode::kExplicit);
  ASSERT_TRUE(repo->Load("a_pipeline").ok());
  repo_.WriteConfig("a_pipeline", std::string(kPipeline) + "this is being edited {");
  ASSERT_TRUE(repo->Load("add_one").ok());
  EXPECT_TRUE(Ready(*repo, "a_pipeline", false));
  EXPECT_TRUE(Run(*repo, std::vector<float>(16, 0.5f)).ok());
  const auto index = repo->Index(false);
  const server::RepositoryEntry* e = Entry(index, "a_pipeline");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->state, server::ModelState::kReady);
  EXPECT_EQ(e->reason, "");

  // A valid edit (a second step dropped) is not published by a step's reload either.
  repo_.WriteConfig("a_pipeline", R"(
platform: "ensemble"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 16 ] } ]
ensemble_scheduling {
  step [
    { model_name: "double" model_version: -1
      input_map { key: "INPUT0" value: "X" } output_map { key: "OUTPUT0" value: "Y" } }
  ]
}
)");
  ASSERT_TRUE(repo->Load("double").ok());
  const auto first = [&] {
    auto y = Run(*repo, std::vector<float>(16, 0.5f));
    float v = -1;
    if (y.ok() && !y->outputs.empty() && y->outputs[0].data.size() >= sizeof(float)) {
      std::memcpy(&v, y->outputs[0].data.data(), sizeof(float));
    }
    return v;
  };
  EXPECT_EQ(first(), 3.0f);  // still (0.5 + 1) * 2: both steps ran

  // Its own load publishes the edit.
  ASSERT_TRUE(repo->Load("a_pipeline").ok());
  EXPECT_EQ(first(), 1.0f);  // 0.5 * 2

  // And a step unloaded still takes it down, from the config it serves with.
  ASSERT_TRUE(repo->Unload("double").ok());
  EXPECT_FALSE(Ready(*repo, "a_pipeline", true));
}

// Triton's unload_dependents: the steps an ensemble's load brought in go with it, but not a
// step the user loaded, nor one another loaded ensemble still uses.
TEST_F(EnsembleRepositoryTest, UnloadDependentsTakesTheStepsItsLoadBroughtIn) {
  AddEnsemble("b_pipeline", kPipeline);
  auto repo = Make(ControlMode::kExplicit);
  ASSERT_TRUE(repo->Load("a_pipeline").ok());
  ASSERT_TRUE(repo->Load("b_pipeline").ok());
  ASSERT_TRUE(repo->Unload("a_pipeline", /*unload_dependents=*/true).ok());
  EXPECT_TRUE(Ready(*repo, "add_one", false));  // b_pipeline still uses both
  EXPECT_TRUE(Ready(*repo, "double", false));
  EXPECT_TRUE(Ready(*repo, "b_pipeline", false));

  ASSERT_TRUE(repo->Load("double").ok());  // now loaded for itself too
  ASSERT_TRUE(repo->Unload("b_pipeline", /*unload_dependents=*/true).ok());
  EXPECT_EQ(repo->IsReady("add_one", "").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Ready(*repo, "double", false));

  // Without the parameter the steps stay.
  ASSERT_TRUE(repo->Load("a_pipeline").ok());
  ASSERT_TRUE(repo->Unload("a_pipeline").ok());
  EXPECT_TRUE(Ready(*repo, "add_one", false));
}

// --load-model a_pipeline --load-model add_one: add_one is the user's, although the ensemble
// (first) loaded it.
TEST_F(EnsembleRepositoryTest, AStartUpModelAnEnsembleLoadedFirstIsTheUsers) {
  auto repo = Make(ControlMode::kExplicit);
  ASSERT_TRUE(repo->LoadStartupModels({"a_pipeline", "add_one"}).ok());
  ASSERT_TRUE(Ready(*repo, "a_pipeline", false));
  ASSERT_TRUE(repo->Unload("a_pipeline", /*unload_dependents=*/true).ok());
  EXPECT_TRUE(Ready(*repo, "add_one", false));
  EXPECT_EQ(repo->IsReady("double", "").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace fastpath::repository
