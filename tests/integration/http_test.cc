// Every HTTP/REST endpoint of the KServe v2 protocol, and inference with JSON, binary
// and mixed tensor encodings, against the real binary.
#include <absl/strings/escaping.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "integration_fixture.h"

namespace fastpath::integration {
namespace {

using HttpTest = ServerTest;

bool ArrayHasString(const rapidjson::Value& array, const std::string& s) {
  if (!array.IsArray()) return false;
  for (const auto& v : array.GetArray()) {
    if (v.IsString() && s == v.GetString()) return true;
  }
  return false;
}

int64_t JsonInt(const rapidjson::Value& v) {
  if (v.IsInt64()) return v.GetInt64();
  if (v.IsString()) return std::stoll(v.GetString());
  ADD_FAILURE() << "not an integer: " << ToJson(v);
  return -1;
}

TEST_F(HttpTest, HealthLiveAndReady) {
  HttpResponse live = http().Get("/v2/health/live");
  EXPECT_EQ(live.status, 200) << live.Describe();
  HttpResponse ready = http().Get("/v2/health/ready");
  EXPECT_EQ(ready.status, 200) << ready.Describe();
  // Every response carries a Content-Length (tritonclient relies on it).
  EXPECT_TRUE(live.Header("content-length").has_value());
  EXPECT_TRUE(ready.Header("content-length").has_value());
}

TEST_F(HttpTest, ServerMetadataListsExtensions) {
  HttpResponse r = http().Get("/v2");
  ASSERT_EQ(r.status, 200) << r.Describe();
  auto doc = ParseJson(r.body);
  ASSERT_TRUE(doc.IsObject());
  ASSERT_TRUE(doc.HasMember("name") && doc["name"].IsString()) << r.body;
  EXPECT_STREQ(doc["name"].GetString(), "fastpath");
  ASSERT_TRUE(doc.HasMember("version") && doc["version"].IsString()) << r.body;
  EXPECT_NE(std::string(doc["version"].GetString()), "");
  ASSERT_TRUE(doc.HasMember("extensions")) << r.body;
  // The extensions this issue implements, under Triton's names.
  for (const char* ext :
       {"binary_tensor_data", "model_repository", "statistics", "model_configuration",
        "schedule_policy", "model_repository(unload_dependents)"}) {
    EXPECT_TRUE(ArrayHasString(doc["extensions"], ext)) << ext << " missing from " << r.body;
  }
}

TEST_F(HttpTest, ModelMetadataWithAndWithoutVersion) {
  for (const std::string target : {"/v2/models/simple", "/v2/models/simple/versions/1"}) {
    HttpResponse r = http().Get(target);
    ASSERT_EQ(r.status, 200) << target << ": " << r.Describe();
    auto doc = ParseJson(r.body);
    EXPECT_STREQ(doc["name"].GetString(), "simple");
    EXPECT_TRUE(ArrayHasString(doc["versions"], "1")) << r.body;
    ASSERT_TRUE(doc.HasMember("platform")) << r.body;
    EXPECT_STREQ(doc["platform"].GetString(), "onnxruntime_onnx");
    ASSERT_TRUE(doc["inputs"].IsArray() && doc["inputs"].Size() == 2) << r.body;
    ASSERT_TRUE(doc["outputs"].IsArray() && doc["outputs"].Size() == 2) << r.body;
    const auto& in0 = doc["inputs"][0];
    EXPECT_STREQ(in0["name"].GetString(), "INPUT0");
    EXPECT_STREQ(in0["datatype"].GetString(), "INT32");
    ASSERT_EQ(in0["shape"].Size(), 2u) << r.body;
    EXPECT_EQ(JsonInt(in0["shape"][0]), -1);  // the batch dimension
    EXPECT_EQ(JsonInt(in0["shape"][1]), 16);
    EXPECT_STREQ(doc["outputs"][1]["name"].GetString(), "OUTPUT1");
  }
}

TEST_F(HttpTest, UnknownModelOrVersionIsNotFound) {
  for (const std::string target :
       {"/v2/models/no_such_model", "/v2/models/no_such_model/versions/1",
        "/v2/models/simple/versions/7", "/v2/models/no_such_model/ready",
        "/v2/models/simple/versions/7/ready", "/v2/models/no_such_model/config",
        "/v2/models/no_such_model/stats"}) {
    HttpResponse r = http().Get(target);
    EXPECT_EQ(r.status, 404) << target << ": " << r.Describe();
    EXPECT_NE(ErrorMessage(r.body), "") << target << ": the body is not {\"error\": ...}: "
                                        << r.body;
  }
  auto a = Iota(0, 16);
  for (const std::string target :
       {"/v2/models/no_such_model/infer", "/v2/models/simple/versions/7/infer"}) {
    HttpResponse r = http().Post(target, SimpleJsonRequest(a, a));
    EXPECT_EQ(r.status, 404) << target << ": " << r.Describe();
    EXPECT_NE(ErrorMessage(r.body), "") << r.body;
  }
}

TEST_F(HttpTest, ModelReady) {
  for (const std::string target : {"/v2/models/simple/ready", "/v2/models/simple/versions/1/ready"}) {
    HttpResponse r = http().Get(target);
    EXPECT_EQ(r.status, 200) << target << ": " << r.Describe();
  }
}

TEST_F(HttpTest, ConfigUsesProtoFieldNames) {
  HttpResponse r = http().Get("/v2/models/simple/config");
  ASSERT_EQ(r.status, 200) << r.Describe();
  auto doc = ParseJson(r.body);
  ASSERT_TRUE(doc.IsObject()) << r.body;
  EXPECT_STREQ(doc["name"].GetString(), "simple");
  ASSERT_TRUE(doc.HasMember("max_batch_size")) << "proto field names expected: " << r.body;
  EXPECT_EQ(JsonInt(doc["max_batch_size"]), 8);
  ASSERT_TRUE(doc.HasMember("input") && doc["input"].IsArray()) << r.body;
  ASSERT_EQ(doc["input"].Size(), 2u);
  EXPECT_STREQ(doc["input"][0]["name"].GetString(), "INPUT0");
  ASSERT_TRUE(doc["input"][0].HasMember("data_type")) << r.body;
  EXPECT_STREQ(doc["input"][0]["data_type"].GetString(), "TYPE_INT32");
  ASSERT_EQ(doc["input"][0]["dims"].Size(), 1u);
  EXPECT_EQ(JsonInt(doc["input"][0]["dims"][0]), 16);
  ASSERT_TRUE(doc.HasMember("output") && doc["output"].Size() == 2u) << r.body;
  // The versioned path serves the same config.
  HttpResponse v1 = http().Get("/v2/models/simple/versions/1/config");
  ASSERT_EQ(v1.status, 200) << v1.Describe();
  EXPECT_EQ(ParseJson(v1.body)["max_batch_size"], doc["max_batch_size"]);
}

// A model with no config.pbtxt: the server completes the config from the ONNX file
// (inputs, outputs, datatypes, dims, and max_batch_size for a dynamic first dim).
class HttpAutocompleteTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override { return {"simple"}; }
  void PrepareRepository(testing::TempRepository& repo) override {
    repo.AddVersion("autocomplete", 1, "simple");
  }
};

TEST_F(HttpAutocompleteTest, ConfigIsCompletedFromTheModel) {
  HttpResponse r = http().Get("/v2/models/autocomplete/config");
  ASSERT_EQ(r.status, 200) << r.Describe();
  auto doc = ParseJson(r.body);
  EXPECT_STREQ(doc["name"].GetString(), "autocomplete");
  ASSERT_TRUE(doc.HasMember("max_batch_size")) << r.body;
  EXPECT_GT(JsonInt(doc["max_batch_size"]), 0) << r.body;
  ASSERT_TRUE(doc.HasMember("input") && doc["input"].Size() == 2u) << r.body;
  ASSERT_TRUE(doc.HasMember("output") && doc["output"].Size() == 2u) << r.body;
  for (const auto& t : doc["input"].GetArray()) {
    EXPECT_STREQ(t["data_type"].GetString(), "TYPE_INT32") << r.body;
    ASSERT_EQ(t["dims"].Size(), 1u) << r.body;
    EXPECT_EQ(JsonInt(t["dims"][0]), 16);
  }
  auto a = Iota(2, 16), b = Iota(3, 16);
  HttpResponse infer = http().Post("/v2/models/autocomplete/infer", SimpleJsonRequest(a, b));
  ASSERT_EQ(infer.status, 200) << infer.Describe();
  ExpectSimpleJsonResponse(infer.body, a, b);
}

uint64_t InferenceCount(HttpClient& http, const std::string& model) {
  HttpResponse r = http.Get("/v2/models/" + model + "/stats");
  EXPECT_EQ(r.status, 200) << r.Describe();
  auto doc = ParseJson(r.body);
  if (!doc.IsObject() || !doc.HasMember("model_stats") || !doc["model_stats"].IsArray() ||
      doc["model_stats"].Empty()) {
    ADD_FAILURE() << "no model_stats in " << r.body;
    return 0;
  }
  const auto& s = doc["model_stats"][0];
  EXPECT_STREQ(s["name"].GetString(), model.c_str());
  EXPECT_TRUE(s.HasMember("inference_stats")) << r.body;
  auto count = JsonUint(s["inference_count"]);
  EXPECT_TRUE(count.has_value()) << r.body;
  return count.value_or(0);
}

TEST_F(HttpTest, StatisticsCountInferences) {
  const uint64_t before = InferenceCount(http(), "simple");
  for (int i = 0; i < 3; ++i) {
    auto a = Iota(i, 16), b = Iota(2 * i, 16);
    HttpResponse r = http().Post("/v2/models/simple/infer", SimpleJsonRequest(a, b));
    ASSERT_EQ(r.status, 200) << r.Describe();
  }
  EXPECT_EQ(InferenceCount(http(), "simple"), before + 3);
  // The versioned path and the all-models form answer too.
  HttpResponse v = http().Get("/v2/models/simple/versions/1/stats");
  EXPECT_EQ(v.status, 200) << v.Describe();
  HttpResponse all = http().Get("/v2/models/stats");
  ASSERT_EQ(all.status, 200) << all.Describe();
  auto doc = ParseJson(all.body);
  ASSERT_TRUE(doc.HasMember("model_stats") && doc["model_stats"].IsArray()) << all.body;
  EXPECT_GE(doc["model_stats"].Size(), AllTestModels().size());
}

TEST_F(HttpTest, RepositoryIndexWithoutContentLength) {
  // tritonclient's repository index: a POST with neither Content-Length nor
  // Transfer-Encoding, which means an empty body.
  HttpResponse r = http().SendRaw(RawRequest("POST", "/v2/repository/index", "", std::nullopt));
  ASSERT_EQ(r.status, 200) << r.Describe();
  auto doc = ParseJson(r.body);
  ASSERT_TRUE(doc.IsArray()) << r.body;
  bool found = false;
  for (const auto& m : doc.GetArray()) {
    if (std::string(m["name"].GetString()) != "simple") continue;
    found = true;
    EXPECT_STREQ(m["version"].GetString(), "1");
    EXPECT_STREQ(m["state"].GetString(), "READY");
  }
  EXPECT_TRUE(found) << r.body;
  EXPECT_EQ(doc.Size(), AllTestModels().size()) << r.body;
}

TEST_F(HttpTest, RepositoryIndexReadyOnly) {
  HttpResponse r = http().Post("/v2/repository/index", R"({"ready":true})");
  ASSERT_EQ(r.status, 200) << r.Describe();
  auto doc = ParseJson(r.body);
  ASSERT_TRUE(doc.IsArray()) << r.body;
  EXPECT_EQ(doc.Size(), AllTestModels().size()) << r.body;
  // An empty body with Content-Length: 0 is the same as no body.
  HttpResponse empty = http().Post("/v2/repository/index", "");
  EXPECT_EQ(empty.status, 200) << empty.Describe();
}

TEST_F(HttpTest, LoadAndUnloadRefusedInModeNone) {
  HttpResponse load = http().Post("/v2/repository/models/simple/load", "");
  EXPECT_EQ(load.status, 400) << load.Describe();
  EXPECT_NE(ErrorMessage(load.body), "") << load.body;
  HttpResponse unload = http().Post("/v2/repository/models/simple/unload", "");
  EXPECT_EQ(unload.status, 400) << unload.Describe();
  // Still loaded.
  EXPECT_EQ(http().Get("/v2/models/simple/ready").status, 200);
}

TEST_F(HttpTest, InferJsonFlatEchoesId) {
  auto a = Iota(1, 16), b = Iota(100, 16);
  HttpResponse r = http().Post("/v2/models/simple/infer", SimpleJsonRequest(a, b, "req-42"));
  ASSERT_EQ(r.status, 200) << r.Describe();
  ExpectSimpleJsonResponse(r.body, a, b);
  auto doc = ParseJson(r.body);
  ASSERT_TRUE(doc.HasMember("id")) << r.body;
  EXPECT_STREQ(doc["id"].GetString(), "req-42");
  EXPECT_STREQ(doc["model_name"].GetString(), "simple");
  EXPECT_STREQ(doc["model_version"].GetString(), "1");
  EXPECT_TRUE(r.Header("content-length").has_value());
  EXPECT_FALSE(r.Header("inference-header-content-length").has_value());
}

TEST_F(HttpTest, InferJsonNestedDataAndVersionPath) {
  // Two rows as nested arrays, [[16 ints], [16 ints]], on the versioned path.
  auto a = Iota(-20, 32), b = Iota(5, 32);
  auto nested = [](const std::vector<int32_t>& v) {
    std::string out = "[[";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i == 16) out += "],[";
      else if (i) out += ",";
      out += std::to_string(v[i]);
    }
    return out + "]]";
  };
  std::string body = R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[2,16],"data":)" +
                     nested(a) +
                     R"(},{"name":"INPUT1","datatype":"INT32","shape":[2,16],"data":)" +
                     nested(b) + "}]}";
  HttpResponse r = http().Post("/v2/models/simple/versions/1/infer", body);
  ASSERT_EQ(r.status, 200) << r.Describe();
  ExpectSimpleJsonResponse(r.body, a, b);
}

