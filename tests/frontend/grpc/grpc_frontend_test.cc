// The gRPC front end against the scriptable fake facade, through a real channel and
// the generated stub: every RPC, both tensor encodings for every datatype, the error
// codes, every bad-input case, large messages, streaming and concurrency.
#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "async_call.h"
#include "fake_inference_server.h"
#include "fastpath/frontend/grpc_server.h"
#include "grpc_service.grpc.pb.h"

namespace fastpath::frontend {
namespace {

using inference::GRPCInferenceService;
using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::FakeInferenceServer;

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::string BytesElements(const std::vector<std::string>& elements) {
  std::string out;
  for (const auto& e : elements) AppendBytesElement(&out, e);
  return out;
}

server::TensorMetadata Meta(std::string name, DataType dtype, std::vector<int64_t> shape) {
  return {std::move(name), dtype, std::move(shape)};
}

FakeInferenceServer::Model MakeModel(const std::string& name, bool ready = true) {
  FakeInferenceServer::Model m;
  m.metadata.name = name;
  m.metadata.versions = {"1", "2"};
  m.metadata.platform = "onnxruntime_onnx";
  m.metadata.inputs = {Meta("INPUT0", DataType::kFp32, {-1, 4})};
  m.metadata.outputs = {Meta("OUTPUT0", DataType::kFp32, {-1, 4})};
  m.config.set_name(name);
  m.config.set_max_batch_size(8);
  m.ready = ready;
  return m;
}

// Identity: output "OUT_<x>" is a copy of input "<x>". Requested outputs come back in
// the order requested; with none requested, one per input in input order. Model
// "fail_unavailable" / "fail_invalid" answer with those errors. The id is deliberately
// not set, so that the test sees the front end echo it.
StatusOr<InferResponse> IdentityHandler(const InferRequest& request) {
  if (request.model_name == "fail_unavailable") return Unavailable("queue is full");
  if (request.model_name == "fail_invalid") return InvalidArgument("input 'INPUT0' is wrong");
  InferResponse response;
  response.model_name = request.model_name;
  response.model_version = request.model_version.empty() ? "2" : request.model_version;
  std::vector<std::string> wanted;
  for (const auto& o : request.outputs) wanted.push_back(o.name);
  if (wanted.empty()) {
    for (const auto& t : request.inputs) wanted.push_back("OUT_" + t.name);
  }
  for (const auto& name : wanted) {
    const Tensor* found = nullptr;
    for (const auto& t : request.inputs) {
      if ("OUT_" + t.name == name) found = &t;
    }
    if (found == nullptr) return NotFound("unknown output '" + name + "'");
    Tensor out = *found;
    out.name = name;
    response.outputs.push_back(std::move(out));
  }
  response.parameters["echoed_params"] = static_cast<int64_t>(request.parameters.size());
  return response;
}

class GrpcFrontendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"identity", "fail_unavailable", "fail_invalid"}) {
      fake_.AddModel(MakeModel(name));
    }
    fake_.AddModel(MakeModel("sleepy", /*ready=*/false));
    fake_.SetHandler(IdentityHandler);
    StartServer(1 << 30);
  }

  void StartServer(int max_message_bytes, std::shared_ptr<RequestBytes> request_bytes = nullptr) {
    GrpcOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    options.max_message_bytes = max_message_bytes;
    options.request_bytes = std::move(request_bytes);
    auto started = GrpcServer::Start(fake_, options);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value();
    ASSERT_GT(server_->port(), 0);
    stub_ = NewStub(server_->port());
  }

  static std::unique_ptr<GRPCInferenceService::Stub> NewStub(int port) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);  // the client side is not under test: unlimited
    args.SetMaxSendMessageSize(-1);
    auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                             grpc::InsecureChannelCredentials(), args);
    return GRPCInferenceService::NewStub(channel);
  }

  grpc::Status Infer(const ModelInferRequest& request, ModelInferResponse* response) {
    grpc::ClientContext context;
    return stub_->ModelInfer(&context, request, response);
  }

  // A request for "identity" with one raw input.
  static ModelInferRequest RawRequest(const std::string& dtype, std::vector<int64_t> shape,
                                      std::string raw, const std::string& name = "INPUT0") {
    ModelInferRequest request;
    request.set_model_name("identity");
    auto* in = request.add_inputs();
    in->set_name(name);
    in->set_datatype(dtype);
    for (int64_t d : shape) in->add_shape(d);
    request.add_raw_input_contents(std::move(raw));
    return request;
  }

  // Asserts the call failed before reaching the facade, with `code` and a message
  // containing `fragment`.
  void ExpectRejected(const ModelInferRequest& request, grpc::StatusCode code,
                      const std::string& fragment) {
    const int calls_before = fake_.infer_calls();
    ModelInferResponse response;
    const grpc::Status status = Infer(request, &response);
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(fragment));
    EXPECT_EQ(fake_.infer_calls(), calls_before) << "a bad request reached the facade";
  }

  // Declared before server_: the facade must outlive the front end.
  FakeInferenceServer fake_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
};

// ---------------------------------------------------------------- health, metadata

