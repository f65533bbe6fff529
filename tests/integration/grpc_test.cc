// Every RPC of inference.GRPCInferenceService against the real binary, over a real
// channel with raised message-size limits, as tritonclient uses it.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "integration_fixture.h"

namespace fastpath::integration {
namespace {

using GrpcTest = ServerTest;

TEST_F(GrpcTest, ServerLiveAndReady) {
  {
    grpc::ClientContext ctx;
    inference::ServerLiveResponse response;
    grpc::Status s = grpc().ServerLive(&ctx, {}, &response);
    ASSERT_TRUE(s.ok()) << Describe(s);
    EXPECT_TRUE(response.live());
  }
  {
    grpc::ClientContext ctx;
    inference::ServerReadyResponse response;
    grpc::Status s = grpc().ServerReady(&ctx, {}, &response);
    ASSERT_TRUE(s.ok()) << Describe(s);
    EXPECT_TRUE(response.ready());
  }
}

TEST_F(GrpcTest, ServerMetadataListsExtensions) {
  grpc::ClientContext ctx;
  inference::ServerMetadataResponse response;
  grpc::Status s = grpc().ServerMetadata(&ctx, {}, &response);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(response.name(), "fastpath");
  EXPECT_FALSE(response.version().empty());
  for (const char* ext :
       {"binary_tensor_data", "model_repository", "statistics", "model_configuration",
        "schedule_policy", "model_repository(unload_dependents)"}) {
    EXPECT_NE(std::find(response.extensions().begin(), response.extensions().end(), ext),
              response.extensions().end())
        << ext << " missing from " << response.ShortDebugString();
  }
}

TEST_F(GrpcTest, ModelMetadataWithAndWithoutVersion) {
  for (const std::string version : {"", "1"}) {
    grpc::ClientContext ctx;
    inference::ModelMetadataRequest request;
    request.set_name("simple");
    request.set_version(version);
    inference::ModelMetadataResponse response;
    grpc::Status s = grpc().ModelMetadata(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << Describe(s);
    EXPECT_EQ(response.name(), "simple");
    EXPECT_EQ(response.platform(), "onnxruntime_onnx");
    ASSERT_EQ(response.versions_size(), 1);
    EXPECT_EQ(response.versions(0), "1");
    ASSERT_EQ(response.inputs_size(), 2);
    EXPECT_EQ(response.inputs(0).name(), "INPUT0");
    EXPECT_EQ(response.inputs(0).datatype(), "INT32");
    ASSERT_EQ(response.inputs(0).shape_size(), 2);
    EXPECT_EQ(response.inputs(0).shape(0), -1);
    EXPECT_EQ(response.inputs(0).shape(1), 16);
    ASSERT_EQ(response.outputs_size(), 2);
    EXPECT_EQ(response.outputs(1).name(), "OUTPUT1");
  }
}

TEST_F(GrpcTest, UnknownModelOrVersionIsNotFound) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"no_such_model", ""}, {"no_such_model", "1"}, {"simple", "7"}};
  for (const auto& [name, version] : cases) {
    SCOPED_TRACE(name + " version '" + version + "'");
    {
      grpc::ClientContext ctx;
      inference::ModelMetadataRequest request;
      request.set_name(name);
      request.set_version(version);
      inference::ModelMetadataResponse response;
      grpc::Status s = grpc().ModelMetadata(&ctx, request, &response);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
      EXPECT_FALSE(s.error_message().empty());
    }
    {
      // Triton answers ready=false, not NOT_FOUND, here; tritonclient's is_model_ready
      // depends on that to return False instead of raising.
      grpc::ClientContext ctx;
      inference::ModelReadyRequest request;
      request.set_name(name);
      request.set_version(version);
      inference::ModelReadyResponse response;
      grpc::Status s = grpc().ModelReady(&ctx, request, &response);
      EXPECT_TRUE(s.ok()) << Describe(s);
      EXPECT_FALSE(response.ready());
    }
    {
      grpc::ClientContext ctx;
      inference::ModelConfigRequest request;
      request.set_name(name);
      request.set_version(version);
      inference::ModelConfigResponse response;
      grpc::Status s = grpc().ModelConfig(&ctx, request, &response);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
    }
    {
      grpc::ClientContext ctx;
      inference::ModelInferRequest request = SimpleGrpcRequest(Iota(0, 16), Iota(0, 16));
      request.set_model_name(name);
      request.set_model_version(version);
      inference::ModelInferResponse response;
      grpc::Status s = grpc().ModelInfer(&ctx, request, &response);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
    }
  }
  grpc::ClientContext ctx;
  inference::ModelStatisticsRequest request;
  request.set_name("no_such_model");
  inference::ModelStatisticsResponse response;
  grpc::Status s = grpc().ModelStatistics(&ctx, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
}

TEST_F(GrpcTest, ModelReady) {
  for (const std::string version : {"", "1"}) {
    grpc::ClientContext ctx;
    inference::ModelReadyRequest request;
    request.set_name("simple");
    request.set_version(version);
    inference::ModelReadyResponse response;
    grpc::Status s = grpc().ModelReady(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << Describe(s);
    EXPECT_TRUE(response.ready());
  }
}

TEST_F(GrpcTest, ModelConfig) {
  grpc::ClientContext ctx;
  inference::ModelConfigRequest request;
  request.set_name("simple");
  inference::ModelConfigResponse response;
  grpc::Status s = grpc().ModelConfig(&ctx, request, &response);
  ASSERT_TRUE(s.ok()) << Describe(s);
  const auto& config = response.config();
  EXPECT_EQ(config.name(), "simple");
  EXPECT_EQ(config.max_batch_size(), 8);
  ASSERT_EQ(config.input_size(), 2);
  EXPECT_EQ(config.input(0).name(), "INPUT0");
  EXPECT_EQ(config.input(0).data_type(), inference::TYPE_INT32);
  ASSERT_EQ(config.input(0).dims_size(), 1);
  EXPECT_EQ(config.input(0).dims(0), 16);
  ASSERT_EQ(config.output_size(), 2);
}

uint64_t GrpcInferenceCount(inference::GRPCInferenceService::Stub& stub) {
  grpc::ClientContext ctx;
  inference::ModelStatisticsRequest request;
  request.set_name("simple");
  inference::ModelStatisticsResponse response;
  grpc::Status s = stub.ModelStatistics(&ctx, request, &response);
  EXPECT_TRUE(s.ok()) << Describe(s);
  if (response.model_stats_size() != 1) {
    ADD_FAILURE() << response.ShortDebugString();
    return 0;
  }
  EXPECT_EQ(response.model_stats(0).name(), "simple");
  EXPECT_EQ(response.model_stats(0).version(), "1");
  return response.model_stats(0).inference_count();
}

TEST_F(GrpcTest, StatisticsCountInferences) {
  const uint64_t before = GrpcInferenceCount(grpc());
  for (int i = 0; i < 4; ++i) {
    grpc::ClientContext ctx;
    inference::ModelInferResponse response;
    grpc::Status s = grpc().ModelInfer(&ctx, SimpleGrpcRequest(Iota(i, 16), Iota(i, 16)), &response);
    ASSERT_TRUE(s.ok()) << Describe(s);
  }
  EXPECT_EQ(GrpcInferenceCount(grpc()), before + 4);
  {
    grpc::ClientContext ctx;
    inference::ModelStatisticsResponse all;
    grpc::Status s = grpc().ModelStatistics(&ctx, {}, &all);
    ASSERT_TRUE(s.ok()) << Describe(s);
    EXPECT_GE(all.model_stats_size(), static_cast<int>(AllTestModels().size()));
    for (const auto& m : all.model_stats()) {
      if (m.name() == "simple") {
        EXPECT_EQ(m.inference_count(), before + 4);
        EXPECT_GE(m.execution_count(), 1u);
        EXPECT_GT(m.last_inference(), 0u);
        EXPECT_EQ(m.inference_stats().success().count(), before + 4);
      }
    }
  }
}

TEST_F(GrpcTest, RepositoryIndex) {
  for (bool ready : {false, true}) {
    grpc::ClientContext ctx;
    inference::RepositoryIndexRequest request;
    request.set_ready(ready);
    inference::RepositoryIndexResponse response;
    grpc::Status s = grpc().RepositoryIndex(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << Describe(s);
    EXPECT_EQ(response.models_size(), static_cast<int>(AllTestModels().size()))
        << response.ShortDebugString();
    for (const auto& m : response.models()) {
      EXPECT_EQ(m.state(), "READY") << m.ShortDebugString();
      EXPECT_EQ(m.version(), "1");
    }
  }
}

TEST_F(GrpcTest, LoadAndUnloadRefusedInModeNone) {
  {
    grpc::ClientContext ctx;
    inference::RepositoryModelLoadRequest request;
    request.set_model_name("simple");
    inference::RepositoryModelLoadResponse response;
    grpc::Status s = grpc().RepositoryModelLoad(&ctx, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Describe(s);
  }
  {
    grpc::ClientContext ctx;
    inference::RepositoryModelUnloadRequest request;
    request.set_model_name("simple");
    inference::RepositoryModelUnloadResponse response;
    grpc::Status s = grpc().RepositoryModelUnload(&ctx, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Describe(s);
  }
  ExpectStillServing();
}

TEST_F(GrpcTest, InferRawEchoesIdAndVersion) {
  auto a = Iota(11, 32), b = Iota(-40, 32);
  grpc::ClientContext ctx;
  inference::ModelInferRequest request = SimpleGrpcRequest(a, b, "grpc-7");
  request.set_model_version("1");
  inference::ModelInferResponse response;
  grpc::Status s = grpc().ModelInfer(&ctx, request, &response);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(response.id(), "grpc-7");
  EXPECT_EQ(response.model_name(), "simple");
  EXPECT_EQ(response.model_version(), "1");
  ExpectSimpleGrpcResponse(response, a, b);
}

TEST_F(GrpcTest, InferTypedContents) {
  auto a = Iota(5, 16), b = Iota(2, 16);
  inference::ModelInferRequest request = SimpleGrpcRequest(a, b);
  request.clear_raw_input_contents();
  for (int i = 0; i < 16; ++i) {
    request.mutable_inputs(0)->mutable_contents()->add_int_contents(a[i]);
    request.mutable_inputs(1)->mutable_contents()->add_int_contents(b[i]);
  }
  grpc::ClientContext ctx;
  inference::ModelInferResponse response;
  grpc::Status s = grpc().ModelInfer(&ctx, request, &response);
  ASSERT_TRUE(s.ok()) << Describe(s);
  // Outputs always come back raw, whatever the inputs used.
  ExpectSimpleGrpcResponse(response, a, b);
}

TEST_F(GrpcTest, OutputsComeBackInRequestedOrder) {
  auto a = Iota(100, 16), b = Iota(1, 16);
  inference::ModelInferRequest request = SimpleGrpcRequest(a, b);
  request.add_outputs()->set_name("OUTPUT1");
  request.add_outputs()->set_name("OUTPUT0");
  grpc::ClientContext ctx;
  inference::ModelInferResponse response;
  grpc::Status s = grpc().ModelInfer(&ctx, request, &response);
  ASSERT_TRUE(s.ok()) << Describe(s);
  ASSERT_EQ(response.outputs_size(), 2);
  EXPECT_EQ(response.outputs(0).name(), "OUTPUT1");
  EXPECT_EQ(response.outputs(1).name(), "OUTPUT0");
  ExpectSimpleGrpcResponse(response, a, b);  // checks raw_output_contents[i] per name

  inference::ModelInferRequest subset = SimpleGrpcRequest(a, b);
  subset.add_outputs()->set_name("OUTPUT0");
  grpc::ClientContext ctx2;
  inference::ModelInferResponse one;
  s = grpc().ModelInfer(&ctx2, subset, &one);
  ASSERT_TRUE(s.ok()) << Describe(s);
  ASSERT_EQ(one.outputs_size(), 1);
  ASSERT_EQ(one.raw_output_contents_size(), 1);
  EXPECT_EQ(one.outputs(0).name(), "OUTPUT0");
  auto sum = FromBytes<int32_t>(one.raw_output_contents(0));
  ASSERT_EQ(sum.size(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(sum[i], a[i] + b[i]);
}

TEST_F(GrpcTest, StreamInferReportsAFailureAndGoesOn) {
  grpc::ClientContext ctx;
  auto stream = grpc().ModelStreamInfer(&ctx);
  ASSERT_NE(stream, nullptr);
  // good, bad (unknown model), bad (wrong datatype), good: the stream survives the errors.
  std::vector<inference::ModelInferRequest> requests;
  requests.push_back(SimpleGrpcRequest(Iota(1, 16), Iota(2, 16), "s0"));
  requests.push_back(SimpleGrpcRequest(Iota(1, 16), Iota(2, 16), "s1"));
  requests.back().set_model_name("no_such_model");
  requests.push_back(SimpleGrpcRequest(Iota(1, 16), Iota(2, 16), "s2"));
  requests.back().mutable_inputs(0)->set_datatype("FP32");
  requests.push_back(SimpleGrpcRequest(Iota(3, 16), Iota(4, 16), "s3"));
  for (const auto& r : requests) ASSERT_TRUE(stream->Write(r));
  ASSERT_TRUE(stream->WritesDone());

  std::vector<inference::ModelStreamInferResponse> responses;
  inference::ModelStreamInferResponse response;
  while (stream->Read(&response)) responses.push_back(response);
  grpc::Status s = stream->Finish();
  ASSERT_TRUE(s.ok()) << Describe(s);
  ASSERT_EQ(responses.size(), 4u);
  // Responses may come back in any order (requests run concurrently); match them by
  // id for the successes and count the failures.
  int errors = 0;
  std::vector<std::string> ids;
  for (const auto& r : responses) {
    if (!r.error_message().empty()) {
      ++errors;
      continue;
    }
    ids.push_back(r.infer_response().id());
    if (r.infer_response().id() == "s0") {
      ExpectSimpleGrpcResponse(r.infer_response(), Iota(1, 16), Iota(2, 16));
    } else {
      ExpectSimpleGrpcResponse(r.infer_response(), Iota(3, 16), Iota(4, 16));
    }
  }
  EXPECT_EQ(errors, 2);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"s0", "s3"}));
}

TEST_F(GrpcTest, StreamInferFailureNamesTheField) {
  grpc::ClientContext ctx;
  auto stream = grpc().ModelStreamInfer(&ctx);
  auto bad = SimpleGrpcRequest(Iota(1, 16), Iota(2, 16), "bad");
  bad.mutable_inputs(1)->set_datatype("FP64");
  ASSERT_TRUE(stream->Write(bad));
  inference::ModelStreamInferResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_NE(response.error_message().find("INPUT1"), std::string::npos)
      << response.error_message();
  // And a good request on the same stream afterwards.
  ASSERT_TRUE(stream->Write(SimpleGrpcRequest(Iota(8, 16), Iota(9, 16), "good")));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.error_message(), "");
  ExpectSimpleGrpcResponse(response.infer_response(), Iota(8, 16), Iota(9, 16));
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_FALSE(stream->Read(&response));
  grpc::Status s = stream->Finish();
  EXPECT_TRUE(s.ok()) << Describe(s);
}

class GrpcExplicitTest : public ServerTest {
 protected:
  std::vector<std::string> ExtraArgs() override {
    return {"--model-control-mode", "explicit", "--load-model", "simple"};
  }
};

TEST_F(GrpcExplicitTest, LoadAndUnload) {
  auto ready = [&](const std::string& name) {
    grpc::ClientContext ctx;
    inference::ModelReadyRequest request;
    request.set_name(name);
    inference::ModelReadyResponse response;
    grpc::Status s = grpc().ModelReady(&ctx, request, &response);
    return s.ok() && response.ready();
  };
  EXPECT_TRUE(ready("simple"));
  EXPECT_FALSE(ready("identity_fp64"));
  {
    grpc::ClientContext ctx;
    inference::RepositoryModelLoadRequest request;
    request.set_model_name("identity_fp64");
    inference::RepositoryModelLoadResponse response;
    grpc::Status s = grpc().RepositoryModelLoad(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << Describe(s);
  }
  EXPECT_TRUE(ready("identity_fp64"));
  {
    grpc::ClientContext ctx;
    inference::RepositoryIndexRequest request;
    request.set_ready(true);
    inference::RepositoryIndexResponse response;
    grpc::Status s = grpc().RepositoryIndex(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << Describe(s);
    std::vector<std::string> names;
    for (const auto& m : response.models()) names.push_back(m.name());
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"identity_fp64", "simple"}));
  }
  {
    grpc::ClientContext ctx;
    inference::RepositoryModelUnloadRequest request;
    request.set_model_name("identity_fp64");
    inference::RepositoryModelUnloadResponse response;
    grpc::Status s = grpc().RepositoryModelUnload(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << Describe(s);
  }
  EXPECT_FALSE(ready("identity_fp64"));
  {
    grpc::ClientContext ctx;
    inference::RepositoryModelLoadRequest request;
    request.set_model_name("no_such_model");
    inference::RepositoryModelLoadResponse response;
    grpc::Status s = grpc().RepositoryModelLoad(&ctx, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
  }
  EXPECT_TRUE(ready("simple"));
}

// tritonclient's load_model(config=..., files=...) over gRPC: the config as a string, each
// file as bytes, for a model the repository does not hold.
TEST_F(GrpcExplicitTest, ALoadTakesItsConfigAndFiles) {
  std::ifstream in(std::filesystem::path(FASTPATH_TEST_MODELS_DIR) / "simple.onnx",
                   std::ios::binary);
  const std::string model((std::istreambuf_iterator<char>(in)), {});
  ASSERT_FALSE(model.empty());
  grpc::ClientContext ctx;
  inference::RepositoryModelLoadRequest request;
  request.set_model_name("uploaded");
  (*request.mutable_parameters())["config"].set_string_param(R"({"max_batch_size": 8})");
  (*request.mutable_parameters())["file:1/model.onnx"].set_bytes_param(model);
  inference::RepositoryModelLoadResponse response;
  grpc::Status s = grpc().RepositoryModelLoad(&ctx, request, &response);
  ASSERT_TRUE(s.ok()) << Describe(s);

  grpc::ClientContext infer_ctx;
  inference::ModelInferRequest infer = SimpleGrpcRequest(Iota(0, 16), Iota(1, 16), "up");
  infer.set_model_name("uploaded");
  inference::ModelInferResponse answer;
  s = grpc().ModelInfer(&infer_ctx, infer, &answer);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(answer.model_name(), "uploaded");
  EXPECT_EQ(answer.outputs_size(), 2);

  // Files that cannot load fail the same way again: INVALID_ARGUMENT, as Triton answers, so
  // that a retry policy on UNAVAILABLE leaves it alone. The previous load keeps serving.
  grpc::ClientContext broken_ctx;
  (*request.mutable_parameters())["file:1/model.onnx"].set_bytes_param("not a model");
  s = grpc().RepositoryModelLoad(&broken_ctx, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  EXPECT_NE(s.error_message().find("the previous load keeps serving"), std::string::npos)
      << Describe(s);
}

}  // namespace
}  // namespace fastpath::integration
