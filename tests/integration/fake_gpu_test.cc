// The KIND_GPU path end to end on a machine without a GPU: the real `fastpath` binary with
// the suite's fake CUDA plugin EP (tests/fakes/fake_ort_ep) in its running mode
// (FASTPATH_FAKE_EP_RUNS=1), in which the EP named CUDAExecutionProvider claims every float
// MatMul and computes it on the host. The `square` model (OUTPUT0 = MatMul(INPUT0, INPUT0))
// on GPU 0 must be admitted, placed on CUDAExecutionProvider and return exact products.
#include <gmock/gmock.h>

#include <vector>

#include "integration_fixture.h"

namespace fastpath::integration {
namespace {

using ::testing::HasSubstr;

constexpr const char* kSquareConfig = R"(name: "square"
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
instance_group [ { kind: KIND_GPU count: 1 gpus: [ 0 ] } ]
)";

class FakeGpuTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override { return {}; }
  void PrepareRepository(testing::TempRepository& repo) override {
    repo.AddVersion("square", 1, "square");
    repo.WriteConfig("square", kSquareConfig);
  }
  std::vector<std::string> Environment() override {
    return {"FASTPATH_ORT_EP_LIBRARY_DIR=" FASTPATH_FAKE_ORT_EP_DIR, "FASTPATH_FAKE_EP_RUNS=1",
            "FASTPATH_FAKE_EP_DEVICES=1"};
  }

  // The whole log: the placement line is written at start-up, before anything a test does.
  std::string Log() { return server().LogTail(1 << 20); }
};

std::string FloatList(const std::vector<float>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}

// Sends one batch of `batch` n x n matrices and returns OUTPUT0's shape and data.
struct SquareResult {
  std::vector<int64_t> shape;
  std::vector<float> data;
};
SquareResult InferSquare(HttpClient& http, int64_t batch, int64_t n,
                         const std::vector<float>& input) {
  SquareResult result;
  const std::string body = "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\",\"shape\":[" +
                           std::to_string(batch) + "," + std::to_string(n) + "," +
                           std::to_string(n) + "],\"data\":" + FloatList(input) + "}]}";
  const HttpResponse r = http.Post("/v2/models/square/infer", body);
  EXPECT_EQ(r.status, 200) << r.Describe();
  if (r.status != 200) return result;
  rapidjson::Document doc = ParseJson(r.body);
  EXPECT_TRUE(doc.IsObject() && doc.HasMember("outputs") && doc["outputs"].IsArray() &&
              doc["outputs"].Size() == 1)
      << r.body;
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("outputs") ||
      !doc["outputs"].IsArray() || doc["outputs"].Size() != 1) {
    return result;
  }
  const auto& out = doc["outputs"][0];
  EXPECT_STREQ(out["name"].GetString(), "OUTPUT0");
  EXPECT_STREQ(out["datatype"].GetString(), "FP32");
  for (const auto& d : out["shape"].GetArray()) result.shape.push_back(d.GetInt64());
  for (const auto& v : out["data"].GetArray()) result.data.push_back(v.GetFloat());
  return result;
}

TEST_F(FakeGpuTest, GpuModelIsReadyAndItsMatMulIsPlacedOnCuda) {
  EXPECT_EQ(http().Get("/v2/models/square/ready").status, 200) << Log();
  const std::string log = Log();
  // The placement audit's line for the one GPU instance: the MatMul on the (fake) CUDA
  // provider, nothing on ORT's CPU provider.
  EXPECT_THAT(log, HasSubstr("model 'square' v1 instance 0: placement CUDAExecutionProvider "
                             "1 node (1 compute)\n"));
  EXPECT_THAT(log, HasSubstr("model 'square' version 1 is READY"));
}

