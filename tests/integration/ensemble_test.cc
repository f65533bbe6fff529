// Ensembles (platform "ensemble") against the real binary: a two-step pipeline and a
// diamond-shaped graph built from tiny step models (add_one: x+1, double: 2x, and
// simple_fp32: sum and difference), over HTTP and gRPC; a failing step; metadata, config
// and statistics; and, in explicit mode, step models loaded with the ensemble and an
// ensemble that turns UNAVAILABLE when a step model goes.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "integration_fixture.h"

namespace fastpath::integration {
namespace {

constexpr const char* kAddOneConfig = R"(
name: "add_one"
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
)";

constexpr const char* kDoubleConfig = R"(
name: "double"
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
)";

// Y = double(add_one(X)) = 2x + 2. X takes any length; double only 16, so another length
// fails in step 2.
constexpr const char* kPipelineConfig = R"(
name: "pipeline"
platform: "ensemble"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "add_one"
      model_version: -1
      input_map { key: "INPUT0" value: "X" }
      output_map { key: "OUTPUT0" value: "x_plus_one" }
    },
    {
      model_name: "double"
      model_version: -1
      input_map { key: "INPUT0" value: "x_plus_one" }
      output_map { key: "OUTPUT0" value: "Y" }
    }
  ]
}
)";

// A = x + 1 and B = 2x run side by side, then SUM = A + B = 3x + 1, DIFF = A - B = 1 - x.
constexpr const char* kDiamondConfig = R"(
name: "diamond"
platform: "ensemble"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [
  { name: "SUM" data_type: TYPE_FP32 dims: [ 16 ] },
  { name: "DIFF" data_type: TYPE_FP32 dims: [ 16 ] }
]
ensemble_scheduling {
  step [
    {
      model_name: "double"
      model_version: -1
      input_map { key: "INPUT0" value: "X" }
      output_map { key: "OUTPUT0" value: "B" }
    },
    {
      model_name: "simple_fp32"
      model_version: -1
      input_map { key: "INPUT0" value: "A" }
      input_map { key: "INPUT1" value: "B" }
      output_map { key: "OUTPUT0" value: "SUM" }
      output_map { key: "OUTPUT1" value: "DIFF" }
    },
    {
      model_name: "add_one"
      model_version: -1
      input_map { key: "INPUT0" value: "X" }
      output_map { key: "OUTPUT0" value: "A" }
    }
  ]
}
)";

void WriteEnsembleModels(testing::TempRepository& repo) {
  repo.AddVersion("add_one", 1, "add_one");
  repo.WriteConfig("add_one", kAddOneConfig);
  repo.AddVersion("double", 1, "double");
  repo.WriteConfig("double", kDoubleConfig);
  for (const auto& [name, config] :
       {std::pair{"pipeline", kPipelineConfig}, std::pair{"diamond", kDiamondConfig}}) {
    repo.WriteConfig(name, config);
    // Triton's layout: an ensemble's version folder is empty.
    std::filesystem::create_directories(repo.root() / name / "1");
  }
}

std::vector<float> Floats(float start, size_t n) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = start + static_cast<float>(i);
  return out;
}

std::string JsonRequest(const std::string& input, const std::vector<float>& x, int64_t rows,
                        const std::vector<std::string>& outputs = {}) {
  std::string data;
  for (float v : x) data += (data.empty() ? "" : ",") + std::to_string(v);
  std::string body = R"({"id":"ens-1","inputs":[{"name":")" + input +
                     R"(","datatype":"FP32","shape":[)" + std::to_string(rows) + "," +
                     std::to_string(x.size() / rows) + R"(],"data":[)" + data + "]}]";
  if (!outputs.empty()) {
    body += R"(,"outputs":[)";
    for (size_t i = 0; i < outputs.size(); ++i) {
      body += std::string(i ? "," : "") + R"({"name":")" + outputs[i] + R"("})";
    }
    body += "]";
  }
  return body + "}";
}

