#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <thread>

#include "fakes/as_nobody.h"
#include "fakes/temp_repository.h"
#include "fastpath/onnxruntime/ort_backend.h"
#include "fastpath/server/server_impl.h"

namespace fastpath::server {
namespace {

using testing::kSimpleConfig;
using testing::TempRepository;

Tensor Int32Tensor(const std::string& name, std::vector<int64_t> shape,
                   const std::vector<int32_t>& v) {
  Tensor t{name, DataType::kInt32, std::move(shape), {}};
  t.data.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int32_t));
  return t;
}

std::vector<int32_t> Int32Values(const Tensor& t) {
  std::vector<int32_t> v(t.data.size() / sizeof(int32_t));
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

// A server on the repository at `root`, with ORT's backend and the default options.
StatusOr<std::unique_ptr<Server>> ServeRepository(const std::filesystem::path& root) {
  ServerOptions options;
  options.repository.roots = {root};
  FASTPATH_ASSIGN_OR_RETURN(auto backend, onnxruntime::CreateOrtBackend());
  return Server::Create(options, std::move(backend));
}

// Sends `request` and waits until it runs: its callback, which runs on the instance's
// thread, holds the one instance until Release(), so what is sent next waits in the queue.
class HeldInstance {
 public:
  HeldInstance(Server& server, InferRequest request) {
    server.InferAsync(std::move(request), [this](StatusOr<InferResponse> r) {
      running_.set_value();
      released_.wait();
      ok_.set_value(r.ok());
    });
    running_.get_future().wait();
  }
  // Lets the held request finish; true when it was answered OK.
  bool Release() {
    release_.set_value();
    return ok_.get_future().get();
  }

 private:
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
  std::promise<void> running_;
  std::promise<bool> ok_;
};

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_.AddVersion("simple", 1, "simple");
    repo_.WriteConfig("simple", kSimpleConfig);
    auto server = ServeRepository(repo_.root());
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }

  StatusOr<InferResponse> Infer(InferRequest request) {
    std::promise<StatusOr<InferResponse>> p;
    server_->InferAsync(std::move(request),
                        [&](StatusOr<InferResponse> r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  }

  InferRequest SimpleRequest(int batch = 1) {
    InferRequest r;
    r.model_name = "simple";
    r.id = "req-7";
    std::vector<int32_t> a(16 * batch), b(16 * batch);
    for (int i = 0; i < 16 * batch; ++i) {
      a[i] = i;
      b[i] = 2 * i - 5;
    }
    r.inputs.push_back(Int32Tensor("INPUT0", {batch, 16}, a));
    r.inputs.push_back(Int32Tensor("INPUT1", {batch, 16}, b));
    return r;
  }

  TempRepository repo_{FASTPATH_TEST_MODELS_DIR};
  std::unique_ptr<Server> server_;
};

TEST_F(ServerTest, ReadyAndMetadata) {
  EXPECT_TRUE(server_->IsLive());
  EXPECT_TRUE(server_->IsReady());
  auto meta = server_->GetModelMetadata("simple", "");
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->platform, "onnxruntime_onnx");
  EXPECT_EQ(meta->versions, std::vector<std::string>{"1"});
  ASSERT_EQ(meta->inputs.size(), 2u);
  EXPECT_EQ(meta->inputs[0].shape, (std::vector<int64_t>{-1, 16}));
  EXPECT_EQ(meta->inputs[0].dtype, DataType::kInt32);
  EXPECT_EQ(server_->GetModelMetadata("nope", "").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(*server_->IsModelReady("simple", "1"));
  EXPECT_EQ(server_->IsModelReady("simple", "2").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(server_->GetModelConfig("simple", "")->max_batch_size(), 8);
}

// Creates a server on `root` as a user other than root (whom permissions do not bind);
// exits 0 when it is refused for a repository it cannot list.
[[noreturn]] void CreateAsNobody(const std::filesystem::path& root) {
  testing::BecomeNobody();
  ServerOptions options;
  options.repository.roots = {root};
  auto created = Server::Create(options, nullptr);  // refused before it needs a backend
  if (created.ok() ||
      created.status().message().find("cannot be listed: Permission denied") == std::string::npos) {
    std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
    std::_Exit(1);
  }
  std::_Exit(0);
}

// A repository the server may not list (a volume's owner or mode) is refused at start, as
// Triton refuses it. It served nothing and said READY, with no line in the log.
TEST(ServerRepositoryTest, ARepositoryThatCannotBeListedIsRefused) {
  if (!testing::CanRunAsNobody()) GTEST_SKIP() << "cannot run a child as another user here";
  testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  repo.AddVersion("simple", 1, "simple");
  std::filesystem::permissions(repo.root(), std::filesystem::perms::owner_exec);
  EXPECT_EXIT(CreateAsNobody(repo.root()), ::testing::ExitedWithCode(0), "");
  std::filesystem::permissions(repo.root(), std::filesystem::perms::owner_all);
}

// As in Triton, a version is read as an integer: "01" is version 1, over every call, and a
// version that is not a number is refused as one (not "unknown").
TEST_F(ServerTest, AVersionIsANumber) {
  EXPECT_TRUE(*server_->IsModelReady("simple", "01"));
  EXPECT_TRUE(server_->GetModelMetadata("simple", "001").ok());
  EXPECT_TRUE(server_->GetModelConfig("simple", "01").ok());
  auto stats = server_->GetModelStatistics("simple", "01");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  ASSERT_EQ(stats->size(), 1u);
  EXPECT_EQ((*stats)[0].version, "1");
  InferRequest request = SimpleRequest();
  request.model_version = "01";
  auto r = Infer(std::move(request));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->model_version, "1");
  for (const char* bad : {"-1", "one", "1.0"}) {
    auto ready = server_->IsModelReady("simple", bad);
    EXPECT_EQ(ready.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(ready.status().message().find("is not a version number"), std::string::npos) << bad;
    InferRequest refused = SimpleRequest();
    refused.model_version = bad;
    EXPECT_EQ(Infer(std::move(refused)).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(server_->IsModelReady("simple", "02").status().code(), StatusCode::kNotFound);
}

TEST_F(ServerTest, InferComputesExactOutputs) {
  auto r = Infer(SimpleRequest(2));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->id, "req-7");
  EXPECT_EQ(r->model_version, "1");
  ASSERT_EQ(r->outputs.size(), 2u);
  EXPECT_EQ(r->outputs[0].name, "OUTPUT0");
  EXPECT_EQ(r->outputs[0].shape, (std::vector<int64_t>{2, 16}));
  auto sum = Int32Values(r->outputs[0]);
  auto diff = Int32Values(r->outputs[1]);
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(sum[i], 3 * i - 5);
    EXPECT_EQ(diff[i], 5 - i);
  }
}

TEST_F(ServerTest, RequestedOutputsOnlyInTheirOrder) {
  auto req = SimpleRequest();
  req.outputs = {{"OUTPUT1", {}}};
  auto r = Infer(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].name, "OUTPUT1");
  req.outputs = {{"NOPE", {}}};
  auto bad = Infer(req);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("NOPE"), std::string::npos);
}

