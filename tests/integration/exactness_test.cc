// The server's outputs are exactly (bit for bit) those of a direct ONNX Runtime run of
// the same model file on the same input: the example models (MLP, ResNet-style CNN,
// transformer encoder) through HTTP binary, HTTP JSON and gRPC raw, against
// fastpath::onnxruntime called in-process.
#include <cmath>

#include "fastpath/onnxruntime/ort_backend.h"
#include "integration_fixture.h"

namespace fastpath::integration {
namespace {

namespace fs = std::filesystem;

struct ExampleModel {
  std::string name;
  std::string input;
  std::vector<int64_t> dims;  // without the batch dimension
  std::string output;
};

const std::vector<ExampleModel>& ExampleModels() {
  static const std::vector<ExampleModel> models = {
      {"mlp_classifier", "input", {64}, "probabilities"},
      {"cnn_classifier", "image", {3, 32, 32}, "logits"},
      {"transformer_encoder", "tokens", {16, 64}, "hidden"},
  };
  return models;
}

constexpr int64_t kBatch = 3;

// Deterministic inputs in [-1, 1) with plenty of mantissa bits, different per model.
std::vector<float> MakeInput(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint64_t x = 0x9E3779B97F4A7C15ull ^ seed;
  for (auto& f : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    f = static_cast<float>(static_cast<int32_t>(x >> 32)) / 2147483648.0f;
  }
  return v;
}

class ExactnessTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override { return {}; }
  void PrepareRepository(testing::TempRepository& repo) override {
    for (const auto& m : ExampleModels()) {
      const fs::path from = fs::path(FASTPATH_EXAMPLE_MODELS_DIR) / m.name;
      fs::create_directories(repo.root() / m.name / "1");
      fs::copy_file(from / "config.pbtxt", repo.root() / m.name / "config.pbtxt");
      fs::copy_file(from / "1" / "model.onnx", repo.root() / m.name / "1" / "model.onnx");
    }
  }

  // The direct run: the same backend library the server uses, default instance options.
  static std::string DirectRun(const ExampleModel& m, const std::vector<int64_t>& shape,
                               const std::string& data) {
    auto backend = onnxruntime::CreateOrtBackend();
    EXPECT_TRUE(backend.ok()) << backend.status().ToString();
    if (!backend.ok()) return "";
    auto instance = (*backend)->CreateInstance(
        fs::path(FASTPATH_EXAMPLE_MODELS_DIR) / m.name / "1" / "model.onnx", {});
    EXPECT_TRUE(instance.ok()) << instance.status().ToString();
    if (!instance.ok()) return "";
    Tensor input{m.input, DataType::kFp32, shape, data};
    auto outputs = (*instance)->Run({input}, {m.output});
    EXPECT_TRUE(outputs.ok()) << outputs.status().ToString();
    if (!outputs.ok() || outputs->size() != 1) return "";
    return (*outputs)[0].data;
  }
};

std::string ShapeJson(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

TEST_F(ExactnessTest, ServerOutputsEqualADirectOrtRun) {
  uint32_t seed = 1;
  for (const auto& m : ExampleModels()) {
    SCOPED_TRACE(m.name);
    std::vector<int64_t> shape = {kBatch};
    shape.insert(shape.end(), m.dims.begin(), m.dims.end());
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    const std::vector<float> values = MakeInput(n, seed++);
    const std::string data = AsBytes(values);

    const std::string expected = DirectRun(m, shape, data);
    ASSERT_FALSE(expected.empty());
    // Sanity: a real result, not zeros or NaNs.
    auto direct = FromBytes<float>(expected);
    bool any_nonzero = false;
    for (float f : direct) {
      ASSERT_TRUE(std::isfinite(f));
      any_nonzero |= f != 0.0f;
    }
    ASSERT_TRUE(any_nonzero);

    // HTTP, binary in and out.
    std::string json = R"({"inputs":[{"name":")" + m.input + R"(","datatype":"FP32","shape":)" +
                       ShapeJson(shape) + R"(,"parameters":{"binary_data_size":)" +
                       std::to_string(data.size()) +
                       R"(}}],"outputs":[{"name":")" + m.output +
                       R"(","parameters":{"binary_data":true}}]})";
    BinaryBody body = MakeBinaryBody(json, {data});
    HttpResponse r = http().Post("/v2/models/" + m.name + "/infer", body.body,
                                 {{"Inference-Header-Content-Length",
                                   std::to_string(body.json_length)}});
    ASSERT_EQ(r.status, 200) << r.Describe();
    auto decoded = DecodeBinaryResponse(r);
    ASSERT_EQ(decoded.blobs.size(), 1u);
    EXPECT_TRUE(decoded.blobs[0] == expected) << "HTTP binary output differs from direct ORT";

    // HTTP, JSON in and out: the numbers must survive text exactly both ways.
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
    w.StartArray();
    for (float f : values) w.Double(f);
    w.EndArray();
    std::string json_body = R"({"inputs":[{"name":")" + m.input +
                            R"(","datatype":"FP32","shape":)" + ShapeJson(shape) +
                            R"(,"data":)" + std::string(buffer.GetString(), buffer.GetSize()) +
                            "}]}";
    HttpResponse jr = http().Post("/v2/models/" + m.name + "/infer", json_body);
    ASSERT_EQ(jr.status, 200) << jr.Describe();
    auto jdoc = ParseJson(jr.body);
    ASSERT_EQ(jdoc["outputs"].Size(), 1u);
    const auto& jdata = jdoc["outputs"][0]["data"];
    ASSERT_EQ(jdata.Size(), direct.size());
    std::vector<float> from_json;
    for (const auto& v : jdata.GetArray()) from_json.push_back(static_cast<float>(v.GetDouble()));
    EXPECT_TRUE(AsBytes(from_json) == expected) << "HTTP JSON output differs from direct ORT";

    // gRPC raw.
    inference::ModelInferRequest request;
    request.set_model_name(m.name);
    auto* in = request.add_inputs();
    in->set_name(m.input);
    in->set_datatype("FP32");
    for (int64_t d : shape) in->add_shape(d);
    request.add_raw_input_contents(data);
    grpc::ClientContext ctx;
    inference::ModelInferResponse response;
    grpc::Status s = grpc().ModelInfer(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << Describe(s);
    ASSERT_EQ(response.raw_output_contents_size(), 1);
    EXPECT_EQ(response.outputs(0).name(), m.output);
    EXPECT_TRUE(response.raw_output_contents(0) == expected)
        << "gRPC raw output differs from direct ORT";

    // Batch 1 through the server equals the first row of the direct batch-3 run only if
    // the model has no cross-batch effects; compare against its own direct run instead.
    std::vector<int64_t> one = shape;
    one[0] = 1;
    std::string first(data.substr(0, data.size() / kBatch));
    const std::string expected_one = DirectRun(m, one, first);
    inference::ModelInferRequest single = request;
    single.mutable_inputs(0)->set_shape(0, 1);
    *single.mutable_raw_input_contents(0) = first;
    grpc::ClientContext ctx1;
    inference::ModelInferResponse single_response;
    s = grpc().ModelInfer(&ctx1, single, &single_response);
    ASSERT_TRUE(s.ok()) << Describe(s);
    EXPECT_TRUE(single_response.raw_output_contents(0) == expected_one)
        << "gRPC batch-1 output differs from direct ORT";
  }
}

}  // namespace
}  // namespace fastpath::integration
