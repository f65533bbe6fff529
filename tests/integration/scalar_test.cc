// Rank-0 tensors end to end: real ONNX models whose inputs or outputs are scalars (Clip's
// bounds, a mean loss, Trilu's k, CumSum's axis, Range's operands, a quantizer's scale and
// zero point, a scalar per batch item), served without a config.pbtxt so that fastpath
// derives Triton's dims [1] + reshape [], and asked over HTTP JSON, HTTP binary and gRPC.
// Inputs go both as scalars ([] or [batch]) and as Triton's [1] ([batch, 1]); every output
// must equal, byte for byte and in shape, a direct ONNX Runtime run of the same file.
#include "fastpath/onnxruntime/ort_backend.h"
#include "integration_fixture.h"

namespace fastpath::integration {
namespace {

namespace fs = std::filesystem;

Tensor Floats(const std::string& name, std::vector<int64_t> shape, std::vector<float> values) {
  return {name, DataType::kFp32, std::move(shape), AsBytes(values)};
}
Tensor Int64s(const std::string& name, std::vector<int64_t> shape, std::vector<int64_t> values) {
  return {name, DataType::kInt64, std::move(shape), AsBytes(values)};
}
Tensor Uint8s(const std::string& name, std::vector<int64_t> shape, std::vector<uint8_t> values) {
  return {name, DataType::kUint8, std::move(shape), AsBytes(values)};
}

struct ScalarCase {
  std::string model;
  std::vector<Tensor> inputs;  // in the model's own shapes
  bool batched = false;        // max_batch_size > 0: the first dim is the batch
};

std::vector<ScalarCase> Cases() {
  return {
      {"scalar_clip",
       {Floats("X", {4}, {-1.5f, 0.25f, 2.0f, 9.0f}), Floats("LO", {}, {0.0f}),
        Floats("HI", {}, {3.0f})}},
      {"scalar_trilu", {Floats("X", {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}), Int64s("K", {}, {-1})}},
      {"scalar_cumsum", {Floats("X", {5}, {1, 2, 3, 4, 5}), Int64s("AXIS", {}, {0})}},
      {"scalar_range",
       {Floats("START", {}, {1.0f}), Floats("LIMIT", {}, {3.0f}), Floats("DELTA", {}, {0.5f})}},
      {"scalar_quantize",
       {Floats("X", {4}, {-1.0f, 0.0f, 0.5f, 100.0f}), Floats("SCALE", {}, {0.25f}),
        Uint8s("ZERO", {}, {10})}},
      {"scalar_batched", {Floats("X", {3}, {1.5f, -2.0f, 7.0f})}, /*batched=*/true},
  };
}

// Triton's spelling of a request tensor: a scalar [] as [1], [batch] as [batch, 1].
std::vector<int64_t> TritonShape(const std::vector<int64_t>& shape, bool batched) {
  std::vector<int64_t> out = shape;
  if (shape.size() == (batched ? 1u : 0u)) out.push_back(1);
  return out;
}

std::string ShapeJson(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string DataJson(const Tensor& t) {
  std::string out = "[";
  const auto add = [&](const std::string& item) { out += (out.size() > 1 ? "," : "") + item; };
  switch (t.dtype) {
    case DataType::kFp32:
      for (float f : FromBytes<float>(t.data)) add(std::to_string(f));
      break;
    case DataType::kInt64:
      for (int64_t v : FromBytes<int64_t>(t.data)) add(std::to_string(v));
      break;
    case DataType::kUint8:
      for (uint8_t v : FromBytes<uint8_t>(t.data)) add(std::to_string(v));
      break;
    default:
      ADD_FAILURE() << "no JSON writer for " << DataTypeName(t.dtype);
  }
  return out + "]";
}

// A JSON output's data as the bytes a binary output would carry.
std::string JsonToBytes(const rapidjson::Value& output) {
  const std::string datatype = output["datatype"].GetString();
  std::string out;
  for (const auto& v : output["data"].GetArray()) {
    if (datatype == "FP32") {
      const float f = static_cast<float>(v.GetDouble());
      out.append(reinterpret_cast<const char*>(&f), sizeof f);
    } else if (datatype == "UINT8") {
      out.push_back(static_cast<char>(v.GetUint()));
    } else {
      ADD_FAILURE() << "no JSON reader for " << datatype;
    }
  }
  return out;
}

std::vector<int64_t> ShapeOf(const rapidjson::Value& output) {
  std::vector<int64_t> shape;
  for (const auto& d : output["shape"].GetArray()) shape.push_back(d.GetInt64());
  return shape;
}

class ScalarTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override { return {}; }
  void PrepareRepository(testing::TempRepository& repo) override {
    for (const ScalarCase& c : Cases()) repo.AddVersion(c.model, 1, c.model);  // no config
  }

  // Every output of a direct ORT run, in model order.
  static std::vector<Tensor> DirectRun(const ScalarCase& c) {
    auto backend = onnxruntime::CreateOrtBackend();
    EXPECT_TRUE(backend.ok()) << backend.status().ToString();
    if (!backend.ok()) return {};
    auto instance =
        (*backend)->CreateInstance(fs::path(FASTPATH_TEST_MODELS_DIR) / (c.model + ".onnx"), {});
    EXPECT_TRUE(instance.ok()) << instance.status().ToString();
    if (!instance.ok()) return {};
    auto outputs = (*instance)->Run(c.inputs, {});
    EXPECT_TRUE(outputs.ok()) << outputs.status().ToString();
    return outputs.ok() ? *std::move(outputs) : std::vector<Tensor>{};
  }
};

TEST_F(ScalarTest, MetadataShowsScalarsAsScalars) {
  HttpResponse r = http().Get("/v2/models/scalar_clip");
  ASSERT_EQ(r.status, 200) << r.Describe();
  auto doc = ParseJson(r.body);
  EXPECT_EQ(ToJson(doc["inputs"][1]), R"({"name":"LO","datatype":"FP32","shape":[]})");
  EXPECT_EQ(ToJson(doc["outputs"][1]), R"({"name":"MEAN","datatype":"FP32","shape":[]})");
  r = http().Get("/v2/models/scalar_batched");
  ASSERT_EQ(r.status, 200) << r.Describe();
  doc = ParseJson(r.body);
  EXPECT_EQ(ToJson(doc["inputs"][0]["shape"]), "[-1]");
  // The config a Triton client reads back: dims [1] with reshape { shape: [] }.
  r = http().Get("/v2/models/scalar_clip/config");
  ASSERT_EQ(r.status, 200) << r.Describe();
  doc = ParseJson(r.body);
  EXPECT_EQ(ToJson(doc["input"][1]["dims"]), "[1]");
  EXPECT_EQ(ToJson(doc["input"][1]["reshape"]), R"({"shape":[]})");
}

TEST_F(ScalarTest, EveryFrontEndAndSpellingEqualsADirectOrtRun) {
  for (const ScalarCase& c : Cases()) {
    SCOPED_TRACE(c.model);
    const std::vector<Tensor> expected = DirectRun(c);
    ASSERT_FALSE(expected.empty());

    for (const bool triton_spelling : {false, true}) {
      SCOPED_TRACE(triton_spelling ? "inputs as Triton's [1]" : "inputs as scalars");
      const auto shape_of = [&](const Tensor& t) {
        return triton_spelling ? TritonShape(t.shape, c.batched) : t.shape;
      };

      // HTTP JSON.
      std::string json = R"({"inputs":[)";
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        const Tensor& t = c.inputs[i];
        json += std::string(i ? "," : "") + R"({"name":")" + t.name + R"(","datatype":")" +
                std::string(DataTypeName(t.dtype)) + R"(","shape":)" + ShapeJson(shape_of(t)) +
                R"(,"data":)" + DataJson(t) + "}";
      }
      json += "]}";
      HttpResponse r = http().Post("/v2/models/" + c.model + "/infer", json);
      ASSERT_EQ(r.status, 200) << r.Describe();
      auto doc = ParseJson(r.body);
      ASSERT_EQ(doc["outputs"].Size(), expected.size()) << r.body;
      for (size_t o = 0; o < expected.size(); ++o) {
        SCOPED_TRACE("HTTP JSON output " + expected[o].name);
        EXPECT_EQ(ShapeOf(doc["outputs"][o]), expected[o].shape);
        EXPECT_TRUE(JsonToBytes(doc["outputs"][o]) == expected[o].data);
      }