TEST_F(ServerTest, BadRequestsNameWhatIsWrongAndDoNotDisturbTheNext) {
  auto missing = SimpleRequest();
  missing.inputs.pop_back();
  EXPECT_NE(Infer(missing).status().message().find("INPUT1"), std::string::npos);

  auto wrong_type = SimpleRequest();
  wrong_type.inputs[0].dtype = DataType::kFp32;
  EXPECT_EQ(Infer(wrong_type).status().code(), StatusCode::kInvalidArgument);

  auto wrong_shape = SimpleRequest();
  wrong_shape.inputs[0].shape = {1, 15};
  EXPECT_EQ(Infer(wrong_shape).status().code(), StatusCode::kInvalidArgument);

  auto huge = SimpleRequest();
  huge.inputs[0].shape = {1, 1000000000000};
  EXPECT_NE(Infer(huge).status().code(), StatusCode::kOk);

  auto too_big_batch = SimpleRequest(9);
  EXPECT_EQ(Infer(too_big_batch).status().code(), StatusCode::kInvalidArgument);

  auto unknown_model = SimpleRequest();
  unknown_model.model_name = "nope";
  EXPECT_EQ(Infer(unknown_model).status().code(), StatusCode::kNotFound);

  auto unknown_version = SimpleRequest();
  unknown_version.model_version = "3";
  EXPECT_EQ(Infer(unknown_version).status().code(), StatusCode::kNotFound);

  EXPECT_TRUE(Infer(SimpleRequest()).ok());
}