// The named output of a JSON infer response, as floats.
std::vector<float> JsonOutput(const std::string& body, const std::string& name) {
  auto doc = ParseJson(body);
  std::vector<float> out;
  if (!doc.IsObject() || !doc.HasMember("outputs")) {
    ADD_FAILURE() << "no outputs in " << body;
    return out;
  }
  for (const auto& o : doc["outputs"].GetArray()) {
    if (name != o["name"].GetString()) continue;
    for (const auto& v : o["data"].GetArray()) out.push_back(v.GetFloat());
    return out;
  }
  ADD_FAILURE() << "no output '" << name << "' in " << body;
  return out;
}

inference::ModelInferRequest GrpcRequest(const std::string& model, const std::string& input,
                                         const std::vector<float>& x, int64_t rows) {
  inference::ModelInferRequest request;
  request.set_model_name(model);
  request.set_id("ens-grpc");
  auto* in = request.add_inputs();
  in->set_name(input);
  in->set_datatype("FP32");
  in->add_shape(rows);
  in->add_shape(static_cast<int64_t>(x.size()) / rows);
  request.add_raw_input_contents(AsBytes(x));
  return request;
}

std::vector<float> GrpcOutput(const inference::ModelInferResponse& response,
                              const std::string& name) {
  for (int i = 0; i < response.outputs_size(); ++i) {
    if (response.outputs(i).name() == name && i < response.raw_output_contents_size()) {
      return FromBytes<float>(response.raw_output_contents(i));
    }
  }
  ADD_FAILURE() << "no output '" << name << "' in " << response.ShortDebugString();
  return {};
}

template <typename F>
std::vector<float> Map(const std::vector<float>& x, F f) {
  std::vector<float> out;
  for (float v : x) out.push_back(f(v));
  return out;
}

class EnsembleTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override { return {"simple", "simple_fp32"}; }
  void PrepareRepository(testing::TempRepository& repo) override { WriteEnsembleModels(repo); }
};

TEST_F(EnsembleTest, PipelineOverHttpAndGrpc) {
  const auto x = Floats(-8, 32);  // two rows of 16
  const auto want = Map(x, [](float v) { return 2 * (v + 1); });
  HttpResponse r = http().Post("/v2/models/pipeline/infer", JsonRequest("X", x, 2));
  ASSERT_EQ(r.status, 200) << r.Describe() << "\n" << server().LogTail();
  EXPECT_EQ(JsonOutput(r.body, "Y"), want);
  auto doc = ParseJson(r.body);
  EXPECT_STREQ(doc["model_name"].GetString(), "pipeline");
  EXPECT_STREQ(doc["id"].GetString(), "ens-1");

  grpc::ClientContext ctx;
  inference::ModelInferResponse response;
  grpc::Status s = grpc().ModelInfer(&ctx, GrpcRequest("pipeline", "X", x, 2), &response);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(response.model_name(), "pipeline");
  EXPECT_EQ(response.model_version(), "1");
  EXPECT_EQ(response.id(), "ens-grpc");
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(response.outputs(0).datatype(), "FP32");
  EXPECT_EQ(
      std::vector<int64_t>(response.outputs(0).shape().begin(), response.outputs(0).shape().end()),
      (std::vector<int64_t>{2, 16}));
  EXPECT_EQ(GrpcOutput(response, "Y"), want);
}

TEST_F(EnsembleTest, DiamondRunsEveryBranch) {
  const auto x = Floats(3, 16);
  grpc::ClientContext ctx;
  inference::ModelInferResponse response;
  grpc::Status s = grpc().ModelInfer(&ctx, GrpcRequest("diamond", "X", x, 1), &response);
  ASSERT_TRUE(s.ok()) << Describe(s);
  ASSERT_EQ(response.outputs_size(), 2);
  EXPECT_EQ(response.outputs(0).name(), "SUM");  // the config's order
  EXPECT_EQ(GrpcOutput(response, "SUM"), Map(x, [](float v) { return 3 * v + 1; }));
  EXPECT_EQ(GrpcOutput(response, "DIFF"), Map(x, [](float v) { return 1 - v; }));

  // Only the output asked for, over HTTP.
  HttpResponse r = http().Post("/v2/models/diamond/infer", JsonRequest("X", x, 1, {"DIFF"}));
  ASSERT_EQ(r.status, 200) << r.Describe();
  auto doc = ParseJson(r.body);
  ASSERT_EQ(doc["outputs"].Size(), 1u) << r.body;
  EXPECT_EQ(JsonOutput(r.body, "DIFF"), Map(x, [](float v) { return 1 - v; }));
}