// A unary request that protobuf cannot parse is INVALID_ARGUMENT naming its message type,
// answered before the facade sees it; the same channel goes on serving.
TEST_F(GrpcFrontendTest, ARequestThatDoesNotParseIsInvalidArgumentNamingItsType) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  auto call = [&](const std::string& method, const std::string& bytes) {
    grpc::ClientContext context;
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    std::promise<grpc::Status> done;
    generic.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                      [&](grpc::Status s) { done.set_value(std::move(s)); });
    return done.get_future().get();
  };
  // A length-delimited field (model_name, field 1) whose length runs past the end.
  grpc::Status truncated = call("/inference.GRPCInferenceService/ModelInfer", "\x0a\x10" "ab");
  EXPECT_EQ(truncated.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << truncated.error_message();
  EXPECT_THAT(truncated.error_message(),
              HasSubstr("the request is not a valid inference.ModelInferRequest"));
  // A string field that is not UTF-8 (ModelMetadataRequest.name).
  grpc::Status utf8 = call("/inference.GRPCInferenceService/ModelMetadata", "\x0a\x02\xff\xfe");
  EXPECT_EQ(utf8.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << utf8.error_message();
  EXPECT_THAT(utf8.error_message(), HasSubstr("inference.ModelMetadataRequest"));
  EXPECT_THAT(utf8.error_message(), HasSubstr("not UTF-8"));
  EXPECT_EQ(fake_.infer_calls(), 0);

  ModelInferResponse response;
  ASSERT_TRUE(Infer(RawRequest("FP32", {1}, std::string(4, '\0')), &response).ok());
}

TEST_F(GrpcFrontendTest, ServerLiveAndReady) {
  grpc::ClientContext c1, c2, c3;
  inference::ServerLiveResponse live;
  ASSERT_TRUE(stub_->ServerLive(&c1, {}, &live).ok());
  EXPECT_TRUE(live.live());
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(stub_->ServerReady(&c2, {}, &ready).ok());
  EXPECT_TRUE(ready.ready());
  fake_.SetReady(false);
  ASSERT_TRUE(stub_->ServerReady(&c3, {}, &ready).ok());
  EXPECT_FALSE(ready.ready());
}

TEST_F(GrpcFrontendTest, ServerMetadata) {
  grpc::ClientContext context;
  inference::ServerMetadataResponse response;
  ASSERT_TRUE(stub_->ServerMetadata(&context, {}, &response).ok());
  EXPECT_EQ(response.name(), "fastpath");
  EXPECT_EQ(response.version(), "0.0.0-test");
  EXPECT_THAT(response.extensions(), ::testing::Contains("model_repository"));
}

// Triton's extensions that fastpath lacks answer with what is missing, not a bare
// UNIMPLEMENTED from gRPC: no shared-memory region is ever registered, so a status lists
// none and an unregister (client clean-up code) succeeds; a register and the trace and log
// settings are refused by name. The HTTP front end answers alike.
TEST_F(GrpcFrontendTest, ExtensionsItLacksAreRefusedByName) {
  {
    grpc::ClientContext context;
    inference::SystemSharedMemoryStatusResponse response;
    ASSERT_TRUE(stub_->SystemSharedMemoryStatus(&context, {}, &response).ok());
    EXPECT_TRUE(response.regions().empty());
  }
  {
    grpc::ClientContext context;
    inference::CudaSharedMemoryStatusRequest request;
    request.set_name("r0");
    inference::CudaSharedMemoryStatusResponse response;
    const grpc::Status s = stub_->CudaSharedMemoryStatus(&context, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_THAT(s.error_message(), HasSubstr("no CUDA shared memory region 'r0' is registered"));
  }
  for (const char* name : {"", "r0"}) {
    grpc::ClientContext c1, c2;
    inference::SystemSharedMemoryUnregisterRequest system;
    system.set_name(name);
    inference::SystemSharedMemoryUnregisterResponse system_response;
    EXPECT_TRUE(stub_->SystemSharedMemoryUnregister(&c1, system, &system_response).ok()) << name;
    inference::CudaSharedMemoryUnregisterRequest cuda;
    cuda.set_name(name);
    inference::CudaSharedMemoryUnregisterResponse cuda_response;
    EXPECT_TRUE(stub_->CudaSharedMemoryUnregister(&c2, cuda, &cuda_response).ok()) << name;
  }
  {
    grpc::ClientContext context;
    inference::SystemSharedMemoryRegisterRequest request;
    request.set_name("r0");
    request.set_key("/r0");
    request.set_byte_size(64);
    inference::SystemSharedMemoryRegisterResponse response;
    const grpc::Status s = stub_->SystemSharedMemoryRegister(&context, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_THAT(s.error_message(),
                HasSubstr("the system shared memory extension is not supported"));
  }
  {
    grpc::ClientContext context;
    inference::CudaSharedMemoryRegisterResponse response;
    const grpc::Status s = stub_->CudaSharedMemoryRegister(&context, {}, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_THAT(s.error_message(), HasSubstr("the CUDA shared memory extension is not supported"));
  }
  {
    grpc::ClientContext c1, c2;
    inference::TraceSettingResponse trace;
    const grpc::Status t = stub_->TraceSetting(&c1, {}, &trace);
    EXPECT_EQ(t.error_code(), grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_THAT(t.error_message(), HasSubstr("the trace extension is not supported"));
    inference::LogSettingsResponse log;
    const grpc::Status l = stub_->LogSettings(&c2, {}, &log);
    EXPECT_EQ(l.error_code(), grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_THAT(l.error_message(), HasSubstr("the logging extension is not supported"));
  }
}

TEST_F(GrpcFrontendTest, ModelReadyLikeTriton) {
  auto ready = [&](const std::string& name, const std::string& version) {
    grpc::ClientContext context;
    inference::ModelReadyRequest request;
    request.set_name(name);
    request.set_version(version);
    inference::ModelReadyResponse response;
    const grpc::Status status = stub_->ModelReady(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.ready();
  };
  EXPECT_TRUE(ready("identity", ""));
  EXPECT_TRUE(ready("identity", "2"));
  EXPECT_FALSE(ready("sleepy", ""));
  // Unknown model or version: ready=false with OK, as Triton answers.
  EXPECT_FALSE(ready("nope", ""));
  EXPECT_FALSE(ready("identity", "7"));
}

TEST_F(GrpcFrontendTest, ModelMetadata) {
  grpc::ClientContext context;
  inference::ModelMetadataRequest request;
  request.set_name("identity");
  inference::ModelMetadataResponse response;
  ASSERT_TRUE(stub_->ModelMetadata(&context, request, &response).ok());
  EXPECT_EQ(response.name(), "identity");
  EXPECT_THAT(response.versions(), ElementsAre("1", "2"));
  EXPECT_EQ(response.platform(), "onnxruntime_onnx");
  ASSERT_EQ(response.inputs_size(), 1);
  EXPECT_EQ(response.inputs(0).name(), "INPUT0");
  EXPECT_EQ(response.inputs(0).datatype(), "FP32");
  EXPECT_THAT(response.inputs(0).shape(), ElementsAre(-1, 4));
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(response.outputs(0).name(), "OUTPUT0");

  grpc::ClientContext c2;
  request.set_name("nope");
  const grpc::Status status = stub_->ModelMetadata(&c2, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("nope"));
}

TEST_F(GrpcFrontendTest, ModelConfig) {
  grpc::ClientContext context;
  inference::ModelConfigRequest request;
  request.set_name("identity");
  inference::ModelConfigResponse response;
  ASSERT_TRUE(stub_->ModelConfig(&context, request, &response).ok());
  EXPECT_EQ(response.config().name(), "identity");
  EXPECT_EQ(response.config().max_batch_size(), 8);

  grpc::ClientContext c2;
  request.set_version("9");
  EXPECT_EQ(stub_->ModelConfig(&c2, request, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(GrpcFrontendTest, ModelStatistics) {
  ModelInferResponse infer_response;
  ASSERT_TRUE(Infer(RawRequest("FP32", {1}, Bytes<float>({1.0f})), &infer_response).ok());

  grpc::ClientContext context;
  inference::ModelStatisticsRequest request;
  request.set_name("identity");
  inference::ModelStatisticsResponse response;
  ASSERT_TRUE(stub_->ModelStatistics(&context, request, &response).ok());
  ASSERT_EQ(response.model_stats_size(), 1);
  const auto& s = response.model_stats(0);
  EXPECT_EQ(s.name(), "identity");
  EXPECT_EQ(s.version(), "1");
  EXPECT_EQ(s.inference_count(), 1u);
  EXPECT_EQ(s.execution_count(), 1u);
  EXPECT_EQ(s.inference_stats().success().count(), 1u);
  EXPECT_EQ(s.inference_stats().success().ns(), 1000u);
  EXPECT_TRUE(s.inference_stats().has_cache_hit());

  grpc::ClientContext c2;
  inference::ModelStatisticsResponse all;
  ASSERT_TRUE(stub_->ModelStatistics(&c2, {}, &all).ok());
  EXPECT_EQ(all.model_stats_size(), 4);

  grpc::ClientContext c3;
  request.set_name("nope");
  EXPECT_EQ(stub_->ModelStatistics(&c3, request, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// ---------------------------------------------------------------- repository

TEST_F(GrpcFrontendTest, RepositoryIndex) {
  grpc::ClientContext context;
  inference::RepositoryIndexResponse response;
  ASSERT_TRUE(stub_->RepositoryIndex(&context, {}, &response).ok());
  std::map<std::string, inference::RepositoryIndexResponse::ModelIndex> by_name;
  for (const auto& m : response.models()) by_name[m.name()] = m;
  ASSERT_EQ(by_name.size(), 4u);
  EXPECT_EQ(by_name["identity"].state(), "READY");
  EXPECT_EQ(by_name["identity"].version(), "1");
  EXPECT_EQ(by_name["identity"].reason(), "");
  EXPECT_EQ(by_name["sleepy"].state(), "UNAVAILABLE");
  EXPECT_EQ(by_name["sleepy"].reason(), "not ready");

  grpc::ClientContext c2;
  inference::RepositoryIndexRequest ready_only;
  ready_only.set_ready(true);
  ASSERT_TRUE(stub_->RepositoryIndex(&c2, ready_only, &response).ok());
  EXPECT_EQ(response.models_size(), 3);
}

TEST_F(GrpcFrontendTest, RepositoryLoadAndUnload) {
  auto load = [&](const std::string& name) {
    grpc::ClientContext context;
    inference::RepositoryModelLoadRequest request;
    request.set_model_name(name);
    inference::RepositoryModelLoadResponse response;
    return stub_->RepositoryModelLoad(&context, request, &response);
  };
  auto unload = [&](const std::string& name, bool dependents = false) {
    grpc::ClientContext context;
    inference::RepositoryModelUnloadRequest request;
    request.set_model_name(name);
    // tritonclient always sends this flag.
    (*request.mutable_parameters())["unload_dependents"].set_bool_param(dependents);
    inference::RepositoryModelUnloadResponse response;
    return stub_->RepositoryModelUnload(&context, request, &response);
  };

  EXPECT_TRUE(load("sleepy").ok());
  grpc::ClientContext c1;
  inference::ModelReadyRequest ready_request;
  ready_request.set_name("sleepy");
  inference::ModelReadyResponse ready;
  ASSERT_TRUE(stub_->ModelReady(&c1, ready_request, &ready).ok());
  EXPECT_TRUE(ready.ready());

  EXPECT_TRUE(unload("sleepy").ok());
  EXPECT_TRUE(unload("sleepy", /*dependents=*/true).ok());
  EXPECT_EQ(load("nope").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(load("").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(fake_.load_calls(),
              ElementsAre("load:sleepy", "unload:sleepy", "unload+dependents:sleepy", "load:nope"));

  fake_.SetExplicitControl(false);
  EXPECT_EQ(load("identity").error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(unload("identity").error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

// Triton's overrides: a file's contents travel as bytes (tritonclient's bytes_param), as is.
TEST_F(GrpcFrontendTest, RepositoryLoadPassesItsConfigAndFiles) {
  grpc::ClientContext context;
  inference::RepositoryModelLoadRequest request;
  request.set_model_name("identity");
  (*request.mutable_parameters())["config"].set_string_param(R"({"max_batch_size":0})");
  (*request.mutable_parameters())["file:1/model.onnx"].set_bytes_param(std::string("\0\x01", 2));
  inference::RepositoryModelLoadResponse response;
  const grpc::Status status = stub_->RepositoryModelLoad(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(fake_.load_calls(), ElementsAre("load:identity"));
  const LoadOverride sent = fake_.last_load();
  EXPECT_EQ(sent.config_json, R"({"max_batch_size":0})");
  EXPECT_EQ(sent.files,
            (std::map<std::string, std::string>{{"1/model.onnx", std::string("\0\x01", 2)}}));

  grpc::ClientContext again;
  request.mutable_parameters()->erase("config");
  const grpc::Status alone = stub_->RepositoryModelLoad(&again, request, &response);
  EXPECT_EQ(alone.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(alone.error_message(), HasSubstr("needs the 'config' parameter too"));
}

// ---------------------------------------------------------------- ModelInfer

struct DtypeCase {
  std::string name;
  std::string raw;  // two elements, as the tensor stores them
};

std::vector<DtypeCase> EveryFixedDtype() {
  return {
      {"BOOL", Bytes<uint8_t>({1, 0})},
      {"UINT8", Bytes<uint8_t>({0, 255})},
      {"UINT16", Bytes<uint16_t>({1, 65535})},
      {"UINT32", Bytes<uint32_t>({7, 4294967295u})},
      {"UINT64", Bytes<uint64_t>({9, 18446744073709551615ull})},
      {"INT8", Bytes<int8_t>({-128, 127})},
      {"INT16", Bytes<int16_t>({-32768, 32767})},
      {"INT32", Bytes<int32_t>({-5, 2147483647})},
      {"INT64", Bytes<int64_t>({-6, 9223372036854775807ll})},
      {"FP16", Bytes<uint16_t>({0x3c00, 0xc000})},  // 1.0, -2.0
      {"BF16", Bytes<uint16_t>({0x3f80, 0xc000})},  // 1.0, -2.0
      {"FP32", Bytes<float>({1.5f, -2.25f})},
      {"FP64", Bytes<double>({3.125, -1e300})},
  };
}

TEST_F(GrpcFrontendTest, InferRawEveryDatatype) {
  auto cases = EveryFixedDtype();
  cases.push_back({"BYTES", BytesElements({"hello", ""})});
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    ModelInferResponse response;
    const grpc::Status status = Infer(RawRequest(c.name, {1, 2}, c.raw), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    const InferRequest seen = fake_.last_request();
    ASSERT_EQ(seen.inputs.size(), 1u);
    EXPECT_EQ(DataTypeName(seen.inputs[0].dtype), c.name);
    EXPECT_THAT(seen.inputs[0].shape, ElementsAre(1, 2));
    EXPECT_EQ(seen.inputs[0].data, c.raw);

    ASSERT_EQ(response.outputs_size(), 1);
    ASSERT_EQ(response.raw_output_contents_size(), 1);
    EXPECT_EQ(response.outputs(0).name(), "OUT_INPUT0");
    EXPECT_EQ(response.outputs(0).datatype(), c.name);
    EXPECT_THAT(response.outputs(0).shape(), ElementsAre(1, 2));
    EXPECT_FALSE(response.outputs(0).has_contents());
    EXPECT_EQ(response.raw_output_contents(0), c.raw);
  }
}

TEST_F(GrpcFrontendTest, InferTypedEveryDatatype) {
  struct TypedCase {
    std::string dtype;
    std::function<void(inference::InferTensorContents*)> fill;
    std::string expected;
  };
  const std::vector<TypedCase> cases = {
      {"BOOL", [](auto* c) { c->add_bool_contents(true); c->add_bool_contents(false); },
       Bytes<uint8_t>({1, 0})},
      {"UINT8", [](auto* c) { c->add_uint_contents(0); c->add_uint_contents(255); },
       Bytes<uint8_t>({0, 255})},
      {"UINT16", [](auto* c) { c->add_uint_contents(1); c->add_uint_contents(65535); },
       Bytes<uint16_t>({1, 65535})},
      {"UINT32", [](auto* c) { c->add_uint_contents(7); c->add_uint_contents(4294967295u); },
       Bytes<uint32_t>({7, 4294967295u})},
      {"UINT64",
       [](auto* c) { c->add_uint64_contents(9); c->add_uint64_contents(18446744073709551615ull); },
       Bytes<uint64_t>({9, 18446744073709551615ull})},
      {"INT8", [](auto* c) { c->add_int_contents(-128); c->add_int_contents(127); },
       Bytes<int8_t>({-128, 127})},
      {"INT16", [](auto* c) { c->add_int_contents(-32768); c->add_int_contents(32767); },
       Bytes<int16_t>({-32768, 32767})},
      {"INT32", [](auto* c) { c->add_int_contents(-5); c->add_int_contents(2147483647); },
       Bytes<int32_t>({-5, 2147483647})},
      {"INT64",
       [](auto* c) { c->add_int64_contents(-6); c->add_int64_contents(9223372036854775807ll); },
       Bytes<int64_t>({-6, 9223372036854775807ll})},
      {"FP32", [](auto* c) { c->add_fp32_contents(1.5f); c->add_fp32_contents(-2.25f); },
       Bytes<float>({1.5f, -2.25f})},
      {"FP64", [](auto* c) { c->add_fp64_contents(3.125); c->add_fp64_contents(-1e300); },
       Bytes<double>({3.125, -1e300})},
      {"BYTES", [](auto* c) { c->add_bytes_contents("hello"); c->add_bytes_contents(""); },
       BytesElements({"hello", ""})},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.dtype);
    ModelInferRequest request;
    request.set_model_name("identity");
    auto* in = request.add_inputs();
    in->set_name("INPUT0");
    in->set_datatype(c.dtype);
    in->add_shape(2);
    c.fill(in->mutable_contents());
    ModelInferResponse response;
    const grpc::Status status = Infer(request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(fake_.last_request().inputs.at(0).data, c.expected);
    // Outputs always come back raw, whatever the request used.
    ASSERT_EQ(response.raw_output_contents_size(), 1);
    EXPECT_EQ(response.raw_output_contents(0), c.expected);
    EXPECT_FALSE(response.outputs(0).has_contents());
  }
}

TEST_F(GrpcFrontendTest, InferEchoesIdVersionAndOrdersOutputsAsRequested) {
  ModelInferRequest request;
  request.set_model_name("identity");
  request.set_model_version("1");
  request.set_id("req-42");
  for (const char* name : {"a", "b", "c"}) {
    auto* in = request.add_inputs();
    in->set_name(name);
    in->set_datatype("BYTES");
    in->add_shape(1);
    request.add_raw_input_contents(BytesElements({std::string("value-") + name}));
  }
  // Requested in an order different from the inputs'.
  for (const char* name : {"OUT_c", "OUT_a", "OUT_b"}) {
    auto* out = request.add_outputs();
    out->set_name(name);
    (*out->mutable_parameters())["binary_data"].set_bool_param(true);
  }
  (*request.mutable_parameters())["priority"].set_int64_param(3);
  (*request.mutable_parameters())["note"].set_string_param("x");
  (*request.mutable_parameters())["ratio"].set_double_param(0.5);
  (*request.mutable_parameters())["big"].set_uint64_param(17);

  ModelInferResponse response;
  ASSERT_TRUE(Infer(request, &response).ok());
  EXPECT_EQ(response.id(), "req-42");
  EXPECT_EQ(response.model_name(), "identity");
  EXPECT_EQ(response.model_version(), "1");
  ASSERT_EQ(response.outputs_size(), 3);
  ASSERT_EQ(response.raw_output_contents_size(), 3);
  const char* expected[] = {"c", "a", "b"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(response.outputs(i).name(), std::string("OUT_") + expected[i]);
    EXPECT_EQ(response.raw_output_contents(i),
              BytesElements({std::string("value-") + expected[i]}));
  }
  EXPECT_EQ(response.parameters().at("echoed_params").int64_param(), 4);

  const InferRequest seen = fake_.last_request();
  EXPECT_EQ(seen.id, "req-42");
  EXPECT_EQ(seen.model_version, "1");
  ASSERT_EQ(seen.outputs.size(), 3u);
  EXPECT_EQ(std::get<bool>(seen.outputs[0].parameters.at("binary_data")), true);
  EXPECT_EQ(std::get<int64_t>(seen.parameters.at("priority")), 3);
  EXPECT_EQ(std::get<std::string>(seen.parameters.at("note")), "x");
  EXPECT_EQ(std::get<double>(seen.parameters.at("ratio")), 0.5);
  EXPECT_EQ(std::get<int64_t>(seen.parameters.at("big")), 17);
}

TEST_F(GrpcFrontendTest, InferPassesTheClientDeadline) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::hours(1));
  ModelInferResponse response;
  ASSERT_TRUE(stub_->ModelInfer(&context, RawRequest("FP32", {1}, Bytes<float>({1})), &response)
                  .ok());
  EXPECT_NE(fake_.last_request().deadline, std::chrono::steady_clock::time_point::max());

  ASSERT_TRUE(Infer(RawRequest("FP32", {1}, Bytes<float>({1})), &response).ok());
  EXPECT_EQ(fake_.last_request().deadline, std::chrono::steady_clock::time_point::max());
}

TEST_F(GrpcFrontendTest, InferErrorCodes) {
  ModelInferResponse response;
  ModelInferRequest request = RawRequest("FP32", {1}, Bytes<float>({1}));

  request.set_model_name("nope");
  grpc::Status status = Infer(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("nope"));

  request.set_model_name("identity");
  request.set_model_version("9");
  EXPECT_EQ(Infer(request, &response).error_code(), grpc::StatusCode::NOT_FOUND);

  request.set_model_version("");
  request.set_model_name("fail_unavailable");
  status = Infer(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(), "queue is full");

  request.set_model_name("fail_invalid");
  status = Infer(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "input 'INPUT0' is wrong");

  // An unknown requested output is the facade's call (NOT_FOUND here).
  request = RawRequest("FP32", {1}, Bytes<float>({1}));
  request.add_outputs()->set_name("OUT_missing");
  EXPECT_EQ(Infer(request, &response).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(GrpcFrontendTest, InferAsyncHandler) {
  fake_.SetAsync(true);
  ModelInferRequest request = RawRequest("INT32", {3}, Bytes<int32_t>({1, 2, 3}));
  request.set_id("async");
  ModelInferResponse response;
  ASSERT_TRUE(Infer(request, &response).ok());
  EXPECT_EQ(response.id(), "async");
  EXPECT_EQ(response.raw_output_contents(0), Bytes<int32_t>({1, 2, 3}));
  request.set_model_name("fail_unavailable");
  EXPECT_EQ(Infer(request, &response).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(GrpcFrontendTest, ConcurrentCalls) {
  fake_.SetAsync(true);
  constexpr int kThreads = 8;
  constexpr int kCallsEach = 25;
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCallsEach; ++i) {
        const int64_t value = t * 1000 + i;
        ModelInferRequest request = RawRequest("INT64", {1}, Bytes<int64_t>({value}));
        request.set_id(std::to_string(value));
        ModelInferResponse response;
        if (Infer(request, &response).ok() && response.id() == std::to_string(value) &&
            response.raw_output_contents(0) == Bytes<int64_t>({value})) {
          ++good;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), kThreads * kCallsEach);
}

// ---------------------------------------------------------------- bad input

TEST_F(GrpcFrontendTest, RejectsRawAndTypedMixed) {
  ModelInferRequest request = RawRequest("INT32", {1}, Bytes<int32_t>({1}));
  request.mutable_inputs(0)->mutable_contents()->add_int_contents(1);
  ExpectRejected(request, grpc::StatusCode::INVALID_ARGUMENT,
                 "contents field must not be specified when using raw_input_contents for "
                 "'INPUT0'");

  // One raw, one typed.
  auto* typed = request.add_inputs();
  request.mutable_inputs(0)->clear_contents();
  typed->set_name("INPUT1");
  typed->set_datatype("INT32");
  typed->add_shape(1);
  typed->mutable_contents()->add_int_contents(2);
  ExpectRejected(request, grpc::StatusCode::INVALID_ARGUMENT, "'INPUT1'");
}

TEST_F(GrpcFrontendTest, RejectsRawCountMismatch) {
  ModelInferRequest request = RawRequest("INT32", {1}, Bytes<int32_t>({1}));
  request.add_raw_input_contents(Bytes<int32_t>({2}));
  ExpectRejected(request, grpc::StatusCode::INVALID_ARGUMENT,
                 "expected 1 raw_input_contents entries (one per input) but got 2");

  auto* second = request.add_inputs();
  second->set_name("INPUT1");
  second->set_datatype("INT32");
  second->add_shape(1);
  auto* third = request.add_inputs();
  *third = *second;
  third->set_name("INPUT2");
  ExpectRejected(request, grpc::StatusCode::INVALID_ARGUMENT, "expected 3");
}

TEST_F(GrpcFrontendTest, RejectsUnknownDatatype) {
  ExpectRejected(RawRequest("FLOAT", {1}, Bytes<float>({1})), grpc::StatusCode::INVALID_ARGUMENT,
                 "input 'INPUT0' has unknown datatype 'FLOAT'");
  ExpectRejected(RawRequest("", {1}, Bytes<float>({1})), grpc::StatusCode::INVALID_ARGUMENT,
                 "unknown datatype ''");
}

TEST_F(GrpcFrontendTest, RejectsRawLengthThatDoesNotMatchTheShape) {
  ExpectRejected(RawRequest("FP32", {2, 2}, Bytes<float>({1, 2, 3})),
                 grpc::StatusCode::INVALID_ARGUMENT,
                 "input 'INPUT0' of shape [2,2] and datatype FP32 needs 16 bytes but "
                 "raw_input_contents[0] has 12");
  ExpectRejected(RawRequest("FP16", {3}, std::string(5, '\0')),
                 grpc::StatusCode::INVALID_ARGUMENT, "needs 6 bytes");
}

TEST_F(GrpcFrontendTest, RejectsTypedCountAndFieldMismatch) {
  ModelInferRequest request;
  request.set_model_name("identity");
  auto* in = request.add_inputs();
  in->set_name("INPUT0");
  in->set_datatype("FP32");
  in->add_shape(3);
  in->mutable_contents()->add_fp32_contents(1);
  ExpectRejected(request, grpc::StatusCode::INVALID_ARGUMENT,
                 "input 'INPUT0' has 1 elements in contents.fp32_contents but its shape needs 3");

  in->mutable_contents()->Clear();
  for (int i = 0; i < 3; ++i) in->mutable_contents()->add_int_contents(i);
  ExpectRejected(request, grpc::StatusCode::INVALID_ARGUMENT,
                 "carries data in contents.int_contents; expected contents.fp32_contents");

  in->set_datatype("FP16");
  ExpectRejected(request, grpc::StatusCode::INVALID_ARGUMENT,
                 "input 'INPUT0' of datatype FP16 has no typed representation");

  in->set_datatype("INT8");
  in->mutable_contents()->set_int_contents(2, 300);
  ExpectRejected(request, grpc::StatusCode::INVALID_ARGUMENT,
                 "input 'INPUT0' element 2 has value 300, out of range");

  in->clear_contents();
  ExpectRejected(request, grpc::StatusCode::INVALID_ARGUMENT, "input 'INPUT0' has no data");
}

TEST_F(GrpcFrontendTest, RejectsNegativeAndHugeDimsWithoutAllocating) {
  ExpectRejected(RawRequest("FP32", {1, -3}, Bytes<float>({1})),
                 grpc::StatusCode::INVALID_ARGUMENT, "negative dimension -3");
  // 10^12 elements: refused from the shape alone, before anything is sized by it. No
  // message within the limit holds them: INVALID_ARGUMENT, not RESOURCE_EXHAUSTED (which a
  // retry policy retries).
  ExpectRejected(RawRequest("FP32", {1, 1000000000000}, Bytes<float>({1})),
                 grpc::StatusCode::INVALID_ARGUMENT,
                 "input 'INPUT0': shape [1,1000000000000] has more elements than a message of "
                 "at most");
  // Overflowing int64 when multiplied.
  ExpectRejected(RawRequest("INT8", {4611686018427387904, 4}, "x"),
                 grpc::StatusCode::INVALID_ARGUMENT, "input 'INPUT0'");
  // Typed: the huge count is not used to reserve either.
  ModelInferRequest typed;
  typed.set_model_name("identity");
  auto* in = typed.add_inputs();
  in->set_name("INPUT0");
  in->set_datatype("BYTES");
  in->add_shape(1);
  in->add_shape(1000000000000);
  in->mutable_contents()->add_bytes_contents("a");
  ExpectRejected(typed, grpc::StatusCode::INVALID_ARGUMENT, "input 'INPUT0'");
}

TEST_F(GrpcFrontendTest, RejectsInvalidBytes) {
  // A truncated length prefix.
  ExpectRejected(RawRequest("BYTES", {1}, std::string("\x05\x00", 2)),
                 grpc::StatusCode::INVALID_ARGUMENT, "INPUT0");
  // A length beyond the data.
  ExpectRejected(RawRequest("BYTES", {1}, std::string("\x09\x00\x00\x00" "abc", 7)),
                 grpc::StatusCode::INVALID_ARGUMENT, "INPUT0");
  // Fewer elements than the shape holds, and more.
  ExpectRejected(RawRequest("BYTES", {3}, BytesElements({"a", "b"})),
                 grpc::StatusCode::INVALID_ARGUMENT, "INPUT0");
  ExpectRejected(RawRequest("BYTES", {1}, BytesElements({"a", "b"})),
                 grpc::StatusCode::INVALID_ARGUMENT, "INPUT0");
}

TEST_F(GrpcFrontendTest, RejectsMissingNames) {
  ModelInferRequest request = RawRequest("FP32", {1}, Bytes<float>({1}), "");
  ExpectRejected(request, grpc::StatusCode::INVALID_ARGUMENT, "inputs[0] has no name");

  request = RawRequest("FP32", {1}, Bytes<float>({1}));
  request.add_outputs();
  ExpectRejected(request, grpc::StatusCode::INVALID_ARGUMENT, "outputs[0] has no name");

  request = RawRequest("FP32", {1}, Bytes<float>({1}));
  request.set_model_name("");
  ExpectRejected(request, grpc::StatusCode::INVALID_ARGUMENT, "model_name is empty");

  request = RawRequest("FP32", {1}, Bytes<float>({1}));
  (*request.mutable_parameters())["empty"];
  ExpectRejected(request, grpc::StatusCode::INVALID_ARGUMENT, "parameter 'empty' has no value");
}

TEST_F(GrpcFrontendTest, KeepsServingAfterBadInput) {
  ExpectRejected(RawRequest("FP32", {1, -1}, ""), grpc::StatusCode::INVALID_ARGUMENT, "negative");
  ModelInferResponse response;
  EXPECT_TRUE(Infer(RawRequest("FP32", {1}, Bytes<float>({2})), &response).ok());
}

// ---------------------------------------------------------------- large messages

TEST_F(GrpcFrontendTest, MessagesOverFourMegabytesBothWays) {
  constexpr size_t kFloats = 3 * 1024 * 1024;  // 12 MiB each way
  std::vector<float> values(kFloats);
  for (size_t i = 0; i < kFloats; ++i) values[i] = static_cast<float>(i % 1000);
  const std::string raw = Bytes(values);
  ModelInferResponse response;
  const grpc::Status status =
      Infer(RawRequest("FP32", {1, static_cast<int64_t>(kFloats)}, raw), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  EXPECT_EQ(response.raw_output_contents(0).size(), raw.size());
  EXPECT_TRUE(response.raw_output_contents(0) == raw);
}

TEST_F(GrpcFrontendTest, MessageOverTheConfiguredLimitIsRefused) {
  server_->Shutdown(std::chrono::milliseconds(0));
  StartServer(1 << 20);  // 1 MiB
  ModelInferResponse response;
  const grpc::Status status =
      Infer(RawRequest("UINT8", {2 << 20}, std::string(2 << 20, 'x')), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(fake_.infer_calls(), 0);
  // The element bound follows the limit too: 2^20 + 1 one-byte elements cannot fit.
  ExpectRejected(RawRequest("UINT8", {(1 << 20) + 1}, "x"), grpc::StatusCode::INVALID_ARGUMENT,
                 "INPUT0");
}

// ---------------------------------------------------------------- streaming

// Sends `requests` on one stream, half-closes, and collects every response.
struct StreamResult {
  std::vector<ModelStreamInferResponse> responses;
  grpc::Status status;
};

StreamResult RunStream(GRPCInferenceService::Stub& stub,
                       const std::vector<ModelInferRequest>& requests) {
  StreamResult result;
  grpc::ClientContext context;
  auto stream = stub.ModelStreamInfer(&context);
  std::thread reader([&] {
    ModelStreamInferResponse response;
    while (stream->Read(&response)) result.responses.push_back(response);
  });
  for (const auto& r : requests) {
    if (!stream->Write(r)) break;
  }
  stream->WritesDone();
  reader.join();
  result.status = stream->Finish();
  return result;
}

std::vector<ModelInferRequest> StreamRequests(int n, int failing_index) {
  std::vector<ModelInferRequest> out;
  for (int i = 0; i < n; ++i) {
    ModelInferRequest r;
    r.set_model_name(i == failing_index ? "fail_invalid" : "identity");
    r.set_id("s" + std::to_string(i));
    auto* in = r.add_inputs();
    in->set_name("INPUT0");
    in->set_datatype("INT32");
    in->add_shape(1);
    r.add_raw_input_contents(Bytes<int32_t>({i}));
    out.push_back(std::move(r));
  }
  return out;
}

void ExpectStreamAnswers(const StreamResult& result, int n, const std::set<int>& failing) {
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_EQ(static_cast<int>(result.responses.size()), n);
  std::set<std::string> seen;
  for (const auto& r : result.responses) {
    const std::string& id = r.infer_response().id();
    ASSERT_TRUE(seen.insert(id).second) << "answered twice: " << id;
    const int i = std::stoi(id.substr(1));
    // Each is its request's last, as Triton marks every stream response, errors included.
    const auto& parameters = r.infer_response().parameters();
    ASSERT_TRUE(parameters.contains("triton_final_response")) << id;
    EXPECT_TRUE(parameters.at("triton_final_response").bool_param()) << id;
    if (failing.count(i)) {
      EXPECT_FALSE(r.error_message().empty()) << id;
    } else {
      EXPECT_EQ(r.error_message(), "") << id;
      ASSERT_EQ(r.infer_response().raw_output_contents_size(), 1) << id;
      EXPECT_EQ(r.infer_response().raw_output_contents(0), Bytes<int32_t>({i}));
    }
  }
}

TEST_F(GrpcFrontendTest, StreamGoesOnAfterAFailedRequest) {
  auto requests = StreamRequests(5, /*failing_index=*/2);
  const StreamResult result = RunStream(*stub_, requests);
  ExpectStreamAnswers(result, 5, {2});
  for (const auto& r : result.responses) {
    if (r.infer_response().id() == "s2") {
      EXPECT_EQ(r.error_message(), "input 'INPUT0' is wrong");
      EXPECT_EQ(r.infer_response().model_name(), "fail_invalid");
    }
  }
}

// The limit is on what clients send. An answer over it (BYTES grow, a decoder's output)
// is sent: it failed its call before, and on a stream it ended the stream, dropping the
// answers computed behind it.
TEST_F(GrpcFrontendTest, AnAnswerOverTheRequestLimitIsSentAndTheStreamGoesOn) {
  server_->Shutdown(std::chrono::milliseconds(0));
  StartServer(1 << 20);  // 1 MiB
  fake_.SetHandler([](const InferRequest& request) -> StatusOr<InferResponse> {
    auto response = IdentityHandler(request);
    if (response.ok() && request.id == "s1") {
      for (int copy = 0; copy < 3; ++copy) {
        Tensor more = response->outputs.at(0);
        more.name += std::to_string(copy);
        response->outputs.push_back(std::move(more));
      }
    }
    return response;
  });
  auto requests = StreamRequests(5, -1);
  const std::string half_mib(512 * 1024, 'x');
  requests[1].mutable_inputs(0)->set_datatype("UINT8");
  requests[1].mutable_inputs(0)->set_shape(0, static_cast<int64_t>(half_mib.size()));
  requests[1].set_raw_input_contents(0, half_mib);
  const StreamResult result = RunStream(*stub_, requests);
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_EQ(result.responses.size(), 5u);
  for (const auto& r : result.responses) {
    EXPECT_EQ(r.error_message(), "") << r.infer_response().id();
    if (r.infer_response().id() != "s1") continue;
    ASSERT_EQ(r.infer_response().raw_output_contents_size(), 4);
    for (const auto& out : r.infer_response().raw_output_contents()) EXPECT_TRUE(out == half_mib);
  }
  ModelInferRequest unary = requests[1];
  ModelInferResponse response;
  const grpc::Status status = Infer(unary, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.raw_output_contents_size(), 4);
}

TEST_F(GrpcFrontendTest, StreamReportsBadInputAndUnknownModelInline) {
  auto requests = StreamRequests(4, -1);
  requests[1].mutable_inputs(0)->set_datatype("NOPE");
  requests[3].set_model_name("nope");
  const StreamResult result = RunStream(*stub_, requests);
  ExpectStreamAnswers(result, 4, {1, 3});
  for (const auto& r : result.responses) {
    if (r.infer_response().id() == "s1") {
      EXPECT_THAT(r.error_message(), HasSubstr("unknown datatype 'NOPE'"));
    }
  }
}

// A stream message that protobuf cannot parse is answered on the stream, naming its type,
// and the stream goes on. Left to gRPC, the stream ended OK with that request unanswered.
TEST_F(GrpcFrontendTest, StreamAnswersAMessageThatDoesNotParseAndGoesOn) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  grpc::ClientContext context;
  grpc::CompletionQueue cq;
  auto stream =
      generic.PrepareCall(&context, "/inference.GRPCInferenceService/ModelStreamInfer", &cq);
  auto step = [&](auto op) {
    void* tag = nullptr;
    bool ok = false;
    op(reinterpret_cast<void*>(1));
    EXPECT_TRUE(cq.Next(&tag, &ok));
    return ok;
  };
  auto write = [&](const std::string& bytes) {
    grpc::Slice slice(bytes);
    grpc::ByteBuffer message(&slice, 1);
    return step([&](void* tag) { stream->Write(message, tag); });
  };
  ASSERT_TRUE(step([&](void* tag) { stream->StartCall(tag); }));
  ASSERT_TRUE(
      write(std::string("\x0a\x10"
                        "ab")));  // model_name's length runs past the end
  ASSERT_TRUE(write(StreamRequests(1, -1)[0].SerializeAsString()));
  ASSERT_TRUE(step([&](void* tag) { stream->WritesDone(tag); }));
  std::vector<inference::ModelStreamInferResponse> answers;
  for (int i = 0; i < 2; ++i) {
    grpc::ByteBuffer in;
    ASSERT_TRUE(step([&](void* tag) { stream->Read(&in, tag); })) << "answer " << i;
    inference::ModelStreamInferResponse answer;
    ASSERT_TRUE(
        grpc::SerializationTraits<inference::ModelStreamInferResponse>::Deserialize(&in, &answer)
            .ok());
    answers.push_back(std::move(answer));
  }
  grpc::Status status;
  ASSERT_TRUE(step([&](void* tag) { stream->Finish(&status, tag); }));
  EXPECT_TRUE(status.ok()) << status.error_message();
  // The refusal comes first: it is answered on arrival, while the good one runs.
  EXPECT_THAT(answers[0].error_message(),
              HasSubstr("the request is not a valid inference.ModelInferRequest"));
  EXPECT_EQ(answers[1].error_message(), "");
  EXPECT_EQ(answers[1].infer_response().id(), "s0");
  EXPECT_EQ(fake_.infer_calls(), 1);
}

TEST_F(GrpcFrontendTest, StreamWithAsyncHandler) {
  fake_.SetAsync(true);
  const StreamResult result = RunStream(*stub_, StreamRequests(20, /*failing_index=*/7));
  ExpectStreamAnswers(result, 20, {7});
}

// Answers come in the order the requests came, as Triton's do for a model that is not
// decoupled (a client may pair them by position): a first request that takes longer holds
// back the answers of those behind it, errors among them.
TEST_F(GrpcFrontendTest, StreamAnswersInTheOrderTheRequestsCame) {
  fake_.SetAsync(true);  // each request on a thread of its own, as a real scheduler
  fake_.SetHandler([](const InferRequest& request) -> StatusOr<InferResponse> {
    if (request.id == "s0") std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return IdentityHandler(request);
  });
  auto requests = StreamRequests(6, /*failing_index=*/3);
  requests[4].mutable_inputs(0)->set_datatype("NOPE");  // refused before the facade
  const StreamResult result = RunStream(*stub_, requests);
  ExpectStreamAnswers(result, 6, {3, 4});
  ASSERT_EQ(result.responses.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(result.responses[static_cast<size_t>(i)].infer_response().id(),
              "s" + std::to_string(i));
  }
}

TEST_F(GrpcFrontendTest, StreamLongerThanTheOutstandingLimit) {
  // More requests than the reactor keeps outstanding: it must pause reading and resume,
  // losing nothing.
  fake_.SetAsync(true);
  const StreamResult result = RunStream(*stub_, StreamRequests(300, /*failing_index=*/150));
  ExpectStreamAnswers(result, 300, {150});
}

TEST_F(GrpcFrontendTest, EmptyStreamEndsOk) {
  const StreamResult result = RunStream(*stub_, {});
  EXPECT_TRUE(result.status.ok());
  EXPECT_TRUE(result.responses.empty());
}

TEST_F(GrpcFrontendTest, ConcurrentStreams) {
  fake_.SetAsync(true);
  std::vector<std::future<StreamResult>> futures;
  for (int s = 0; s < 4; ++s) {
    futures.push_back(std::async(std::launch::async, [&] {
      return RunStream(*stub_, StreamRequests(30, /*failing_index=*/10));
    }));
  }
  for (auto& f : futures) ExpectStreamAnswers(f.get(), 30, {10});
}

// ---------------------------------------------------------------- lifecycle

TEST_F(GrpcFrontendTest, ShutdownLetsInFlightCallsFinish) {
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false;
  bool release = false;
  fake_.SetAsync(true);
  fake_.SetHandler([&](const InferRequest& request) -> StatusOr<InferResponse> {
    std::unique_lock lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return IdentityHandler(request);
  });
  auto call = std::async(std::launch::async, [&] {
    ModelInferResponse response;
    return Infer(RawRequest("FP32", {1}, Bytes<float>({4})), &response);
  });
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return entered; });
  }
  auto shutdown = std::async(std::launch::async,
                             [&] { server_->Shutdown(std::chrono::seconds(30)); });
  // Release the request only once the server refuses new calls, so that it really
  // completes inside the grace period.
  for (;;) {
    grpc::ClientContext probe;
    probe.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    inference::ServerLiveResponse live;
    if (!stub_->ServerLive(&probe, {}, &live).ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  const grpc::Status status = call.get();
  EXPECT_TRUE(status.ok()) << status.error_message();
  shutdown.get();

  // Closed now, and a second Shutdown is a no-op.
  server_->Shutdown(std::chrono::milliseconds(0));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  inference::ServerLiveResponse live;
  EXPECT_FALSE(stub_->ServerLive(&context, {}, &live).ok());
}

// How long a test waits for something that should happen at once: a hang guard, not a
// timing assertion. Far below the 60 s grace the drain tests shut down with.
constexpr auto kHangGuard = std::chrono::seconds(20);

// A facade handler that holds every request until Open(), so that a test can keep
// requests in flight for as long as it needs. Must outlive the requests it holds.
class GatedHandler {
 public:
  FakeInferenceServer::Handler handler() {
    return [this](const InferRequest& request) -> StatusOr<InferResponse> {
      std::unique_lock lock(mu_);
      ++entered_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return open_; });
      return IdentityHandler(request);
    };
  }
  [[nodiscard]] bool WaitEntered(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kHangGuard, [&] { return entered_ >= n; });
  }
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // Opens the gate when it goes out of scope: declared after a future that waits for
  // Shutdown, it keeps a failed assertion from turning into a hang.
  struct OpenOnExit {
    GatedHandler& gate;
    ~OpenOnExit() { gate.Open(); }
  };

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int entered_ = 0;
  bool open_ = false;
};

// A ModelStreamInfer call the test drives step by step; a thread collects the answers.
class OpenStream {
 public:
  explicit OpenStream(GRPCInferenceService::Stub& stub) : stream_(stub.ModelStreamInfer(&context_)) {
    reader_ = std::thread([this] {
      ModelStreamInferResponse response;
      while (stream_->Read(&response)) {
        std::lock_guard lock(mu_);
        responses_.push_back(response);
        cv_.notify_all();
      }
      std::lock_guard lock(mu_);
      ended_ = true;
      cv_.notify_all();
    });
  }
  ~OpenStream() {
    if (reader_.joinable()) {
      context_.TryCancel();
      reader_.join();
    }
  }

  bool Write(const ModelInferRequest& request) { return stream_->Write(request); }
  bool WritesDone() { return stream_->WritesDone(); }
  // True once `n` answers have arrived.
  [[nodiscard]] bool WaitResponses(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kHangGuard, [&] { return responses_.size() >= n; });
  }
  // Waits for the server to end the stream; nullopt if it does not (hang guard).
  std::optional<grpc::Status> WaitEnd() {
    {
      std::unique_lock lock(mu_);
      if (!cv_.wait_for(lock, kHangGuard, [&] { return ended_; })) return std::nullopt;
    }
    reader_.join();
    return stream_->Finish();
  }
  std::vector<ModelStreamInferResponse> responses() {
    std::lock_guard lock(mu_);
    return responses_;
  }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<ModelInferRequest, ModelStreamInferResponse>> stream_;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ModelStreamInferResponse> responses_;  // guarded by mu_
  bool ended_ = false;                               // guarded by mu_
};

// Returns once the server refuses new calls: by then GrpcServer::Shutdown has told every
// stream to drain (it does so before closing the listener).
void WaitUntilRefusing(GRPCInferenceService::Stub& stub) {
  for (;;) {
    grpc::ClientContext probe;
    probe.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    inference::ServerLiveResponse live;
    if (!stub.ServerLive(&probe, {}, &live).ok()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void ExpectDrainedStatus(const std::optional<grpc::Status>& status) {
  ASSERT_TRUE(status.has_value()) << "the stream did not end";
  EXPECT_EQ(status->error_code(), grpc::StatusCode::UNAVAILABLE) << status->error_message();
  EXPECT_EQ(status->error_message(), "the server is shutting down");
}

TEST_F(GrpcFrontendTest, IdleStreamDoesNotHoldShutdown) {
  OpenStream stream(*stub_);
  // One exchange first, so that the server surely holds the stream, idle, with a read
  // outstanding: the drain then finishes the call under that read.
  ASSERT_TRUE(stream.Write(StreamRequests(1, -1)[0]));
  ASSERT_TRUE(stream.WaitResponses(1));
  EXPECT_EQ(stream.responses()[0].error_message(), "");

  auto shutdown = std::async(std::launch::async,
                             [&] { server_->Shutdown(std::chrono::seconds(60)); });
  ExpectDrainedStatus(stream.WaitEnd());
  ASSERT_EQ(shutdown.wait_for(kHangGuard), std::future_status::ready)
      << "Shutdown waited for the idle stream";
  EXPECT_EQ(stream.responses().size(), 1u);
}

TEST_F(GrpcFrontendTest, DrainingStreamAnswersItsRequestInFlightThenEnds) {
  GatedHandler gate;
  fake_.SetAsync(true);
  fake_.SetHandler(gate.handler());
  const auto requests = StreamRequests(2, -1);
  OpenStream stream(*stub_);
  ASSERT_TRUE(stream.Write(requests[0]));
  ASSERT_TRUE(gate.WaitEntered(1));

  auto shutdown = std::async(std::launch::async,
                             [&] { server_->Shutdown(std::chrono::seconds(60)); });
  GatedHandler::OpenOnExit release{gate};
  WaitUntilRefusing(*stub_);
  // Read after the drain began, while s0 keeps the call open: refused, never run, and
  // answered after s0, in its place.
  ASSERT_TRUE(stream.Write(requests[1]));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(stream.responses().empty()) << "s1's answer went before s0's";
  EXPECT_EQ(shutdown.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "Shutdown returned with a request in flight";

  gate.Open();
  ExpectDrainedStatus(stream.WaitEnd());
  const auto responses = stream.responses();
  ASSERT_EQ(responses.size(), 2u);
  EXPECT_EQ(responses[0].infer_response().id(), "s0");
  EXPECT_EQ(responses[0].error_message(), "");
  ASSERT_EQ(responses[0].infer_response().raw_output_contents_size(), 1);
  EXPECT_EQ(responses[0].infer_response().raw_output_contents(0), Bytes<int32_t>({0}));
  EXPECT_EQ(responses[1].infer_response().id(), "s1");
  EXPECT_EQ(responses[1].error_message(), "the server is shutting down");
  ASSERT_EQ(shutdown.wait_for(kHangGuard), std::future_status::ready);
  EXPECT_EQ(fake_.infer_calls(), 1);
}

TEST_F(GrpcFrontendTest, DrainingStreamThatHadHalfClosedEndsOk) {
  GatedHandler gate;
  fake_.SetAsync(true);
  fake_.SetHandler(gate.handler());
  OpenStream stream(*stub_);
  ASSERT_TRUE(stream.Write(StreamRequests(1, -1)[0]));
  ASSERT_TRUE(stream.WritesDone());
  ASSERT_TRUE(gate.WaitEntered(1));

  auto shutdown = std::async(std::launch::async,
                             [&] { server_->Shutdown(std::chrono::seconds(60)); });
  GatedHandler::OpenOnExit release{gate};
  WaitUntilRefusing(*stub_);
  gate.Open();
  const auto status = stream.WaitEnd();
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(status->ok()) << status->error_message();
  ASSERT_EQ(stream.responses().size(), 1u);
  EXPECT_EQ(stream.responses()[0].error_message(), "");
  ASSERT_EQ(shutdown.wait_for(kHangGuard), std::future_status::ready);
}

TEST_F(GrpcFrontendTest, ShutdownWithIdleStreamsLetsUnaryCallsFinish) {
  GatedHandler gate;
  fake_.SetAsync(true);
  std::vector<std::unique_ptr<OpenStream>> streams;
  for (int i = 0; i < 3; ++i) {
    streams.push_back(std::make_unique<OpenStream>(*stub_));
    ASSERT_TRUE(streams.back()->Write(StreamRequests(1, -1)[0]));
    ASSERT_TRUE(streams.back()->WaitResponses(1));
  }
  fake_.SetHandler(gate.handler());
  constexpr int kCalls = 4;
  std::vector<std::future<grpc::Status>> calls;
  for (int i = 0; i < kCalls; ++i) {
    calls.push_back(std::async(std::launch::async, [&, i] {
      ModelInferResponse response;
      grpc::Status status = Infer(RawRequest("FP32", {1}, Bytes<float>({1.0f * i})), &response);
      if (status.ok() && response.raw_output_contents(0) != Bytes<float>({1.0f * i})) {
        return grpc::Status(grpc::StatusCode::DATA_LOSS, "wrong answer");
      }
      return status;
    }));
  }
  ASSERT_TRUE(gate.WaitEntered(kCalls));

  auto shutdown = std::async(std::launch::async,
                             [&] { server_->Shutdown(std::chrono::seconds(60)); });
  GatedHandler::OpenOnExit release{gate};
  // The idle streams end while the unary calls are still held.
  for (auto& s : streams) ExpectDrainedStatus(s->WaitEnd());
  WaitUntilRefusing(*stub_);
  gate.Open();
  for (auto& c : calls) {
    ASSERT_EQ(c.wait_for(kHangGuard), std::future_status::ready);
    const grpc::Status status = c.get();
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
  ASSERT_EQ(shutdown.wait_for(kHangGuard), std::future_status::ready);
}

// ---------------------------------------------------------------- cancellation

// Stands in for a scheduler whose instances are all busy: a request for model "queued"
// stays queued until its client goes away (the request's `cancelled` flag), and is then
// answered CANCELLED without running, as the batcher does. Other requests are echoed.
class QueuedUntilCancelled {
 public:
  FakeInferenceServer::Handler handler() {
    return [this](const InferRequest& request) -> StatusOr<InferResponse> {
      if (request.model_name != "queued") return IdentityHandler(request);
      {
        std::lock_guard lock(mu_);
        ++entered_;
        cv_.notify_all();
      }
      const auto give_up = std::chrono::steady_clock::now() + kHangGuard;
      const auto gone = [&] { return request.cancelled && request.cancelled->load(); };
      // The flag is a plain atomic (nothing to wait on): look at it until it is set.
      while (!gone() && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      std::lock_guard lock(mu_);
      if (gone()) {
        ++cancelled_;
      } else {
        ++ran_;
      }
      cv_.notify_all();
      if (gone()) return Cancelled("cancelled while queued; it never reached the model");
      return IdentityHandler(request);
    };
  }
  [[nodiscard]] bool WaitEntered(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kHangGuard, [&] { return entered_ >= n; });
  }
  // True once `n` queued requests were dropped because their client went away.
  [[nodiscard]] bool WaitCancelled(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kHangGuard, [&] { return cancelled_ >= n; });
  }
  int ran() {
    std::lock_guard lock(mu_);
    return ran_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int entered_ = 0;
  int cancelled_ = 0;
  int ran_ = 0;
};

ModelInferRequest QueuedRequest(const std::string& id) {
  ModelInferRequest r;
  r.set_model_name("queued");
  r.set_id(id);
  auto* in = r.add_inputs();
  in->set_name("INPUT0");
  in->set_datatype("INT32");
  in->add_shape(1);
  r.add_raw_input_contents(Bytes<int32_t>({7}));
  return r;
}

// The request messages being served are bounded, unary calls and streams together (and with
// the HTTP front end, which `fastpath serve` gives the same bound): a request that would pass it
// is RESOURCE_EXHAUSTED, or its answer's error_message on a stream, which goes on; it never
// reaches the model; the room comes back as the held requests are answered. Unbounded, 64
// outstanding requests a stream of 64 MiB each could be held, over any number of streams.
TEST_F(GrpcFrontendTest, RequestsPastTheBytesInFlightAreRefusedUntilTheHeldOnesAreAnswered) {
  server_->Shutdown(std::chrono::milliseconds(0));
  auto bound = std::make_shared<RequestBytes>(5000);
  StartServer(1 << 30, bound);
  GatedHandler gate;
  fake_.SetAsync(true);
  fake_.SetHandler(gate.handler());
  const ModelInferRequest large = RawRequest("UINT8", {3000}, std::string(3000, 'a'));
  auto held = std::async(std::launch::async, [&] {
    ModelInferResponse response;
    grpc::ClientContext context;
    return stub_->ModelInfer(&context, large, &response);
  });
  GatedHandler::OpenOnExit release{gate};
  ASSERT_TRUE(gate.WaitEntered(1));
  const uint64_t held_bytes = bound->held();
  EXPECT_GE(held_bytes, 3000u);  // the message as it came: the tensor and its framing

  {
    ModelInferResponse response;
    grpc::ClientContext context;  // a deadline: let through, the call would wait for the gate
    context.set_deadline(std::chrono::system_clock::now() + kHangGuard);
    const grpc::Status refused = stub_->ModelInfer(&context, large, &response);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_EQ(refused.error_message(),
              "the server holds " + std::to_string(held_bytes) +
                  " bytes of requests read or being served, and this one's " +
                  std::to_string(held_bytes) +
                  " bytes would pass its limit of 5000 (--max-request-bytes-in-flight); retry");
  }
  OpenStream stream(*stub_);
  ModelInferRequest on_stream = large;
  on_stream.set_id("big");
  ASSERT_TRUE(stream.Write(on_stream));
  ASSERT_TRUE(stream.WaitResponses(1));
  EXPECT_THAT(stream.responses()[0].error_message(), HasSubstr("would pass its limit of 5000"));
  EXPECT_EQ(stream.responses()[0].infer_response().id(), "big");
  EXPECT_EQ(fake_.infer_calls(), 1);
  EXPECT_EQ(bound->held(), held_bytes) << "a refused request kept its bytes";

  gate.Open();
  ASSERT_TRUE(held.get().ok());
  EXPECT_EQ(bound->held(), 0u) << "an answered request kept its bytes";
  // The same request now fits, on the stream that had it refused.
  ASSERT_TRUE(stream.Write(on_stream));
  ASSERT_TRUE(stream.WaitResponses(2));
  EXPECT_EQ(stream.responses()[1].error_message(), "");
  ASSERT_EQ(stream.responses()[1].infer_response().raw_output_contents_size(), 1);
  EXPECT_EQ(stream.responses()[1].infer_response().raw_output_contents(0), std::string(3000, 'a'));
  ASSERT_TRUE(stream.WritesDone());
  const std::optional<grpc::Status> end = stream.WaitEnd();
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(end->ok()) << end->error_message();
  EXPECT_EQ(bound->held(), 0u);
}

class GrpcCancellationTest : public GrpcFrontendTest {
 protected:
  void SetUp() override {
    GrpcFrontendTest::SetUp();
    fake_.AddModel(MakeModel("queued"));
    fake_.SetAsync(true);
    fake_.SetHandler(queue_.handler());
  }
  // The call after a cancelled one is answered as usual.
  void ExpectNextCallAnswered() {
    ModelInferResponse response;
    const grpc::Status status = Infer(RawRequest("INT32", {1}, Bytes<int32_t>({5})), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.raw_output_contents_size(), 1);
    EXPECT_EQ(response.raw_output_contents(0), Bytes<int32_t>({5}));
  }

  QueuedUntilCancelled queue_;
};

TEST_F(GrpcCancellationTest, UnaryCallCancelledByItsClientMarksItsRequest) {
  grpc::ClientContext context;
  ModelInferResponse response;
  auto call = std::async(std::launch::async, [&] {
    return stub_->ModelInfer(&context, QueuedRequest("c0"), &response);
  });
  ASSERT_TRUE(queue_.WaitEntered(1));
  context.TryCancel();
  ASSERT_EQ(call.wait_for(kHangGuard), std::future_status::ready);
  EXPECT_EQ(call.get().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(queue_.WaitCancelled(1)) << "the server never saw the cancellation";
  EXPECT_EQ(queue_.ran(), 0);
  ExpectNextCallAnswered();
}

// gRPC cancels a call whose deadline passes: its request is dropped like a cancelled one
// (and the scheduler also drops it by the deadline the front end passes on).
TEST_F(GrpcCancellationTest, UnaryCallPastItsDeadlineMarksItsRequest) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  ModelInferResponse response;
  const grpc::Status status = stub_->ModelInfer(&context, QueuedRequest("d0"), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  ASSERT_TRUE(queue_.WaitCancelled(1)) << "the server never saw the deadline pass";
  EXPECT_EQ(queue_.ran(), 0);
  ExpectNextCallAnswered();
}

TEST_F(GrpcCancellationTest, CancelledStreamMarksItsQueuedRequests) {
  {
    OpenStream stream(*stub_);
    ASSERT_TRUE(stream.Write(QueuedRequest("s0")));
    ASSERT_TRUE(stream.Write(QueuedRequest("s1")));
    ASSERT_TRUE(queue_.WaitEntered(2));
  }  // cancels the call
  ASSERT_TRUE(queue_.WaitCancelled(2)) << "the server never saw the stream cancelled";
  EXPECT_EQ(queue_.ran(), 0);
  ExpectNextCallAnswered();
  // A stream whose client half-closes is not cancelled: its requests run.
  const StreamResult result = RunStream(*stub_, StreamRequests(3, -1));
  ExpectStreamAnswers(result, 3, {});
}

// Only a call with no other call waiting behind it on its queue's thread may run its model
// there (InferRequest::caller_may_run_model). Run there, it would hold the calls behind it,
// and with one queue thread concurrent calls would run one after another at batch 1.
//
// The handler holds the server's only queue thread on one call while four more calls are
// sent. Nothing reads them meanwhile (that thread is also the one that polls the sockets),
// so once it is free they are all waiting: at least the first handled must be kept off the
// thread. The settle time before the release only lets the four calls reach the server's
// socket; nothing is timed. The last call handled has none behind it: it is offered the
// thread again.
TEST_F(GrpcFrontendTest, ACallWithCallsWaitingBehindItKeepsItsModelOffTheQueueThread) {
  std::mutex mu;
  std::condition_variable cv;
  bool holding = false;
  bool released = false;
  std::vector<std::pair<std::string, bool>> offered;  // id, caller_may_run_model; in order
  fake_.SetHandler([&](const InferRequest& request) -> StatusOr<InferResponse> {
    std::unique_lock lock(mu);
    offered.emplace_back(request.id, request.caller_may_run_model);
    if (request.id == "hold") {
      holding = true;
      cv.notify_all();
      cv.wait(lock, [&] { return released; });
    }
    return IdentityHandler(request);
  });
  auto call = [&](const std::string& id) {
    ModelInferRequest request = RawRequest("INT32", {1}, Bytes<int32_t>({7}));
    request.set_id(id);
    ModelInferResponse response;
    const grpc::Status status = Infer(request, &response);
    EXPECT_TRUE(status.ok()) << id << ": " << status.error_message();
    EXPECT_EQ(response.id(), id);
  };

  call("alone");
  std::thread hold([&] { call("hold"); });
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, kHangGuard, [&] { return holding; }));
  }
  constexpr int kWaiting = 4;
  std::vector<std::thread> waiting;
  for (int i = 0; i < kWaiting; ++i) waiting.emplace_back(call, "w" + std::to_string(i));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  {
    std::lock_guard lock(mu);
    released = true;
    cv.notify_all();
  }
  hold.join();
  for (auto& t : waiting) t.join();

  std::lock_guard lock(mu);
  ASSERT_EQ(offered.size(), 2u + kWaiting);
  EXPECT_EQ(offered[0], std::make_pair(std::string("alone"), true))
      << "a lone call is offered the thread";
  EXPECT_EQ(offered[1], std::make_pair(std::string("hold"), true));
  std::string order;
  for (size_t i = 2; i < offered.size(); ++i) {
    order += " " + offered[i].first + (offered[i].second ? ":may-run" : ":kept-off");
  }
  EXPECT_FALSE(offered[2].second) << "the first waiting call handled was offered the thread:"
                                  << order;
  EXPECT_TRUE(offered.back().second)
      << "the last call, with none behind it, was kept off:" << order;
}

// What another thread hands to a queue's thread (an instance's worker answering a call) runs
// on that thread, in the order handed over, each once, however many are handed over before
// the thread wakes; and at once when handed over on that thread itself.
TEST(GrpcQueuesTest, RunOnRunsHandedOverWorkOnTheQueueThreadInOrder) {
  grpc::ServerBuilder builder;
  grpc_internal::Queues queues(builder, 1);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(queues.Start().ok());
  grpc::ServerCompletionQueue* cq = queues.at(0);

  constexpr int kThreads = 3;
  constexpr int kEach = 2000;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<int>> ran(kThreads);  // per handing thread, in the order run
  int off_thread = 0;
  int inline_runs = 0;
  int total = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        queues.RunOn(cq, [&, t, i] {
          // On the queue's thread: handing over from here runs at once.
          bool ran_inline = false;
          queues.RunOn(cq, [&] { ran_inline = true; });
          std::lock_guard lock(mu);
          if (!grpc_internal::OnThreadOf(cq)) ++off_thread;
          if (ran_inline) ++inline_runs;
          ran[t].push_back(i);
          if (++total == kThreads * kEach) cv.notify_all();
        });
      }
    });
  }
  for (auto& thread : threads) thread.join();
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, kHangGuard, [&] { return total == kThreads * kEach; }))
        << total << " of " << kThreads * kEach << " ran";
  }
  EXPECT_EQ(off_thread, 0);
  EXPECT_EQ(inline_runs, kThreads * kEach);
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(ran[t].size(), static_cast<size_t>(kEach));
    for (int i = 0; i < kEach; ++i) ASSERT_EQ(ran[t][i], i) << "thread " << t;
  }
  EXPECT_FALSE(grpc_internal::OnThreadOf(cq));
  server->Shutdown();
  queues.Close();
}

TEST_F(GrpcFrontendTest, StartFailsOnATakenPort) {
  GrpcOptions options;
  options.address = "127.0.0.1";
  options.port = server_->port();
  auto second = GrpcServer::Start(fake_, options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr(std::to_string(server_->port())));
}

// A connection with no call open is closed once the idle timeout passes, which frees the
// descriptor of one that connected and never spoke (gRPC's own listener closed those after
// 120 s; fastpath's hands its connections over without that check). A stream open across
// several timeouts is a call: its connection stays.
TEST_F(GrpcFrontendTest, AConnectionWithNoCallOpenIsClosedAfterTheIdleTimeout) {
  GrpcOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  options.idle_timeout = std::chrono::milliseconds(300);
  auto started = GrpcServer::Start(fake_, options);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  const int port = (*started)->port();

  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0) << strerror(errno);
  timeval guard{};
  guard.tv_sec = std::chrono::duration_cast<std::chrono::seconds>(kHangGuard).count();
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof(guard));
  char buffer[4096];
  ssize_t got = 0;
  while ((got = recv(fd, buffer, sizeof(buffer), 0)) > 0) {
  }  // the server's SETTINGS, then its GOAWAY, then the end
  EXPECT_EQ(got, 0) << "the silent connection is still open: " << strerror(errno);
  close(fd);

  auto stub = NewStub(port);
  OpenStream stream(*stub);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_TRUE(stream.Write(StreamRequests(1, -1)[0]));
  ASSERT_TRUE(stream.WaitResponses(1));
  EXPECT_EQ(stream.responses()[0].error_message(), "");
  ASSERT_TRUE(stream.WritesDone());
  const std::optional<grpc::Status> ended = stream.WaitEnd();
  ASSERT_TRUE(ended.has_value());
  EXPECT_TRUE(ended->ok()) << ended->error_message();
}

TEST_F(GrpcFrontendTest, StartRejectsBadOptions) {
  GrpcOptions options;
  options.port = 70000;
  EXPECT_EQ(GrpcServer::Start(fake_, options).status().code(), StatusCode::kInvalidArgument);
  options.port = 0;
  options.max_message_bytes = 0;
  EXPECT_EQ(GrpcServer::Start(fake_, options).status().code(), StatusCode::kInvalidArgument);
  options.max_message_bytes = 1 << 20;
  options.idle_timeout = std::chrono::milliseconds(0);
  EXPECT_EQ(GrpcServer::Start(fake_, options).status().code(), StatusCode::kInvalidArgument);
  options.idle_timeout = std::chrono::seconds(1);
  options.address = "not an address";
  auto bad_address = GrpcServer::Start(fake_, options);
  EXPECT_EQ(bad_address.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_address.status().message(), HasSubstr("'not an address'"));
}

}  // namespace
}  // namespace fastpath::frontend