TEST_F(ServerTest, StatisticsCountSuccessesAndFailures) {
  ASSERT_TRUE(Infer(SimpleRequest()).ok());
  ASSERT_TRUE(Infer(SimpleRequest(3)).ok());
  auto unknown = SimpleRequest();
  unknown.outputs = {{"NOPE", {}}};
  ASSERT_FALSE(Infer(unknown).ok());
  auto stats = server_->GetModelStatistics("simple", "");
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->size(), 1u);
  EXPECT_EQ((*stats)[0].inference_count, 4u);  // batch elements
  EXPECT_EQ((*stats)[0].execution_count, 2u);
  EXPECT_EQ((*stats)[0].inference_stats.success.count, 2u);  // requests
  EXPECT_EQ((*stats)[0].inference_stats.fail.count, 1u);
  // A request the config refuses is Triton's reason OTHER; histograms see the successes.
  EXPECT_EQ((*stats)[0].failures[static_cast<size_t>(FailureReason::kOther)], 1u);
  EXPECT_EQ((*stats)[0].request_latency.count, 2u);
  EXPECT_EQ((*stats)[0].queue_latency.count, 2u);
  EXPECT_EQ(server_->GetModelStatistics("nope", "").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(server_->GetModelStatistics("", "")->size(), 1u);
}

// An output whose config reshape does not fit what the model returned: the client got a 500
// from the front end while the statistics counted a success (reshaped after the count). It
// now fails in the scheduler, as the model's (BACKEND), batched or not; a fitting one passes.
TEST(ServerReshapeTest, AnOutputThatDoesNotFitItsConfigIsTheModelsFailureAndCountedSo) {
  testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  for (const std::string name : {"pooled", "batched"}) {
    repo.AddVersion(name, 1, "identity_fp32");
    repo.WriteConfig(name, "name: \"" + name + R"(" platform: "onnxruntime_onnx" max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape: { shape: [ 4 ] } } ]
)" + (name == "batched" ? "dynamic_batching { }" : ""));
  }
  auto created = ServeRepository(repo.root());
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Server& server = **created;
  auto infer = [&](const std::string& model, int64_t elements) {
    InferRequest r;
    r.model_name = model;
    r.inputs.push_back(Tensor{"INPUT0",
                              DataType::kFp32,
                              {1, elements},
                              std::string(static_cast<size_t>(elements) * 4, '\0')});
    std::promise<StatusOr<InferResponse>> p;
    server.InferAsync(std::move(r), [&](StatusOr<InferResponse> a) { p.set_value(std::move(a)); });
    return p.get_future().get();
  };
  for (const std::string model : {"pooled", "batched"}) {
    const StatusOr<InferResponse> fits = infer(model, 4);
    ASSERT_TRUE(fits.ok()) << model << ": " << fits.status().ToString();
    ASSERT_EQ(fits->outputs.size(), 1u) << model;
    EXPECT_EQ(fits->outputs[0].shape, (std::vector<int64_t>{1, 2, 2})) << model;
    const StatusOr<InferResponse> short_one = infer(model, 3);
    ASSERT_FALSE(short_one.ok()) << model;
    EXPECT_EQ(short_one.status().code(), StatusCode::kInternal) << model;
    EXPECT_EQ(short_one.status().message(),
              "output 'OUTPUT0' as the model returned it: shape [1,3] does not fit reshape [4]")
        << model;
    auto stats = server.GetModelStatistics(model, "");
    ASSERT_TRUE(stats.ok());
    EXPECT_EQ((*stats)[0].inference_stats.success.count, 1u) << model;
    EXPECT_EQ((*stats)[0].inference_stats.fail.count, 1u) << model;
    EXPECT_EQ((*stats)[0].failures[static_cast<size_t>(FailureReason::kBackend)], 1u) << model;
  }
}