TEST_F(EnsembleTest, ConcurrentRequestsGetTheirOwnAnswers) {
  // Many ensemble requests in flight at once over one gRPC channel (async stubs would
  // be faster to write with the stream; the stream keeps it short).
  grpc::ClientContext ctx;
  auto stream = grpc().ModelStreamInfer(&ctx);
  constexpr int kRequests = 24;
  for (int i = 0; i < kRequests; ++i) {
    auto request = GrpcRequest("diamond", "X", Floats(static_cast<float>(i), 16), 1);
    request.set_id("r" + std::to_string(i));
    ASSERT_TRUE(stream->Write(request));
  }
  ASSERT_TRUE(stream->WritesDone());
  inference::ModelStreamInferResponse response;
  int answered = 0;
  while (stream->Read(&response)) {
    ASSERT_EQ(response.error_message(), "");
    const int i = std::stoi(response.infer_response().id().substr(1));
    const auto x = Floats(static_cast<float>(i), 16);
    EXPECT_EQ(GrpcOutput(response.infer_response(), "SUM"),
              Map(x, [](float v) { return 3 * v + 1; }));
    ++answered;
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(answered, kRequests);
}

TEST_F(EnsembleTest, FailingStepNamesTheStep) {
  const auto x = Floats(0, 5);  // add_one takes it; double wants 16
  HttpResponse r = http().Post("/v2/models/pipeline/infer", JsonRequest("X", x, 1));
  EXPECT_EQ(r.status, 400) << r.Describe();
  const std::string message = ErrorMessage(r.body);
  EXPECT_NE(message.find("ensemble 'pipeline' step 2 (model 'double')"), std::string::npos)
      << message;
  EXPECT_NE(message.find("INPUT0"), std::string::npos) << message;

  grpc::ClientContext ctx;
  inference::ModelInferResponse response;
  grpc::Status s = grpc().ModelInfer(&ctx, GrpcRequest("pipeline", "X", x, 1), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  EXPECT_NE(s.error_message().find("step 2 (model 'double')"), std::string::npos) << Describe(s);

  // Counted as the ensemble's failures; the server goes on serving it.
  HttpResponse stats = http().Get("/v2/models/pipeline/stats");
  ASSERT_EQ(stats.status, 200) << stats.Describe();
  auto doc = ParseJson(stats.body);
  const auto& infer = doc["model_stats"][0]["inference_stats"];
  EXPECT_EQ(JsonUint(infer["fail"]["count"]), 2u) << stats.body;
  r = http().Post("/v2/models/pipeline/infer", JsonRequest("X", Floats(0, 16), 1));
  EXPECT_EQ(r.status, 200) << r.Describe();
  ExpectStillServing();
}

TEST_F(EnsembleTest, MetadataAndConfig) {
  HttpResponse r = http().Get("/v2/models/diamond");
  ASSERT_EQ(r.status, 200) << r.Describe();
  auto doc = ParseJson(r.body);
  EXPECT_STREQ(doc["platform"].GetString(), "ensemble");
  ASSERT_EQ(doc["inputs"].Size(), 1u) << r.body;
  EXPECT_STREQ(doc["inputs"][0]["name"].GetString(), "X");
  EXPECT_STREQ(doc["inputs"][0]["datatype"].GetString(), "FP32");
  EXPECT_EQ(ToJson(doc["inputs"][0]["shape"]), "[-1,16]");
  ASSERT_EQ(doc["outputs"].Size(), 2u) << r.body;
  EXPECT_STREQ(doc["outputs"][1]["name"].GetString(), "DIFF");

  {
    grpc::ClientContext ctx;
    inference::ModelMetadataRequest request;
    request.set_name("pipeline");
    inference::ModelMetadataResponse response;
    grpc::Status s = grpc().ModelMetadata(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << Describe(s);
    EXPECT_EQ(response.platform(), "ensemble");
    ASSERT_EQ(response.inputs_size(), 1);
    EXPECT_EQ(response.inputs(0).name(), "X");
    ASSERT_EQ(response.outputs_size(), 1);
    EXPECT_EQ(response.outputs(0).name(), "Y");
    ASSERT_EQ(response.versions_size(), 1);
    EXPECT_EQ(response.versions(0), "1");
  }
  {
    grpc::ClientContext ctx;
    inference::ModelConfigRequest request;
    request.set_name("diamond");
    inference::ModelConfigResponse response;
    grpc::Status s = grpc().ModelConfig(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << Describe(s);
    const auto& steps = response.config().ensemble_scheduling().step();
    ASSERT_EQ(steps.size(), 3);
    EXPECT_EQ(steps[1].model_name(), "simple_fp32");
    EXPECT_EQ(steps[1].input_map().at("INPUT1"), "B");
    EXPECT_EQ(response.config().instance_group_size(), 0);
  }
  HttpResponse config = http().Get("/v2/models/pipeline/config");
  ASSERT_EQ(config.status, 200) << config.Describe();
  EXPECT_NE(config.body.find("ensemble_scheduling"), std::string::npos) << config.body;

  HttpResponse ready = http().Get("/v2/models/diamond/ready");
  EXPECT_EQ(ready.status, 200) << ready.Describe();
}

// Each step is counted in its own model, and the ensemble's compute times are its steps'
// summed, as Triton reports them.
TEST_F(EnsembleTest, StatisticsCountEnsembleAndSteps) {
  auto stat = [&](const std::string& model, const std::string& name,
                  const std::string& field = "count") -> uint64_t {
    HttpResponse r = http().Get("/v2/models/" + model + "/stats");
    EXPECT_EQ(r.status, 200) << r.Describe();
    auto doc = ParseJson(r.body);
    return JsonUint(doc["model_stats"][0]["inference_stats"][name.c_str()][field.c_str()])
        .value_or(0);
  };
  const std::vector<std::string> steps = {"add_one", "double", "simple_fp32"};
  auto compute = [&](const std::string& phase) {
    std::vector<uint64_t> ns = {stat("diamond", phase, "ns")};
    for (const auto& step : steps) ns.push_back(stat(step, phase, "ns"));
    return ns;
  };
  const uint64_t diamond = stat("diamond", "success"), add_one = stat("add_one", "success");
  const std::vector<std::string> phases = {"compute_input", "compute_infer", "compute_output"};
  std::vector<std::vector<uint64_t>> before;
  for (const auto& phase : phases) before.push_back(compute(phase));
  for (int i = 0; i < 3; ++i) {
    HttpResponse r = http().Post("/v2/models/diamond/infer", JsonRequest("X", Floats(i, 16), 1));
    ASSERT_EQ(r.status, 200) << r.Describe();
  }
  EXPECT_EQ(stat("diamond", "success"), diamond + 3);
  EXPECT_EQ(stat("add_one", "success"), add_one + 3);  // each step went through its own model
  for (size_t p = 0; p < phases.size(); ++p) {
    const std::vector<uint64_t> after = compute(phases[p]);
    uint64_t steps_ns = 0;
    for (size_t k = 1; k < after.size(); ++k) steps_ns += after[k] - before[p][k];
    EXPECT_EQ(after[0] - before[p][0], steps_ns) << phases[p];
  }
  EXPECT_GT(stat("diamond", "compute_infer", "ns"), 0u);
}

class EnsembleExplicitTest : public EnsembleTest {
 protected:
  std::vector<std::string> ExtraArgs() override {
    return {"--model-control-mode", "explicit", "--load-model", "pipeline"};
  }
};

TEST_F(EnsembleExplicitTest, StepModelsLoadWithTheEnsembleAndItFollowsThem) {
  auto ready = [&](const std::string& name) {
    grpc::ClientContext ctx;
    inference::ModelReadyRequest request;
    request.set_name(name);
    inference::ModelReadyResponse response;
    grpc::Status s = grpc().ModelReady(&ctx, request, &response);
    return s.ok() && response.ready();
  };
  // Loading the ensemble loaded its step models, and nothing else.
  EXPECT_TRUE(ready("pipeline"));
  EXPECT_TRUE(ready("add_one"));
  EXPECT_TRUE(ready("double"));
  EXPECT_FALSE(ready("diamond"));
  EXPECT_FALSE(ready("simple"));

  // A step model unloaded: the ensemble is UNAVAILABLE, and says why.
  {
    grpc::ClientContext ctx;
    inference::RepositoryModelUnloadRequest request;
    request.set_model_name("double");
    inference::RepositoryModelUnloadResponse response;
    grpc::Status s = grpc().RepositoryModelUnload(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << Describe(s);
  }
  EXPECT_FALSE(ready("pipeline"));
  HttpResponse index = http().Post("/v2/repository/index", "");
  ASSERT_EQ(index.status, 200) << index.Describe();
  auto doc = ParseJson(index.body);
  bool found = false;
  for (const auto& m : doc.GetArray()) {
    if (std::string(m["name"].GetString()) != "pipeline") continue;
    found = true;
    EXPECT_STREQ(m["state"].GetString(), "UNAVAILABLE") << index.body;
    const std::string reason = m.HasMember("reason") ? m["reason"].GetString() : "";
    EXPECT_NE(reason.find("step 2 (model 'double')"), std::string::npos) << index.body;
  }
  EXPECT_TRUE(found) << index.body;
  HttpResponse refused =
      http().Post("/v2/models/pipeline/infer", JsonRequest("X", Floats(0, 16), 1));
  EXPECT_EQ(refused.status, 503) << refused.Describe();
  EXPECT_NE(ErrorMessage(refused.body).find("double"), std::string::npos) << refused.body;

  // Back again: the ensemble follows.
  HttpResponse load = http().Post("/v2/repository/models/double/load", "");
  ASSERT_EQ(load.status, 200) << load.Describe();
  EXPECT_TRUE(ready("pipeline"));
  HttpResponse r = http().Post("/v2/models/pipeline/infer", JsonRequest("X", Floats(0, 16), 1));
  ASSERT_EQ(r.status, 200) << r.Describe();
  EXPECT_EQ(JsonOutput(r.body, "Y"), Map(Floats(0, 16), [](float v) { return 2 * (v + 1); }));
}

// The example repository's image pipeline (tools/generate_models.py): a uint8 image of
// any size through image_preprocess, cnn_classifier and classification_postprocess.
class ExamplePipelineTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override { return {"simple"}; }
  void PrepareRepository(testing::TempRepository& repo) override {
    for (const char* model :
         {"cnn_classifier", "image_preprocess", "classification_postprocess", "image_pipeline"}) {
      std::filesystem::copy(std::filesystem::path(FASTPATH_EXAMPLE_MODELS_DIR) / model,
                            repo.root() / model, std::filesystem::copy_options::recursive);
    }
  }
  // Runs `model` on one raw input over gRPC and returns the response.
  inference::ModelInferResponse Infer(const std::string& model, const std::string& input,
                                      const std::string& datatype,
                                      const std::vector<int64_t>& shape, std::string bytes) {
    inference::ModelInferRequest request;
    request.set_model_name(model);
    auto* in = request.add_inputs();
    in->set_name(input);
    in->set_datatype(datatype);
    for (int64_t d : shape) in->add_shape(d);
    request.add_raw_input_contents(std::move(bytes));
    grpc::ClientContext ctx;
    inference::ModelInferResponse response;
    grpc::Status s = grpc().ModelInfer(&ctx, request, &response);
    EXPECT_TRUE(s.ok()) << model << ": " << Describe(s) << "\n" << server().LogTail();
    return response;
  }
};

TEST_F(ExamplePipelineTest, TopOneIsTheClassifiersAnswerOnThePreprocessedImage) {
  constexpr int64_t kImages = 2, kHeight = 40, kWidth = 56, kTop = 5, kClasses = 10;
  std::string image(kImages * kHeight * kWidth * 3, '\0');
  for (int64_t i = 0; i < static_cast<int64_t>(image.size()); ++i) {
    const int64_t n = i / (kHeight * kWidth * 3), y = (i / (kWidth * 3)) % kHeight,
                  x = (i / 3) % kWidth, c = i % 3;
    image[i] = static_cast<char>((x * 5 + y * 3 + c * 70 + n * 101) % 256);
  }
  const std::vector<int64_t> shape = {kImages, kHeight, kWidth, 3};
  auto pipeline = Infer("image_pipeline", "IMAGE", "UINT8", shape, image);
  ASSERT_EQ(pipeline.outputs_size(), 2) << pipeline.ShortDebugString();
  const auto scores = GrpcOutput(pipeline, "SCORES");
  std::vector<int64_t> classes;
  for (int i = 0; i < pipeline.outputs_size(); ++i) {
    if (pipeline.outputs(i).name() == "CLASSES") {
      EXPECT_EQ(pipeline.outputs(i).datatype(), "INT64");
      classes = FromBytes<int64_t>(pipeline.raw_output_contents(i));
    }
  }
  ASSERT_EQ(scores.size(), static_cast<size_t>(kImages * kTop));
  ASSERT_EQ(classes.size(), static_cast<size_t>(kImages * kTop));

  // The same, one model at a time.
  auto pre = Infer("image_preprocess", "image", "UINT8", shape, image);
  ASSERT_EQ(pre.raw_output_contents_size(), 1);
  EXPECT_EQ(std::vector<int64_t>(pre.outputs(0).shape().begin(), pre.outputs(0).shape().end()),
            (std::vector<int64_t>{kImages, 3, 32, 32}));
  auto cnn =
      Infer("cnn_classifier", "image", "FP32", {kImages, 3, 32, 32}, pre.raw_output_contents(0));
  const auto logits = GrpcOutput(cnn, "logits");
  ASSERT_EQ(logits.size(), static_cast<size_t>(kImages * kClasses));
  for (int64_t n = 0; n < kImages; ++n) {
    const float* row = logits.data() + n * kClasses;
    const int64_t top = std::max_element(row, row + kClasses) - row;
    EXPECT_EQ(classes[n * kTop], top) << "image " << n;
    float max = row[top], sum = 0;
    for (int64_t c = 0; c < kClasses; ++c) sum += std::exp(row[c] - max);
    for (int64_t k = 0; k < kTop; ++k) {
      const float softmax = std::exp(row[classes[n * kTop + k]] - max) / sum;
      EXPECT_NEAR(scores[n * kTop + k], softmax, 1e-5) << "image " << n << " rank " << k;
      if (k > 0) {
        EXPECT_LE(scores[n * kTop + k], scores[n * kTop + k - 1]);
      }
    }
  }

  HttpResponse meta = http().Get("/v2/models/image_pipeline");
  ASSERT_EQ(meta.status, 200) << meta.Describe();
  auto doc = ParseJson(meta.body);
  EXPECT_STREQ(doc["platform"].GetString(), "ensemble");
  EXPECT_STREQ(doc["inputs"][0]["datatype"].GetString(), "UINT8");
  EXPECT_EQ(ToJson(doc["inputs"][0]["shape"]), "[-1,-1,-1,3]");
}

}  // namespace
}  // namespace fastpath::integration