TEST_F(FakeGpuTest, InferReturnsTheExactProduct) {
  // [[1,2],[3,4]]^2 = [[7,10],[15,22]]
  SquareResult two = InferSquare(http(), 1, 2, {1, 2, 3, 4});
  EXPECT_EQ(two.shape, (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(two.data, (std::vector<float>{7, 10, 15, 22}));
  // [[1,2,3],[4,5,6],[7,8,9]]^2 = [[30,36,42],[66,81,96],[102,126,150]]
  SquareResult three = InferSquare(http(), 1, 3, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(three.shape, (std::vector<int64_t>{1, 3, 3}));
  EXPECT_EQ(three.data, (std::vector<float>{30, 36, 42, 66, 81, 96, 102, 126, 150}));
  // Two matrices in one request: each is squared on its own.
  SquareResult batch = InferSquare(http(), 2, 2, {1, 2, 3, 4, 0, 1, 1, 0});
  EXPECT_EQ(batch.shape, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(batch.data, (std::vector<float>{7, 10, 15, 22, 1, 0, 0, 1}));
}

TEST_F(FakeGpuTest, AShapeTheFakeCannotComputeIsAClearError) {
  // [1,2,3] x [1,2,3]: K and the second operand's rows differ.
  const HttpResponse r = http().Post(
      "/v2/models/square/infer",
      R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,2,3],"data":[1,2,3,4,5,6]}]})");
  EXPECT_NE(r.status, 200) << r.Describe();
  EXPECT_THAT(ErrorMessage(r.body),
              HasSubstr("fastpath's fake CUDA execution provider: MatMul of shapes [1,2,3] and "
                        "[1,2,3] is not supported"))
      << r.body;
  // The server goes on serving.
  SquareResult two = InferSquare(http(), 1, 2, {1, 2, 3, 4});
  EXPECT_EQ(two.data, (std::vector<float>{7, 10, 15, 22}));
}

TEST_F(FakeGpuTest, ConfigAndAdmissionReportShowTheGpuInstance) {
  const HttpResponse config = http().Get("/v2/models/square/config");
  ASSERT_EQ(config.status, 200) << config.Describe();
  rapidjson::Document c = ParseJson(config.body);
  ASSERT_TRUE(c.IsObject() && c.HasMember("instance_group") && c["instance_group"].IsArray() &&
              c["instance_group"].Size() == 1)
      << config.body;
  const auto& group = c["instance_group"][0];
  EXPECT_STREQ(group["kind"].GetString(), "KIND_GPU") << config.body;
  ASSERT_TRUE(group["gpus"].IsArray() && group["gpus"].Size() == 1) << config.body;
  EXPECT_EQ(group["gpus"][0].GetInt(), 0) << config.body;

  const HttpResponse report = http().Get("/v2/health/admission");
  ASSERT_EQ(report.status, 200) << report.Describe();
  rapidjson::Document doc = ParseJson(report.body);
  ASSERT_TRUE(doc.IsObject() && doc["models"].IsArray() && doc["models"].Size() == 1)
      << report.body;
  const auto& model = doc["models"][0];
  EXPECT_STREQ(model["name"].GetString(), "square");
  EXPECT_STREQ(model["state"].GetString(), "READY") << report.body;
  const auto& instances = model["placement"]["instances"];
  ASSERT_TRUE(instances.IsArray() && instances.Size() == 1) << report.body;
  const auto& instance = instances[0];
  EXPECT_STREQ(instance["summary"].GetString(), "CUDAExecutionProvider 1 node (1 compute)");
  EXPECT_EQ(instance["total_nodes"].GetInt(), 1);
  ASSERT_TRUE(instance["providers"].IsArray() && instance["providers"].Size() == 1) << report.body;
  EXPECT_STREQ(instance["providers"][0]["provider"].GetString(), "CUDAExecutionProvider");
  EXPECT_EQ(instance["providers"][0]["op_types"]["MatMul"].GetInt(), 1) << report.body;
  EXPECT_STREQ(instance["degraded_reason"].GetString(), "");
  // The fake's device: CUDA ordinal 0, enumerated by the library the environment named.
  const auto& cuda = doc["capability_snapshot"]["onnxruntime"]["execution_providers"][0];
  EXPECT_STREQ(cuda["provider"].GetString(), "cuda") << report.body;
  EXPECT_STREQ(cuda["error"].GetString(), "") << report.body;
  ASSERT_TRUE(cuda["devices"].IsArray() && cuda["devices"].Size() == 1) << report.body;
  EXPECT_STREQ(cuda["devices"][0]["ep_name"].GetString(), "CUDAExecutionProvider");
  EXPECT_EQ(cuda["devices"][0]["cuda_device_id"].GetInt(), 0) << report.body;
}

}  // namespace
}  // namespace fastpath::integration