// An ensemble's own output reshape: its clients see the output's `dims`, as its metadata
// says (a second reader found it dropped when the schedulers took the reshape over).
TEST(ServerReshapeTest, AnEnsemblesOutputReachesClientsInItsDims) {
  testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  repo.AddVersion("flat", 1, "identity_fp32");
  repo.WriteConfig("flat", R"(name: "flat" platform: "onnxruntime_onnx" max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ])");
  std::filesystem::create_directories(repo.root() / "square" / "1");
  repo.WriteConfig("square", R"(name: "square" platform: "ensemble" max_batch_size: 4
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape: { shape: [ 4 ] } } ]
ensemble_scheduling { step [ { model_name: "flat" model_version: -1
  input_map { key: "INPUT0" value: "X" } output_map { key: "OUTPUT0" value: "Y" } } ] })");
  auto created = ServeRepository(repo.root());
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  InferRequest r;
  r.model_name = "square";
  r.inputs.push_back(Tensor{"X", DataType::kFp32, {1, 4}, std::string(16, '\0')});
  std::promise<StatusOr<InferResponse>> p;
  (*created)->InferAsync(std::move(r),
                         [&](StatusOr<InferResponse> a) { p.set_value(std::move(a)); });
  const StatusOr<InferResponse> answer = p.get_future().get();
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  ASSERT_EQ(answer->outputs.size(), 1u);
  EXPECT_EQ(answer->outputs[0].shape, (std::vector<int64_t>{1, 2, 2}));
}

// A step's scalar output (Triton's dims [1] with reshape []) reaches the next step as its
// dims say, [batch, 1], which is what the ensemble's load checked. It came as [batch], and
// every request of a READY ensemble failed with a rank mismatch.
TEST(ServerReshapeTest, AStepsScalarOutputReachesTheNextStepInItsDims) {
  testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  repo.AddVersion("scalar", 1, "scalar_batched");  // X [batch] -> Y [batch]: completed
  repo.AddVersion("flat", 1, "identity_fp32");
  repo.WriteConfig("flat", R"(name: "flat" platform: "onnxruntime_onnx" max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ])");
  std::filesystem::create_directories(repo.root() / "chain" / "1");
  repo.WriteConfig("chain", R"(name: "chain" platform: "ensemble" max_batch_size: 4
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
ensemble_scheduling { step [
  { model_name: "scalar" model_version: -1
    input_map { key: "X" value: "X" } output_map { key: "Y" value: "mid" } },
  { model_name: "flat" model_version: -1
    input_map { key: "INPUT0" value: "mid" } output_map { key: "OUTPUT0" value: "OUT" } } ] })");
  auto created = ServeRepository(repo.root());
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  ASSERT_TRUE((*created)->IsReady());
  InferRequest r;
  r.model_name = "chain";
  r.inputs.push_back(Tensor{"X", DataType::kFp32, {2, 1}, std::string(8, '\0')});
  std::promise<StatusOr<InferResponse>> p;
  (*created)->InferAsync(std::move(r),
                         [&](StatusOr<InferResponse> a) { p.set_value(std::move(a)); });
  const StatusOr<InferResponse> answer = p.get_future().get();
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  ASSERT_EQ(answer->outputs.size(), 1u);
  EXPECT_EQ(answer->outputs[0].shape, (std::vector<int64_t>{2, 1}));
}