      // HTTP binary, both ways.
      std::string header = R"({"inputs":[)";
      std::vector<std::string> blobs;
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        const Tensor& t = c.inputs[i];
        header += std::string(i ? "," : "") + R"({"name":")" + t.name + R"(","datatype":")" +
                  std::string(DataTypeName(t.dtype)) + R"(","shape":)" + ShapeJson(shape_of(t)) +
                  R"(,"parameters":{"binary_data_size":)" + std::to_string(t.data.size()) + "}}";
        blobs.push_back(t.data);
      }
      header += R"(],"outputs":[)";
      for (size_t o = 0; o < expected.size(); ++o) {
        header += std::string(o ? "," : "") + R"({"name":")" + expected[o].name +
                  R"(","parameters":{"binary_data":true}})";
      }
      header += "]}";
      BinaryBody body = MakeBinaryBody(header, blobs);
      r = http().Post("/v2/models/" + c.model + "/infer", body.body,
                      {{"Inference-Header-Content-Length", std::to_string(body.json_length)}});
      ASSERT_EQ(r.status, 200) << r.Describe();
      auto decoded = DecodeBinaryResponse(r);
      ASSERT_EQ(decoded.blobs.size(), expected.size());
      for (size_t o = 0; o < expected.size(); ++o) {
        SCOPED_TRACE("HTTP binary output " + expected[o].name);
        EXPECT_EQ(ShapeOf(decoded.json["outputs"][o]), expected[o].shape);
        EXPECT_TRUE(decoded.blobs[o] == expected[o].data);
      }

      // gRPC raw.
      inference::ModelInferRequest request;
      request.set_model_name(c.model);
      for (const Tensor& t : c.inputs) {
        auto* in = request.add_inputs();
        in->set_name(t.name);
        in->set_datatype(std::string(DataTypeName(t.dtype)));
        for (int64_t d : shape_of(t)) in->add_shape(d);
        request.add_raw_input_contents(t.data);
      }
      grpc::ClientContext ctx;
      inference::ModelInferResponse response;
      const grpc::Status s = grpc().ModelInfer(&ctx, request, &response);
      ASSERT_TRUE(s.ok()) << Describe(s);
      ASSERT_EQ(response.raw_output_contents_size(), static_cast<int>(expected.size()));
      for (size_t o = 0; o < expected.size(); ++o) {
        SCOPED_TRACE("gRPC output " + expected[o].name);
        const auto& out = response.outputs(static_cast<int>(o));
        EXPECT_EQ(out.name(), expected[o].name);
        EXPECT_EQ(std::vector<int64_t>(out.shape().begin(), out.shape().end()), expected[o].shape);
        EXPECT_TRUE(response.raw_output_contents(static_cast<int>(o)) == expected[o].data);
      }
    }
  }
}