TEST_F(HttpTest, InferRequestedOutputSubset) {
  auto a = Iota(3, 16), b = Iota(1, 16);
  std::string body = SimpleJsonRequest(a, b);
  body.pop_back();  // reopen the top-level object
  body += R"(,"outputs":[{"name":"OUTPUT1"}]})";
  HttpResponse r = http().Post("/v2/models/simple/infer", body);
  ASSERT_EQ(r.status, 200) << r.Describe();
  auto doc = ParseJson(r.body);
  ASSERT_EQ(doc["outputs"].Size(), 1u) << r.body;
  EXPECT_STREQ(doc["outputs"][0]["name"].GetString(), "OUTPUT1");
  for (int i = 0; i < 16; ++i) EXPECT_EQ(doc["outputs"][0]["data"][i].GetInt(), a[i] - b[i]);
}

TEST_F(HttpTest, InferBinaryInputsAndOutputs) {
  auto a = Iota(1000, 16), b = Iota(-7, 16);
  std::string json =
      R"({"id":"bin","inputs":[)"
      R"({"name":"INPUT0","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}},)"
      R"({"name":"INPUT1","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}}],)"
      R"("parameters":{"binary_data_output":true}})";
  BinaryBody body = MakeBinaryBody(json, {AsBytes(a), AsBytes(b)});
  // Lower-case header name and no Content-Type: both must be accepted.
  HttpResponse r = http().Post("/v2/models/simple/infer", body.body,
                               {{"inference-header-content-length",
                                 std::to_string(body.json_length)}});
  ASSERT_EQ(r.status, 200) << r.Describe();
  ASSERT_TRUE(r.Header("inference-header-content-length").has_value())
      << "a binary response must carry Inference-Header-Content-Length";
  ASSERT_TRUE(r.Header("content-length").has_value());
  auto decoded = DecodeBinaryResponse(r);
  ASSERT_EQ(decoded.blobs.size(), 2u);
  EXPECT_STREQ(decoded.json["id"].GetString(), "bin");
  for (size_t i = 0; i < 2; ++i) {
    const auto& out = decoded.json["outputs"][static_cast<rapidjson::SizeType>(i)];
    EXPECT_FALSE(out.HasMember("data")) << "binary outputs carry no JSON data";
    std::vector<int32_t> got = FromBytes<int32_t>(decoded.blobs[i]);
    ASSERT_EQ(got.size(), 16u);
    bool sum = std::string(out["name"].GetString()) == "OUTPUT0";
    for (int j = 0; j < 16; ++j) EXPECT_EQ(got[j], sum ? a[j] + b[j] : a[j] - b[j]);
  }
}