// The pending count (nv_inference_pending_request_count) is the scheduler's queued plus
// running requests. The first request's callback holds its instance (it runs on the
// instance's thread), so the second one waits in the queue: a state, not a race.
TEST_F(ServerTest, PendingCountsQueuedAndRunningRequests) {
  auto pending = [&] {
    auto stats = server_->GetModelStatistics("simple", "");
    EXPECT_TRUE(stats.ok());
    return stats.ok() && !stats->empty() ? (*stats)[0].pending_request_count : ~uint64_t{0};
  };
  EXPECT_EQ(pending(), 0u);
  HeldInstance first(*server_, SimpleRequest());
  EXPECT_EQ(pending(), 1u);
  std::promise<bool> second_ok;
  server_->InferAsync(SimpleRequest(),
                      [&](StatusOr<InferResponse> r) { second_ok.set_value(r.ok()); });
  EXPECT_EQ(pending(), 2u);
  EXPECT_TRUE(first.Release());
  EXPECT_TRUE(second_ok.get_future().get());
  // The worker counts a job finished just after its callback returns: wait for that state.
  for (int i = 0; i < 5000 && pending() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(pending(), 0u);
}

TEST_F(ServerTest, ModelControlIsRefusedOutsideExplicitMode) {
  EXPECT_EQ(server_->LoadModel("simple").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(server_->UnloadModel("simple").code(), StatusCode::kFailedPrecondition);
}

// `serve` opens the server and its front ends before the models load (under a thread
// limit the models that do not fit fail, not the server's own threads). Until the start
// ends, readiness is false and a request or a model-control call is answered UNAVAILABLE
// (retryable), not 404 for a model not loaded yet; then it serves.
TEST(ServerStartupTest, UntilTheStartEndsRequestsAndModelControlAreUnavailable) {
  TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  repo.AddVersion("simple", 1, "simple");
  repo.WriteConfig("simple", kSimpleConfig);
  ServerOptions options;
  options.repository.roots = {repo.root()};
  options.repository.mode = repository::ControlMode::kExplicit;
  options.startup_models = {"simple"};
  auto backend = onnxruntime::CreateOrtBackend();
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  auto opened = Server::Open(options, std::move(backend).value());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Server& server = **opened;
  const auto infer = [&] {
    std::promise<StatusOr<InferResponse>> p;
    InferRequest request;
    request.model_name = "simple";
    request.inputs.push_back(Int32Tensor("INPUT0", {1, 16}, std::vector<int32_t>(16, 2)));
    request.inputs.push_back(Int32Tensor("INPUT1", {1, 16}, std::vector<int32_t>(16, 1)));
    server.InferAsync(std::move(request),
                      [&](StatusOr<InferResponse> r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  };
  const auto expect_starting = [&](const char* step) {
    SCOPED_TRACE(step);
    EXPECT_TRUE(server.IsLive());
    EXPECT_FALSE(server.IsReady());
    const StatusOr<InferResponse> r = infer();
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
    EXPECT_NE(r.status().message().find("the server is starting"), std::string::npos)
        << r.status().ToString();
    EXPECT_EQ(server.LoadModel("simple").code(), StatusCode::kUnavailable);
    EXPECT_EQ(server.UnloadModel("simple").code(), StatusCode::kUnavailable);
  };
  expect_starting("opened");
  ASSERT_TRUE(server.LoadStartupModels().ok());
  expect_starting("loaded");
  EXPECT_FALSE(*server.IsModelReady("simple", "1"));

  server.EndStartup();
  EXPECT_TRUE(server.IsReady());
  EXPECT_TRUE(*server.IsModelReady("simple", "1"));
  const StatusOr<InferResponse> r = infer();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Int32Values(r->outputs[0]), std::vector<int32_t>(16, 3));
  EXPECT_TRUE(server.UnloadModel("simple").ok());
}

TEST_F(ServerTest, ShutdownAnswersInFlightAndRefusesNew) {
  constexpr int kRequests = 20;
  std::vector<std::promise<StatusOr<InferResponse>>> results(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    server_->InferAsync(SimpleRequest(), [&results, i](StatusOr<InferResponse> r) {
      results[i].set_value(std::move(r));
    });
  }
  EXPECT_EQ(server_->Shutdown(std::chrono::seconds(30)).outlived, 0u);
  for (auto& r : results) EXPECT_TRUE(r.get_future().get().ok());
  EXPECT_FALSE(server_->IsReady());
  EXPECT_EQ(Infer(SimpleRequest()).status().code(), StatusCode::kUnavailable);
}

// The grace period bounds the drain: what has not started when it ends is answered
// UNAVAILABLE (retryable elsewhere), and only the runs in progress hold the exit. A deep
// queue used to run whole after the grace period, past Kubernetes' termination grace,
// which then killed the process with every answer still owed. The first request's
// callback holds the one instance, so the others wait in the queue.
void ExpectTheGracePeriodBoundsTheDrain(Server& server, InferRequest request) {
  HeldInstance first(server, request);
  constexpr int kQueued = 3;
  std::vector<std::promise<StatusOr<InferResponse>>> queued(kQueued);
  for (int i = 0; i < kQueued; ++i) {
    server.InferAsync(
        request, [&queued, i](StatusOr<InferResponse> r) { queued[i].set_value(std::move(r)); });
  }
  auto shutdown = std::async(std::launch::async,
                             [&] { return server.Shutdown(std::chrono::milliseconds(100)); });
  for (auto& q : queued) {
    const StatusOr<InferResponse> r = q.get_future().get();  // before the first run ends
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
    EXPECT_NE(r.status().message().find("had not started when the grace period ended"),
              std::string::npos)
        << r.status().message();
  }
  EXPECT_TRUE(first.Release());  // what ran is answered
  const Server::DrainResult drained = shutdown.get();
  EXPECT_EQ(drained.outlived, 1u + kQueued);
  EXPECT_EQ(drained.refused, static_cast<size_t>(kQueued));
}

TEST_F(ServerTest, TheGracePeriodBoundsTheDrain) {
  ExpectTheGracePeriodBoundsTheDrain(*server_, SimpleRequest());
}

// A request whose client goes away while it waits in the queue never reaches the
// model: it is answered CANCELLED and counted as Triton's failure reason CANCELED, and
// the request behind it is answered as usual. The first request's callback holds the
// one instance (it runs on the instance's thread), so the others wait in the queue.
void ExpectCancelledWhileQueuedNeverRuns(Server& server, InferRequest request) {
  HeldInstance first(server, request);

  auto gone = std::make_shared<std::atomic<bool>>(false);
  InferRequest cancelled = request;
  cancelled.id = "gone";
  cancelled.cancelled = gone;
  std::promise<StatusOr<InferResponse>> cancelled_result;
  server.InferAsync(cancelled,
                    [&](StatusOr<InferResponse> r) { cancelled_result.set_value(std::move(r)); });
  gone->store(true);  // the front end saw the client go away
  InferRequest next = request;
  next.id = "next";
  std::promise<StatusOr<InferResponse>> next_result;
  server.InferAsync(next, [&](StatusOr<InferResponse> r) { next_result.set_value(std::move(r)); });
  EXPECT_TRUE(first.Release());
  const StatusOr<InferResponse> dropped = cancelled_result.get_future().get();
  EXPECT_EQ(dropped.status().code(), StatusCode::kCancelled) << dropped.status().ToString();
  EXPECT_NE(dropped.status().message().find("never reached the model"), std::string::npos)
      << dropped.status().message();
  const StatusOr<InferResponse> answered = next_result.get_future().get();
  ASSERT_TRUE(answered.ok()) << answered.status().ToString();
  EXPECT_EQ(answered->id, "next");
  ASSERT_EQ(answered->outputs.size(), 2u);
  auto sum = Int32Values(answered->outputs[0]);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(sum[i], 3 * i - 5);

  auto stats = server.GetModelStatistics("simple", "");
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->size(), 1u);
  EXPECT_EQ((*stats)[0].execution_count, 2u) << "the cancelled request ran";
  EXPECT_EQ((*stats)[0].inference_stats.success.count, 2u);
  EXPECT_EQ((*stats)[0].inference_stats.fail.count, 1u);
  EXPECT_EQ((*stats)[0].failures[static_cast<size_t>(FailureReason::kCanceled)], 1u);
}

TEST_F(ServerTest, CancelledWhileQueuedNeverRunsAndIsCounted) {
  ExpectCancelledWhileQueuedNeverRuns(*server_, SimpleRequest());
}

TEST_F(ServerTest, CancelledWhileQueuedInTheDynamicBatcherNeverRunsAndIsCounted) {
  server_.reset();
  repo_.WriteConfig("simple", std::string(kSimpleConfig) + "dynamic_batching { }\n");
  auto server = ServeRepository(repo_.root());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  server_ = std::move(server).value();
  ExpectCancelledWhileQueuedNeverRuns(*server_, SimpleRequest());
}

}  // namespace
}  // namespace fastpath::server