// A scalar input with more than one element, over both front ends, names both spellings.
TEST_F(ScalarTest, AScalarWithTwoElementsIsRefusedNamingBothShapes) {
  const std::string json =
      R"({"inputs":[{"name":"X","datatype":"FP32","shape":[4],"data":[1,2,3,4]},)"
      R"({"name":"LO","datatype":"FP32","shape":[2],"data":[0,1]},)"
      R"({"name":"HI","datatype":"FP32","shape":[],"data":[3]}]})";
  HttpResponse r = http().Post("/v2/models/scalar_clip/infer", json);
  EXPECT_EQ(r.status, 400);
  const std::string message =
      "input 'LO': shape [2] has 2 at index 0 but the model expects 1 [1] (or [], the shape "
      "it reshapes to)";
  EXPECT_EQ(ErrorMessage(r.body), message);

  inference::ModelInferRequest request;
  request.set_model_name("scalar_clip");
  for (const auto& [name, shape, values] :
       std::vector<std::tuple<std::string, std::vector<int64_t>, std::vector<float>>>{
           {"X", {4}, {1, 2, 3, 4}}, {"LO", {2}, {0, 1}}, {"HI", {}, {3}}}) {
    auto* in = request.add_inputs();
    in->set_name(name);
    in->set_datatype("FP32");
    for (int64_t d : shape) in->add_shape(d);
    request.add_raw_input_contents(AsBytes(values));
  }
  grpc::ClientContext ctx;
  inference::ModelInferResponse response;
  const grpc::Status s = grpc().ModelInfer(&ctx, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), message);
}

}  // namespace
}  // namespace fastpath::integration