TEST_F(HttpTest, InferMixedEncodings) {
  // INPUT0 as JSON, INPUT1 binary; OUTPUT0 asked for binary, OUTPUT1 for JSON.
  auto a = Iota(50, 16), b = Iota(9, 16);
  std::string a_json = "[";
  for (int i = 0; i < 16; ++i) a_json += (i ? "," : "") + std::to_string(a[i]);
  a_json += "]";
  std::string json =
      R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":)" + a_json +
      R"(},{"name":"INPUT1","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}}],)"
      R"("outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}},)"
      R"({"name":"OUTPUT1","parameters":{"binary_data":false}}]})";
  BinaryBody body = MakeBinaryBody(json, {AsBytes(b)});
  HttpResponse r = http().Post("/v2/models/simple/infer", body.body,
                               {{"Inference-Header-Content-Length",
                                 std::to_string(body.json_length)}});
  ASSERT_EQ(r.status, 200) << r.Describe();
  auto decoded = DecodeBinaryResponse(r);
  ASSERT_EQ(decoded.blobs.size(), 2u);
  const auto& outs = decoded.json["outputs"];
  EXPECT_STREQ(outs[0]["name"].GetString(), "OUTPUT0");
  EXPECT_STREQ(outs[1]["name"].GetString(), "OUTPUT1");
  std::vector<int32_t> sum = FromBytes<int32_t>(decoded.blobs[0]);
  ASSERT_EQ(sum.size(), 16u);
  ASSERT_TRUE(outs[1].HasMember("data")) << ToJson(outs[1]);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(sum[j], a[j] + b[j]);
    EXPECT_EQ(outs[1]["data"][j].GetInt(), a[j] - b[j]);
  }
}