namespace fastpath::server {
namespace {

// A model with no config.pbtxt batches what queues while its instance is busy, as Triton's
// ONNX Runtime backend turns its dynamic batcher on for a model that batches: requests
// queued behind the held one run together, and each gets its own rows back.
TEST(ServerBatchingTest, AModelWithNoConfigBatchesWhatQueuesWhileItsInstanceIsBusy) {
  testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  repo.AddVersion("simple", 1, "simple");  // no config.pbtxt
  auto created = ServeRepository(repo.root());
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Server& server = **created;
  auto config = server.GetModelConfig("simple", "");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->max_batch_size(), config::kDefaultMaxBatchSize);
  EXPECT_TRUE(config->has_dynamic_batching());

  auto request = [](int32_t base) {
    InferRequest r;
    r.model_name = "simple";
    std::vector<int32_t> a(16, base), b(16);
    for (int i = 0; i < 16; ++i) b[i] = i;
    r.inputs.push_back(Int32Tensor("INPUT0", {1, 16}, a));
    r.inputs.push_back(Int32Tensor("INPUT1", {1, 16}, b));
    return r;
  };
  HeldInstance first(server, request(0));
  constexpr int kQueued = 3;
  std::vector<std::promise<StatusOr<InferResponse>>> queued(kQueued);
  for (int i = 0; i < kQueued; ++i) {
    server.InferAsync(request(100 * (i + 1)), [&queued, i](StatusOr<InferResponse> r) {
      queued[i].set_value(std::move(r));
    });
  }
  EXPECT_TRUE(first.Release());
  for (int i = 0; i < kQueued; ++i) {
    const StatusOr<InferResponse> r = queued[i].get_future().get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_FALSE(r->outputs.empty());
    EXPECT_EQ(r->outputs[0].shape, (std::vector<int64_t>{1, 16}));
    const std::vector<int32_t> sum = Int32Values(r->outputs[0]);
    for (int j = 0; j < 16; ++j) EXPECT_EQ(sum[j], 100 * (i + 1) + j) << "request " << i;
  }
  auto stats = server.GetModelStatistics("simple", "");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].inference_count, 1u + kQueued);
  // The first queued request may take the instance while the held answer is delivered; the
  // two behind it wait for that run and share the next.
  EXPECT_LE((*stats)[0].execution_count, static_cast<uint64_t>(kQueued))
      << "no queued requests ran together";
}

// A request whose BOOL bytes are not 0 or 1 is refused alone, before it joins a batch: it was
// checked on the batch, which failed every request batched with it, and named an element of
// the batch, not of its own tensor.
TEST(ServerBatchingTest, ABadBoolRequestIsRefusedAloneAndItsBatchRuns) {
  testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  repo.AddVersion("flags", 1, "identity_bool");
  repo.WriteConfig("flags", R"(name: "flags" max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_BOOL dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_BOOL dims: [ -1 ] } ]
dynamic_batching { })");
  auto created = ServeRepository(repo.root());
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Server& server = **created;
  auto request = [](std::string bytes) {
    InferRequest r;
    r.model_name = "flags";
    const auto n = static_cast<int64_t>(bytes.size());
    r.inputs.push_back(Tensor{"INPUT0", DataType::kBool, {1, n}, std::move(bytes)});
    return r;
  };
  HeldInstance first(server, request(std::string("\x01\x00", 2)));
  std::promise<StatusOr<InferResponse>> good, bad;
  server.InferAsync(request(std::string("\x00\x01", 2)),
                    [&](StatusOr<InferResponse> r) { good.set_value(std::move(r)); });
  server.InferAsync(request(std::string("\x01\x00\x02", 3)),
                    [&](StatusOr<InferResponse> r) { bad.set_value(std::move(r)); });
  const StatusOr<InferResponse> refused = bad.get_future().get();  // before the batch runs
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "BOOL tensor 'INPUT0' element 2 is 2; BOOL elements must be 0 or 1");
  EXPECT_TRUE(first.Release());
  const StatusOr<InferResponse> answered = good.get_future().get();
  ASSERT_TRUE(answered.ok()) << answered.status().ToString();
  ASSERT_EQ(answered->outputs.size(), 1u);
  EXPECT_EQ(answered->outputs[0].data, std::string("\x00\x01", 2));
}

}  // namespace
}  // namespace fastpath::server