TEST_F(HttpTest, KeepAliveServesManyRequestsOnOneConnection) {
  // Pipelined on one connection: the answers come back in request order.
  std::vector<std::string> requests;
  for (int i = 0; i < 8; ++i) {
    auto a = Iota(i * 10, 16), b = Iota(i, 16);
    std::string body = SimpleJsonRequest(a, b, "p" + std::to_string(i));
    requests.push_back(RawRequest("POST", "/v2/models/simple/infer", body, body.size()));
  }
  auto responses = http().Pipeline(requests);
  ASSERT_EQ(responses.size(), requests.size());
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(responses[i].status, 200) << responses[i].Describe();
    ExpectSimpleJsonResponse(responses[i].body, Iota(i * 10, 16), Iota(i, 16));
    EXPECT_STREQ(ParseJson(responses[i].body)["id"].GetString(),
                 ("p" + std::to_string(i)).c_str());
  }
}

// Explicit model-control mode: nothing but the --load-model models at start.
class HttpExplicitTest : public ServerTest {
 protected:
  std::vector<std::string> ExtraArgs() override {
    return {"--model-control-mode", "explicit", "--load-model", "simple"};
  }
};

TEST_F(HttpExplicitTest, LoadAndUnload) {
  EXPECT_EQ(http().Get("/v2/models/simple/ready").status, 200);
  HttpResponse not_loaded = http().Get("/v2/models/identity_int32/ready");
  EXPECT_NE(not_loaded.status, 200) << not_loaded.Describe();

  HttpResponse load = http().Post("/v2/repository/models/identity_int32/load", "");
  ASSERT_EQ(load.status, 200) << load.Describe();
  EXPECT_EQ(http().Get("/v2/models/identity_int32/ready").status, 200);
  std::string body =
      R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,3],"data":[4,5,6]}]})";
  HttpResponse infer = http().Post("/v2/models/identity_int32/infer", body);
  ASSERT_EQ(infer.status, 200) << infer.Describe();

  // The index lists every model of the repository; only the loaded ones are READY.
  HttpResponse index = http().Post("/v2/repository/index", "");
  ASSERT_EQ(index.status, 200) << index.Describe();
  auto doc = ParseJson(index.body);
  ASSERT_TRUE(doc.IsArray());
  for (const auto& m : doc.GetArray()) {
    std::string name = m["name"].GetString();
    if (name == "simple" || name == "identity_int32") {
      EXPECT_STREQ(m["state"].GetString(), "READY") << index.body;
    }
  }

  HttpResponse unload = http().Post("/v2/repository/models/identity_int32/unload", "");
  ASSERT_EQ(unload.status, 200) << unload.Describe();
  HttpResponse after = http().Get("/v2/models/identity_int32/ready");
  EXPECT_NE(after.status, 200) << after.Describe();
  HttpResponse infer_after = http().Post("/v2/models/identity_int32/infer", body);
  EXPECT_GE(infer_after.status, 400) << infer_after.Describe();

  HttpResponse unknown = http().Post("/v2/repository/models/no_such_model/load", "");
  EXPECT_EQ(unknown.status, 404) << unknown.Describe();
  EXPECT_NE(ErrorMessage(unknown.body), "");
  EXPECT_EQ(http().Get("/v2/models/simple/ready").status, 200);
}

// Two --model-repository folders served as one, as Triton serves them.
class HttpSeveralRepositoriesTest : public ServerTest {
 protected:
  HttpSeveralRepositoriesTest() { second_.AddVersion("identity_int32", 1, "identity_int32"); }
  std::vector<std::string> Models() override { return {"simple"}; }
  std::vector<std::string> ExtraArgs() override {
    return {"--model-repository", second_.root().string()};
  }
  testing::TempRepository second_{FASTPATH_TEST_MODELS_DIR};
};

TEST_F(HttpSeveralRepositoriesTest, ServesTheModelsOfEach) {
  EXPECT_EQ(http().Get("/v2/models/simple/ready").status, 200);
  EXPECT_EQ(http().Get("/v2/models/identity_int32/ready").status, 200);
  HttpResponse infer = http().Post(
      "/v2/models/identity_int32/infer",
      R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,3],"data":[4,5,6]}]})");
  ASSERT_EQ(infer.status, 200) << infer.Describe();
  EXPECT_EQ(http().Get("/v2/health/ready").status, 200);
}

// A load request's body with Triton's override parameters, as tritonclient's
// load_model(config=..., files=...) sends it: each file's contents in base64.
std::string LoadBody(const std::string& config, const std::map<std::string, std::string>& files) {
  rapidjson::StringBuffer out;
  rapidjson::Writer<rapidjson::StringBuffer> w(out);
  w.StartObject();
  w.Key("parameters");
  w.StartObject();
  w.Key("config");
  w.String(config.data(), static_cast<rapidjson::SizeType>(config.size()));
  for (const auto& [path, contents] : files) {
    w.Key(("file:" + path).c_str());
    w.String(absl::Base64Escape(contents).c_str());
  }
  w.EndObject();
  w.EndObject();
  return out.GetString();
}

std::string TestModelBytes(const std::string& name) {
  std::ifstream in(std::filesystem::path(FASTPATH_TEST_MODELS_DIR) / (name + ".onnx"),
                   std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// What GET .../config answers, edited and sent back as the load's config, loads: the
// round trip a tritonclient user makes to change a model's instances.
TEST_F(HttpExplicitTest, ALoadTakesTheConfigTheServerShows) {
  HttpResponse shown = http().Get("/v2/models/simple/config");
  ASSERT_EQ(shown.status, 200) << shown.Describe();
  auto config = ParseJson(shown.body);
  ASSERT_TRUE(config.HasMember("instance_group")) << shown.body;
  config["instance_group"][0]["count"].SetInt(2);
  rapidjson::StringBuffer edited;
  rapidjson::Writer<rapidjson::StringBuffer> w(edited);
  config.Accept(w);

  HttpResponse load =
      http().Post("/v2/repository/models/simple/load", LoadBody(edited.GetString(), {}));
  ASSERT_EQ(load.status, 200) << load.Describe();
  auto after = ParseJson(http().Get("/v2/models/simple/config").body);
  EXPECT_EQ(after["instance_group"][0]["count"].GetInt(), 2);
  HttpResponse infer =
      http().Post("/v2/models/simple/infer", SimpleJsonRequest(Iota(0, 16), Iota(1, 16), "r"));
  ASSERT_EQ(infer.status, 200) << infer.Describe();

  // A config that does not parse changes nothing, and says what is wrong.
  HttpResponse bad = http().Post("/v2/repository/models/simple/load",
                                 LoadBody(R"({"instance_group": [{"kind": 9}]})", {}));
  EXPECT_EQ(bad.status, 400) << bad.Describe();
  EXPECT_EQ(ErrorMessage(bad.body),
            "load parameter 'config': 'instance_group[0].kind' is not a Kind (one of KIND_AUTO, "
            "KIND_GPU, KIND_CPU, KIND_MODEL)");
  EXPECT_EQ(
      ParseJson(http().Get("/v2/models/simple/config").body)["instance_group"][0]["count"].GetInt(),
      2);
}

// A model the repository does not hold, sent whole in the load request: it serves, is
// listed, and goes with its unload.
TEST_F(HttpExplicitTest, ALoadTakesTheModelsFiles) {
  const std::string body =
      LoadBody(R"({"max_batch_size": 8})", {{"1/model.onnx", TestModelBytes("simple")}});
  HttpResponse load = http().Post("/v2/repository/models/uploaded/load", body);
  ASSERT_EQ(load.status, 200) << load.Describe();
  HttpResponse infer =
      http().Post("/v2/models/uploaded/infer", SimpleJsonRequest(Iota(0, 16), Iota(1, 16), "u"));
  ASSERT_EQ(infer.status, 200) << infer.Describe();
  ExpectSimpleJsonResponse(infer.body, Iota(0, 16), Iota(1, 16));
  const auto listed = [&] {
    const auto index = ParseJson(http().Post("/v2/repository/index", "").body);
    for (const auto& m : index.GetArray()) {
      if (std::string(m["name"].GetString()) == "uploaded") return true;
    }
    return false;
  };
  EXPECT_TRUE(listed());

  HttpResponse broken = http().Post("/v2/repository/models/uploaded/load",
                                    LoadBody("{}", {{"1/model.onnx", "not a model"}}));
  EXPECT_EQ(broken.status, 400) << broken.Describe();
  EXPECT_NE(ErrorMessage(broken.body).find("the previous load keeps serving"), std::string::npos)
      << broken.Describe();
  EXPECT_EQ(http()
                .Post("/v2/models/uploaded/infer", SimpleJsonRequest(Iota(0, 16), Iota(1, 16), "u"))
                .status,
            200);

  HttpResponse unload = http().Post("/v2/repository/models/uploaded/unload", "");
  ASSERT_EQ(unload.status, 200) << unload.Describe();
  EXPECT_FALSE(listed());
  EXPECT_EQ(http().Get("/v2/models/uploaded/ready").status, 404);
}

}  // namespace
}  // namespace fastpath::integration
