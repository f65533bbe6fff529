// The HTTP front end over real sockets, against the scriptable fake facade.
#include "fastpath/frontend/http_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <zlib.h>

#include <algorithm>  // before the fake, which uses std::find
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "fakes/fake_inference_server.h"
#include "request_body.h"
#include "test_client.h"

namespace fastpath::frontend {
namespace {

using ::fastpath::testing::FakeInferenceServer;
using ::testing::HasSubstr;
using testing::Headers;
using testing::RawRequest;
using testing::Reply;
using testing::TestClient;

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
  return s;
}

template <typename T>
std::vector<T> Values(const std::string& s) {
  std::vector<T> v(s.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), s.data(), v.size() * sizeof(T));
  return v;
}

rapidjson::Document Json(const std::string& s) {
  rapidjson::Document d;
  d.Parse<rapidjson::kParseFullPrecisionFlag | rapidjson::kParseNanAndInfFlag>(s.c_str(), s.size());
  EXPECT_FALSE(d.HasParseError()) << "not JSON: " << s;
  return d;
}

std::string ErrorOf(const Reply& r) {
  auto d = Json(r.body);
  if (!d.IsObject() || !d.HasMember("error") || !d["error"].IsString())
    return "<no error field: " + r.body + ">";
  return d["error"].GetString();
}

// Echoes each input back as an output named "OUT_<input>"; honours requested outputs
// like the real facade would (unknown name: NotFound).
StatusOr<InferResponse> Echo(const InferRequest& request) {
  InferResponse response;
  response.model_name = request.model_name;
  response.model_version = request.model_version.empty() ? "1" : request.model_version;
  response.id = request.id;
  std::vector<Tensor> all;
  for (const Tensor& in : request.inputs) {
    Tensor t = in;
    t.name = "OUT_" + in.name;
    all.push_back(std::move(t));
  }
  if (request.outputs.empty()) {
    response.outputs = std::move(all);
    return response;
  }
  for (const auto& requested : request.outputs) {
    auto it = std::find_if(all.begin(), all.end(),
                           [&](const Tensor& t) { return t.name == requested.name; });
    if (it == all.end()) return NotFound("unknown output '" + requested.name + "'");
    response.outputs.push_back(*it);
  }
  return response;
}

FakeInferenceServer::Model SimpleModel() {
  FakeInferenceServer::Model m;
  m.metadata.name = "simple";
  m.metadata.versions = {"1", "2"};
  m.metadata.platform = "onnxruntime_onnx";
  m.metadata.inputs = {{"INPUT0", DataType::kInt32, {-1, 16}}};
  m.metadata.outputs = {{"OUTPUT0", DataType::kFp32, {-1, 16}}};
  m.config.set_name("simple");
  m.config.set_platform("onnxruntime_onnx");
  m.config.set_max_batch_size(8);
  auto* in = m.config.add_input();
  in->set_name("INPUT0");
  in->set_data_type(inference::TYPE_INT32);
  in->add_dims(16);
  auto* out = m.config.add_output();
  out->set_name("OUTPUT0");
  out->set_data_type(inference::TYPE_FP32);
  out->add_dims(16);
  return m;
}

class HttpFrontendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_.AddModel(SimpleModel());
    auto unbatched = SimpleModel();
    unbatched.metadata.name = "unbatched";
    unbatched.config.set_name("unbatched");
    unbatched.config.set_max_batch_size(0);
    unbatched.ready = false;
    fake_.AddModel(unbatched);
    fake_.SetHandler(Echo);
    StartServer();
  }

  void StartServer(size_t max_body = 1 << 20,
                   std::chrono::seconds idle_timeout = std::chrono::seconds(300),
                   size_t max_body_in_flight = size_t{1} << 30) {
    HttpOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    options.threads = 2;
    options.max_body_bytes = max_body;
    options.request_bytes = std::make_shared<RequestBytes>(max_body_in_flight);
    options.idle_timeout = idle_timeout;
    auto started = HttpServer::Start(fake_, options);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(*started);
    ASSERT_GT(server_->port(), 0);
  }

  // A fresh connection per call unless a client is given.
  Reply Get(const std::string& target) { return TestClient(server_->port()).Get(target); }
  Reply Post(const std::string& target, const std::string& body, const Headers& headers = {}) {
    return TestClient(server_->port()).Post(target, body, headers);
  }
  Reply Infer(const std::string& body, const Headers& headers = {}) {
    return Post("/v2/models/simple/infer", body, headers);
  }

  // The server still answers a plain request: what every bad-input test checks last.
  void ExpectStillServing() {
    auto r = Infer(R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[5]}]})");
    EXPECT_EQ(r.status, 200) << r.body;
  }

  FakeInferenceServer fake_;
  std::unique_ptr<HttpServer> server_;
};

// --- health, metadata, config, stats ---

// A body holds room for what came, not for what was announced: a client that announces
// 64 MB and sends 10 bytes holds 1 MiB, and a body that arrives whole ends with exactly its
// length and the codec's padding reserved.
TEST(RequestBodyTest, ReservesAsTheBodyArrivesNotAllItsAnnouncedLength) {
  namespace bhttp = boost::beast::http;
  constexpr uint64_t kAnnounced = 64 * 1024 * 1024;
  bhttp::request_header<> header;
  std::string body;
  http::RequestBody::reader reader(header, body);
  boost::beast::error_code ec;
  reader.init(kAnnounced, ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_LT(body.capacity(), http::kBodyFirstReserveBytes + 4096);

  const std::string part(10, 'x');
  reader.put(boost::asio::buffer(part), ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(body, part);
  EXPECT_LT(body.capacity(), http::kBodyFirstReserveBytes + 4096);

  // The rest, 1 MiB at a time: the room never runs ahead of twice what came (+1 MiB).
  const std::string chunk(1024 * 1024, 'y');
  uint64_t sent = part.size();
  while (sent < kAnnounced) {
    const size_t n = std::min<uint64_t>(chunk.size(), kAnnounced - sent);
    ASSERT_EQ(reader.put(boost::asio::buffer(chunk.data(), n), ec), n);
    ASSERT_FALSE(ec) << ec.message();
    sent += n;
    ASSERT_EQ(body.size(), sent);
    ASSERT_LE(body.capacity(), 2 * sent + http::kBodyFirstReserveBytes + 4096);
  }
  reader.finish(ec);
  ASSERT_FALSE(ec);
  EXPECT_EQ(body.size(), kAnnounced);
  EXPECT_EQ(body[9], 'x');
  EXPECT_EQ(body[10], 'y');
  EXPECT_GE(body.capacity(), kAnnounced + http::kInferBodyPadding);
  EXPECT_LT(body.capacity(), kAnnounced + 64 * 1024);
}

TEST_F(HttpFrontendTest, HealthLiveAndReady) {
  auto live = Get("/v2/health/live");
  EXPECT_EQ(live.status, 200);
  EXPECT_EQ(live.body, "");
  EXPECT_EQ(live.Header("Content-Length"), "0");
  EXPECT_EQ(Get("/v2/health/ready").status, 200);
  fake_.SetReady(false);
  auto ready = Get("/v2/health/ready");
  EXPECT_EQ(ready.status, 503);  // not ready: retry elsewhere, with why in the body
  EXPECT_EQ(Json(ready.body)["error"].GetString(),
            std::string("not ready: see /v2/health/admission"));
  EXPECT_EQ(Get("/v2/health/live").status, 200);
}

TEST_F(HttpFrontendTest, ServerMetadata) {
  auto r = Get("/v2");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("Content-Type"), "application/json");
  auto d = Json(r.body);
  EXPECT_STREQ(d["name"].GetString(), "fastpath");
  EXPECT_STREQ(d["version"].GetString(), "0.0.0-test");
  ASSERT_TRUE(d["extensions"].IsArray());
  EXPECT_STREQ(d["extensions"][0].GetString(), "binary_tensor_data");
}

// Triton's extensions that fastpath lacks are named in the refusal, not a bare 404. No
// shared-memory region is ever registered: its status is an empty list, and an unregister
// (client clean-up code) succeeds with nothing to do.
TEST_F(HttpFrontendTest, ExtensionsItLacksAreRefusedByName) {
  for (const char* kind : {"systemsharedmemory", "cudasharedmemory"}) {
    const std::string base = std::string("/v2/") + kind;
    auto status = Get(base + "/status");
    EXPECT_EQ(status.status, 200) << kind;
    EXPECT_EQ(status.body, "[]") << kind;
    auto one = Get(base + "/region/r0/status");
    EXPECT_EQ(one.status, 404) << kind;
    EXPECT_THAT(ErrorOf(one), HasSubstr("shared memory region 'r0' is registered")) << kind;
    EXPECT_EQ(Post(base + "/unregister", "").status, 200) << kind;
    EXPECT_EQ(Post(base + "/region/r0/unregister", "").status, 200) << kind;
    auto registered = Post(base + "/region/r0/register", R"({"key":"/r0","byte_size":64})");
    EXPECT_EQ(registered.status, 501) << kind;
    EXPECT_THAT(ErrorOf(registered), HasSubstr("shared memory extension is not supported")) << kind;
  }
  for (const char* path : {"/v2/trace/setting", "/v2/models/simple/trace/setting"}) {
    auto r = Get(path);
    EXPECT_EQ(r.status, 501) << path;
    EXPECT_THAT(ErrorOf(r), HasSubstr("the trace extension is not supported")) << path;
  }
  EXPECT_THAT(ErrorOf(Post("/v2/logging", "{}")), HasSubstr("the logging extension"));
  auto generate = Post("/v2/models/simple/generate", R"({"text_input":"hi"})");
  EXPECT_EQ(generate.status, 501);
  EXPECT_THAT(ErrorOf(generate), HasSubstr("the generate extension is not supported"));
}

TEST_F(HttpFrontendTest, ModelMetadata) {
  for (const char* path : {"/v2/models/simple", "/v2/models/simple/versions/2"}) {
    auto r = Get(path);
    ASSERT_EQ(r.status, 200) << path;
    auto d = Json(r.body);
    EXPECT_STREQ(d["name"].GetString(), "simple");
    EXPECT_STREQ(d["versions"][1].GetString(), "2");
    EXPECT_STREQ(d["platform"].GetString(), "onnxruntime_onnx");
    EXPECT_STREQ(d["inputs"][0]["name"].GetString(), "INPUT0");
    EXPECT_STREQ(d["inputs"][0]["datatype"].GetString(), "INT32");
    EXPECT_EQ(d["inputs"][0]["shape"][0].GetInt64(), -1);
    EXPECT_EQ(d["inputs"][0]["shape"][1].GetInt64(), 16);
    EXPECT_STREQ(d["outputs"][0]["datatype"].GetString(), "FP32");
  }
  auto unknown = Get("/v2/models/nope");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_THAT(ErrorOf(unknown), HasSubstr("nope"));
  auto bad_version = Get("/v2/models/simple/versions/9");
  EXPECT_EQ(bad_version.status, 404);
  EXPECT_THAT(ErrorOf(bad_version), HasSubstr("'9'"));
  EXPECT_EQ(Get("/v2/models/simple/versions/x").status, 404);  // Triton: versions are digits
}

TEST_F(HttpFrontendTest, PercentEncodedModelName) {
  auto m = SimpleModel();
  m.metadata.name = "a b/c";
  fake_.AddModel(m);
  auto r = Get("/v2/models/a%20b%2Fc");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_STREQ(Json(r.body)["name"].GetString(), "a b/c");
}

TEST_F(HttpFrontendTest, ModelReady) {
  auto r = Get("/v2/models/simple/ready");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(Get("/v2/models/simple/versions/1/ready").status, 200);
  auto not_ready = Get("/v2/models/unbatched/ready");
  EXPECT_EQ(not_ready.status, 503);
  EXPECT_THAT(ErrorOf(not_ready), HasSubstr("not ready"));
  EXPECT_EQ(Get("/v2/models/nope/ready").status, 404);
}

TEST_F(HttpFrontendTest, ModelConfigUsesProtoNamesAndNumbers) {
  auto r = Get("/v2/models/simple/config");
  ASSERT_EQ(r.status, 200);
  auto d = Json(r.body);
  EXPECT_STREQ(d["name"].GetString(), "simple");
  EXPECT_EQ(d["max_batch_size"].GetInt(), 8);
  EXPECT_STREQ(d["input"][0]["data_type"].GetString(), "TYPE_INT32");
  ASSERT_TRUE(d["input"][0]["dims"][0].IsInt64()) << r.body;  // a number, not protobuf's "16"
  EXPECT_EQ(d["input"][0]["dims"][0].GetInt64(), 16);
  // Defaults are printed, as Triton does: clients read max_batch_size unconditionally.
  auto u = Json(Get("/v2/models/unbatched/config").body);
  ASSERT_TRUE(u.HasMember("max_batch_size"));
  EXPECT_EQ(u["max_batch_size"].GetInt(), 0);
  EXPECT_EQ(Get("/v2/models/nope/config").status, 404);
}

TEST_F(HttpFrontendTest, Statistics) {
  ASSERT_EQ(Infer(R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[5]}]})").status,
            200);
  auto all = Get("/v2/models/stats");
  ASSERT_EQ(all.status, 200);
  auto d = Json(all.body);
  ASSERT_EQ(d["model_stats"].Size(), 2u);
  auto one = Json(Get("/v2/models/simple/stats").body);
  ASSERT_EQ(one["model_stats"].Size(), 1u);
  const auto& s = one["model_stats"][0];
  EXPECT_STREQ(s["name"].GetString(), "simple");
  EXPECT_STREQ(s["version"].GetString(), "1");
  EXPECT_EQ(s["inference_count"].GetUint64(), 1u);
  EXPECT_EQ(s["execution_count"].GetUint64(), 1u);
  EXPECT_TRUE(s["last_inference"].IsUint64());
  for (const char* k : {"success", "fail", "queue", "compute_input", "compute_infer",
                        "compute_output", "cache_hit", "cache_miss"}) {
    ASSERT_TRUE(s["inference_stats"].HasMember(k)) << k;
    EXPECT_TRUE(s["inference_stats"][k]["count"].IsUint64());
    EXPECT_TRUE(s["inference_stats"][k]["ns"].IsUint64());
  }
  EXPECT_EQ(s["inference_stats"]["success"]["count"].GetUint64(), 1u);
  EXPECT_TRUE(s["batch_stats"].IsArray());
  EXPECT_EQ(Get("/v2/models/nope/stats").status, 404);
}

// --- repository ---

TEST_F(HttpFrontendTest, RepositoryIndexWithoutAnyBody) {
  // tritonclient sends this POST with neither Content-Length nor Transfer-Encoding.
  TestClient c(server_->port());
  auto r = c.Raw(RawRequest("POST", "/v2/repository/index", {}, ""));
  ASSERT_EQ(r.status, 200) << r.body;
  auto d = Json(r.body);
  ASSERT_TRUE(d.IsArray());
  ASSERT_EQ(d.Size(), 2u);
  EXPECT_STREQ(d[0]["name"].GetString(), "simple");
  EXPECT_STREQ(d[0]["version"].GetString(), "1");
  EXPECT_STREQ(d[0]["state"].GetString(), "READY");
  EXPECT_STREQ(d[1]["state"].GetString(), "UNAVAILABLE");
  EXPECT_STREQ(d[1]["reason"].GetString(), "not ready");
  // The connection is still usable: the empty body was not waited for.
  EXPECT_EQ(c.Get("/v2/health/live").status, 200);
}

TEST_F(HttpFrontendTest, RepositoryIndexReadyOnly) {
  auto r = Post("/v2/repository/index", R"({"ready": true})");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(Json(r.body).Size(), 1u);
  auto bad = Post("/v2/repository/index", R"({"ready": "yes"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(ErrorOf(bad), HasSubstr("'ready'"));
  auto malformed = Post("/v2/repository/index", "{");
  EXPECT_EQ(malformed.status, 400);
  EXPECT_THAT(ErrorOf(malformed), HasSubstr("offset 1"));
  EXPECT_EQ(Get("/v2/repository/index").status, 405);
}

TEST_F(HttpFrontendTest, LoadAndUnload) {
  auto load = Post("/v2/repository/models/unbatched/load", "");
  EXPECT_EQ(load.status, 200) << load.body;
  EXPECT_EQ(Get("/v2/models/unbatched/ready").status, 200);
  auto unload = Post("/v2/repository/models/unbatched/unload",
                     R"({"parameters":{"unload_dependents":false}})");
  EXPECT_EQ(unload.status, 200) << unload.body;
  unload = Post("/v2/repository/models/unbatched/unload",
                R"({"parameters":{"unload_dependents":true}})");
  EXPECT_EQ(unload.status, 200) << unload.body;
  EXPECT_EQ(fake_.load_calls(), (std::vector<std::string>{"load:unbatched", "unload:unbatched",
                                                          "unload+dependents:unbatched"}));
  // Triton's optional repository name in the path answers for all repositories.
  EXPECT_EQ(Post("/v2/repository/any/models/unbatched/load", "").status, 200);
  EXPECT_EQ(Post("/v2/repository/models/index", "").status, 200);  // a repository named so
  EXPECT_EQ(Post("/v2/repository/any/index", "").status, 200);
  EXPECT_EQ(Post("/v2/repository/any/models/unbatched/reload", "").status, 404);
  // A member given twice: which one counts would be a guess.
  auto twice = Post("/v2/repository/models/unbatched/load",
                    R"({"parameters":{"config":"{}"},"parameters":{}})");
  EXPECT_EQ(twice.status, 400);
  EXPECT_EQ(ErrorOf(twice), "the model load request body: 'parameters' is given twice");
  EXPECT_EQ(Post("/v2/repository/models/nope/load", "").status, 404);
  // Triton's overrides: a file's contents travel in base64, and reach the server decoded.
  auto config = Post("/v2/repository/models/simple/load",
                     R"({"parameters":{"config":"{\"max_batch_size\":0}",)"
                     R"("file:1/model.onnx":"AAEC/w==","file:labels.txt":"YQpi"}})");
  EXPECT_EQ(config.status, 200) << config.body;
  const LoadOverride sent = fake_.last_load();
  EXPECT_EQ(sent.config_json, R"({"max_batch_size":0})");
  EXPECT_EQ(sent.files,
            (std::map<std::string, std::string>{
                {"1/model.onnx", std::string("\x00\x01\x02\xff", 4)}, {"labels.txt", "a\nb"}}));
  auto not_base64 = Post("/v2/repository/models/simple/load",
                         R"({"parameters":{"config":"{}","file:1/model.onnx":"a!b="}})");
  EXPECT_EQ(not_base64.status, 400);
  EXPECT_EQ(ErrorOf(not_base64), "load parameter 'file:1/model.onnx' is not base64");
  fake_.SetExplicitControl(false);
  auto refused = Post("/v2/repository/models/simple/load", "");
  EXPECT_EQ(refused.status, 400);
  EXPECT_THAT(ErrorOf(refused), HasSubstr("explicit"));
}

// --- routing ---

TEST_F(HttpFrontendTest, UnknownPathsAndMethods) {
  for (const char* path :
       {"/", "/v1/models/simple", "/v2/", "/v2/models", "/v2/models/simple/infer/x",
        "/v2/models/simple/explode", "/v2/repository/models/simple/reload"}) {
    auto r = Get(path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(ErrorOf(r), "Not Found") << path;
  }
  EXPECT_EQ(Get("/v2/models/simple/infer").status, 405);
  EXPECT_EQ(Post("/v2/health/live", "").status, 405);
  EXPECT_EQ(Post("/v2/models/simple", "").status, 405);
  EXPECT_EQ(ErrorOf(Post("/v2", "")), "Method Not Allowed");
  // A query string does not change the route.
  EXPECT_EQ(Get("/v2/health/live?verbose=1").status, 200);
}

// --- inference ---

TEST_F(HttpFrontendTest, JsonInferFlatAndNestedWithIdEcho) {
  auto r = Infer(
      R"({"id":"my-id","inputs":[{"name":"x","datatype":"INT32","shape":[2,2],"data":[[1,2],[3,4]]},
                                             {"name":"y","datatype":"FP32","shape":[3],"data":[0.5,-1,1e-7]}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Header("Content-Type"), "application/json");
  EXPECT_FALSE(r.Header("Inference-Header-Content-Length").has_value());
  auto d = Json(r.body);
  EXPECT_STREQ(d["id"].GetString(), "my-id");
  EXPECT_STREQ(d["model_name"].GetString(), "simple");
  EXPECT_STREQ(d["model_version"].GetString(), "1");
  const auto& x = d["outputs"][0];
  EXPECT_STREQ(x["name"].GetString(), "OUT_x");
  EXPECT_STREQ(x["datatype"].GetString(), "INT32");
  EXPECT_EQ(x["shape"][0].GetInt64(), 2);
  ASSERT_EQ(x["data"].Size(), 4u);  // flat, as Triton returns it
  EXPECT_EQ(x["data"][3].GetInt(), 4);
  ASSERT_TRUE(x["data"][0].IsInt());
  EXPECT_EQ(d["outputs"][1]["data"][2].GetDouble(), static_cast<double>(1e-7f));
  auto seen = fake_.last_request();
  EXPECT_EQ(seen.model_name, "simple");
  EXPECT_EQ(seen.model_version, "");
  EXPECT_EQ(Values<int32_t>(seen.inputs[0].data), (std::vector<int32_t>{1, 2, 3, 4}));
}

TEST_F(HttpFrontendTest, VersionedInfer) {
  auto r = Post("/v2/models/simple/versions/2/infer",
                R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[1]}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(fake_.last_request().model_version, "2");
  EXPECT_STREQ(Json(r.body)["model_version"].GetString(), "2");
  auto unknown = Post("/v2/models/simple/versions/7/infer",
                      R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[1]}]})");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(Post("/v2/models/nope/infer", R"({"inputs":[]})").status, 404);
}

TEST_F(HttpFrontendTest, BinaryInputsAndOutputs) {
  const std::string json =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}},)"
      R"({"name":"b","datatype":"INT64","shape":[1],"parameters":{"binary_data_size":8}}],)"
      R"("parameters":{"binary_data_output":true}})";
  const std::string a = Bytes<float>({1.5f, -0.25f});
  const std::string b = Bytes<int64_t>({-42});
  auto r = Infer(json + a + b, {{"Inference-Header-Content-Length", std::to_string(json.size())}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Header("Content-Type"), "application/octet-stream");
  ASSERT_TRUE(r.Header("Inference-Header-Content-Length").has_value());
  const size_t header = std::stoul(*r.Header("Inference-Header-Content-Length"));
  auto d = Json(r.body.substr(0, header));
  EXPECT_EQ(d["outputs"][0]["parameters"]["binary_data_size"].GetUint64(), 8u);
  EXPECT_FALSE(d["outputs"][0].HasMember("data"));
  EXPECT_EQ(r.body.substr(header), a + b);
  EXPECT_EQ(r.Header("Content-Length"), std::to_string(r.body.size()));
}

TEST_F(HttpFrontendTest, MixedEncodingsPerOutput) {
  const std::string json =
      R"({"inputs":[{"name":"a","datatype":"UINT16","shape":[2],"parameters":{"binary_data_size":4}},)"
      R"({"name":"b","datatype":"INT8","shape":[2],"data":[-1,1]}],)"
      R"("outputs":[{"name":"OUT_b","parameters":{"binary_data":true}},{"name":"OUT_a","parameters":{"binary_data":false}}]})";
  auto r = Infer(json + Bytes<uint16_t>({7, 65535}),
                 {{"Inference-Header-Content-Length", std::to_string(json.size())}});
  ASSERT_EQ(r.status, 200) << r.body;
  const size_t header = std::stoul(*r.Header("Inference-Header-Content-Length"));
  auto d = Json(r.body.substr(0, header));
  EXPECT_STREQ(d["outputs"][0]["name"].GetString(), "OUT_b");  // in the order requested
  EXPECT_EQ(d["outputs"][0]["parameters"]["binary_data_size"].GetUint64(), 2u);
  EXPECT_EQ(d["outputs"][1]["data"][1].GetUint(), 65535u);
  EXPECT_EQ(r.body.substr(header), Bytes<int8_t>({-1, 1}));
}

TEST_F(HttpFrontendTest, UnknownRequestedOutputIsTheFacadesNotFound) {
  auto r = Infer(
      R"({"inputs":[{"name":"a","datatype":"INT8","shape":[1],"data":[1]}],"outputs":[{"name":"zzz"}]})");
  EXPECT_EQ(r.status, 404);
  EXPECT_THAT(ErrorOf(r), HasSubstr("zzz"));
}

TEST_F(HttpFrontendTest, BytesBothWays) {
  std::string elements;
  AppendBytesElement(&elements, "hello");
  AppendBytesElement(&elements, "");
  const std::string json =
      R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":)" +
      std::to_string(elements.size()) +
      R"(}},{"name":"t","datatype":"BYTES","shape":[1],"data":["w\u00e9"]}],)"
      R"("outputs":[{"name":"OUT_s"},{"name":"OUT_t","parameters":{"binary_data":true}}]})";
  auto r =
      Infer(json + elements, {{"Inference-Header-Content-Length", std::to_string(json.size())}});
  ASSERT_EQ(r.status, 200) << r.body;
  const size_t header = std::stoul(*r.Header("Inference-Header-Content-Length"));
  auto d = Json(r.body.substr(0, header));
  EXPECT_STREQ(d["outputs"][0]["data"][0].GetString(), "hello");
  EXPECT_STREQ(d["outputs"][0]["data"][1].GetString(), "");
  std::string t;
  AppendBytesElement(&t, "w\xc3\xa9");
  EXPECT_EQ(r.body.substr(header), t);
}

TEST_F(HttpFrontendTest, EveryDatatypeRoundTripsThroughJson) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"BOOL", "[true,false,true]"},
      {"UINT8", "[0,1,255]"},
      {"UINT16", "[0,1,65535]"},
      {"UINT32", "[0,1,4294967295]"},
      {"UINT64", "[0,1,18446744073709551615]"},
      {"INT8", "[-128,0,127]"},
      {"INT16", "[-32768,0,32767]"},
      {"INT32", "[-2147483648,0,2147483647]"},
      {"INT64", "[-9223372036854775808,0,9223372036854775807]"},
      {"FP32", "[0.5,-3.4028234663852886e38,1.401298464324817e-45]"},
      {"FP64", "[0.1,-1.7976931348623157e308,5e-324]"},
      {"BYTES", R"(["a","","\"q\""])"},
  };
  for (const auto& [dtype, data] : cases) {
    auto r = Infer(R"({"inputs":[{"name":"x","datatype":")" + dtype + R"(","shape":[3],"data":)" +
                   data + "}]}");
    ASSERT_EQ(r.status, 200) << dtype << ": " << r.body;
    auto d = Json(r.body);
    const auto& out = d["outputs"][0];
    EXPECT_EQ(out["datatype"].GetString(), dtype);
    // Same JSON values back (compare through a parse of the expected text).
    auto expected = Json(data);
    ASSERT_EQ(out["data"].Size(), 3u) << dtype;
    for (rapidjson::SizeType i = 0; i < 3; ++i) {
      EXPECT_TRUE(out["data"][i] == expected[i]) << dtype << " element " << i << " in " << r.body;
      if (dtype != "FP32" && dtype != "FP64") {
        EXPECT_EQ(out["data"][i].IsDouble(), false) << "integers must stay integers: " << r.body;
      }
    }
  }
}

TEST_F(HttpFrontendTest, HalfPrecisionOnlyAsBinary) {
  auto json_in = Infer(R"({"inputs":[{"name":"h","datatype":"FP16","shape":[1],"data":[1.0]}]})");
  EXPECT_EQ(json_in.status, 400);
  EXPECT_THAT(ErrorOf(json_in), HasSubstr("input 'h': FP16 data cannot be sent as JSON"));
  const std::string json =
      R"({"inputs":[{"name":"h","datatype":"BF16","shape":[1],"parameters":{"binary_data_size":2}}]})";
  // Binary in, JSON out: refused with a hint, like Triton.
  auto json_out =
      Infer(json + "\x80\x3f", {{"Inference-Header-Content-Length", std::to_string(json.size())}});
  EXPECT_EQ(json_out.status, 400);
  EXPECT_THAT(ErrorOf(json_out), HasSubstr("output 'OUT_h' is BF16"));
  const std::string json2 =
      json.substr(0, json.size() - 1) + R"(,"parameters":{"binary_data_output":true}})";
  auto binary_out = Infer(json2 + "\x80\x3f",
                          {{"Inference-Header-Content-Length", std::to_string(json2.size())}});
  ASSERT_EQ(binary_out.status, 200) << binary_out.body;
  EXPECT_EQ(binary_out.body.substr(binary_out.body.size() - 2), "\x80\x3f");
}

// --- HTTP protocol details ---

TEST_F(HttpFrontendTest, KeepAliveCarriesManyRequests) {
  TestClient c(server_->port());
  for (int i = 0; i < 5; ++i) {
    auto r = c.Post("/v2/models/simple/infer",
                    R"({"id":")" + std::to_string(i) +
                        R"(","inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[1]}]})");
    ASSERT_EQ(r.status, 200) << r.error;
    EXPECT_TRUE(r.keep_alive);
    EXPECT_STREQ(Json(r.body)["id"].GetString(), std::to_string(i).c_str());
    EXPECT_EQ(c.Get("/v2/health/ready").status, 200);
  }
  // An error does not close the connection either.
  EXPECT_EQ(c.Post("/v2/models/simple/infer", "{bad").status, 400);
  EXPECT_EQ(c.Get("/v2").status, 200);
}

TEST_F(HttpFrontendTest, PipelinedRequestsAreAnsweredInOrder) {
  TestClient c(server_->port());
  std::string two = RawRequest("GET", "/v2/health/live", {}, "") + RawRequest("GET", "/v2", {}, "");
  ASSERT_TRUE(c.Write(two));
  EXPECT_EQ(c.Read().body, "");
  EXPECT_STREQ(Json(c.Read().body)["name"].GetString(), "fastpath");
}

// Bodies larger than one read (the server reads a known body 64 KiB at a time), two of
// them back to back in one write: each request gets its own bytes, in order.
TEST_F(HttpFrontendTest, LargePipelinedBinaryBodiesKeepTheirBytes) {
  TestClient c(server_->port());
  std::string both;
  std::vector<std::string> tensors;
  for (int r = 0; r < 2; ++r) {
    std::vector<float> values(50000);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * (r + 1);
    tensors.push_back(Bytes<float>(values));
    const std::string json = R"({"inputs":[{"name":"a","datatype":"FP32","shape":[50000],)"
                             R"("parameters":{"binary_data_size":200000}}],)"
                             R"("parameters":{"binary_data_output":true}})";
    const std::string body = json + tensors.back();
    both += RawRequest("POST", "/v2/models/simple/infer",
                       {{"Inference-Header-Content-Length", std::to_string(json.size())},
                        {"Content-Length", std::to_string(body.size())}},
                       body);
  }
  ASSERT_TRUE(c.Write(both));
  for (int r = 0; r < 2; ++r) {
    auto reply = c.Read();
    ASSERT_EQ(reply.status, 200) << reply.body;
    const size_t header = std::stoul(*reply.Header("Inference-Header-Content-Length"));
    EXPECT_EQ(reply.body.substr(header), tensors[r]) << "request " << r;
  }
}

// A reply is written at once as far as the socket takes it; the rest of one larger than
// the socket's buffers, with a client slow to read, follows when the client reads.
TEST_F(HttpFrontendTest, ReplyLargerThanTheSocketBuffersArrivesWhole) {
  server_.reset();
  StartServer(/*max_body=*/size_t{32} << 20);
  constexpr size_t kCount = size_t{2} << 20;  // 8 MiB of FP32
  std::vector<float> values(kCount);
  for (size_t i = 0; i < kCount; ++i) values[i] = static_cast<float>(i % 1000003);
  const std::string tensor = Bytes<float>(values);
  const std::string json = R"({"inputs":[{"name":"a","datatype":"FP32","shape":[)" +
                           std::to_string(kCount) + R"(],"parameters":{"binary_data_size":)" +
                           std::to_string(tensor.size()) +
                           R"(}}],"parameters":{"binary_data_output":true}})";
  TestClient c(server_->port());
  ASSERT_TRUE(c.Write(RawRequest("POST", "/v2/models/simple/infer",
                                 {{"Inference-Header-Content-Length", std::to_string(json.size())},
                                  {"Content-Length", std::to_string(json.size() + tensor.size())}},
                                 json + tensor)));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the server's send buffer fills
  auto reply = c.Read();
  ASSERT_EQ(reply.status, 200) << reply.body.substr(0, 200);
  const size_t header = std::stoul(*reply.Header("Inference-Header-Content-Length"));
  EXPECT_TRUE(reply.body.substr(header) == tensor);
  EXPECT_EQ(c.Get("/v2/health/live").status, 200);  // and the connection goes on
}

TEST_F(HttpFrontendTest, PostWithoutContentLengthHasAnEmptyBody) {
  TestClient c(server_->port());
  auto r = c.Raw(RawRequest("POST", "/v2/models/simple/infer", {}, ""));
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(ErrorOf(r), HasSubstr("body is empty"));
}

TEST_F(HttpFrontendTest, HeaderNamesAreCaseInsensitiveAndContentTypeOptional) {
  const std::string json =
      R"({"inputs":[{"name":"a","datatype":"UINT8","shape":[2],"parameters":{"binary_data_size":2}}]})";
  const std::string body = json + "\x05\x06";
  TestClient c(server_->port());
  auto r = c.Raw(RawRequest("POST", "/v2/models/simple/infer",
                            {{"content-LENGTH", std::to_string(body.size())},
                             {"inference-header-content-length", std::to_string(json.size())}},
                            body));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(fake_.last_request().inputs[0].data, "\x05\x06");
}

TEST_F(HttpFrontendTest, ExpectContinue) {
  const std::string body = R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[8]}]})";
  TestClient c(server_->port());
  ASSERT_TRUE(c.Write(RawRequest(
      "POST", "/v2/models/simple/infer",
      {{"Content-Length", std::to_string(body.size())}, {"Expect", "100-continue"}}, "")));
  EXPECT_EQ(c.Read().status, 100);
  ASSERT_TRUE(c.Write(body));
  auto r = c.Read();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body)["outputs"][0]["data"][0].GetInt(), 8);
}

// An HTTP/1.0 client knows no interim response: Expect is ignored (RFC 9110 §10.1.1).
TEST_F(HttpFrontendTest, ExpectContinueFromAnHttp10ClientIsIgnored) {
  const std::string body = R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[8]}]})";
  TestClient c(server_->port());
  ASSERT_TRUE(c.Write("POST /v2/models/simple/infer HTTP/1.0\r\nContent-Length: " +
                      std::to_string(body.size()) + "\r\nExpect: 100-continue\r\n\r\n" + body));
  auto r = c.Read();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body)["outputs"][0]["data"][0].GetInt(), 8);
}

// Only chunked is a transfer coding here. A request whose codings do not end in chunked has
// no knowable length: read as bodiless, its "body" was served as a second request (request
// smuggling). Both refusals close the connection.
TEST_F(HttpFrontendTest, TransferCodingsOtherThanChunkedAreRefusedAndTheConnectionCloses) {
  TestClient smuggled(server_->port());
  auto r = smuggled.Raw(RawRequest("POST", "/v2/repository/index", {{"Transfer-Encoding", "gzip"}},
                                   RawRequest("GET", "/v2/models/simple", {}, "")));
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(ErrorOf(r), HasSubstr("Transfer-Encoding 'gzip' does not end in chunked"));
  EXPECT_TRUE(smuggled.ServerClosed());  // and no second answer

  TestClient two_lines(server_->port());  // the field's lines are one list: gzip, chunked
  r = two_lines.Raw(RawRequest("POST", "/v2/models/simple/infer",
                               {{"Transfer-Encoding", "gzip"}, {"Transfer-Encoding", "chunked"}},
                               "0\r\n\r\n"));
  EXPECT_EQ(r.status, 501);
  TestClient http10(server_->port());  // faulty framing in HTTP/1.0 (RFC 9112 §6.1)
  ASSERT_TRUE(
      http10.Write("POST /v2/repository/index HTTP/1.0\r\nConnection: keep-alive\r\n"
                   "Transfer-Encoding: gzip\r\n\r\n" +
                   RawRequest("GET", "/v2/models/simple", {}, "")));
  r = http10.Read();
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(ErrorOf(r), HasSubstr("Transfer-Encoding in an HTTP/1.0 request"));
  EXPECT_TRUE(http10.ServerClosed());

  TestClient gzip_chunked(server_->port());
  r = gzip_chunked.Raw(RawRequest("POST", "/v2/models/simple/infer",
                                  {{"Transfer-Encoding", "gzip, chunked"}}, "0\r\n\r\n"));
  EXPECT_EQ(r.status, 501);
  EXPECT_THAT(ErrorOf(r), HasSubstr("transfer coding 'gzip' is not supported"));
  EXPECT_TRUE(gzip_chunked.ServerClosed());
  ExpectStillServing();
}

// HEAD is GET without content: the same status and Content-Length, nothing behind them, so
// that the next answer on the connection is read from its first byte.
TEST_F(HttpFrontendTest, HeadIsGetWithoutTheContent) {
  const Reply get = Get("/v2/models/simple");
  ASSERT_EQ(get.status, 200);
  TestClient c(server_->port());
  ASSERT_TRUE(c.Write(RawRequest("HEAD", "/v2/models/simple", {}, "") +
                      RawRequest("HEAD", "/v2/models/simple/infer", {}, "") +
                      RawRequest("GET", "/v2/health/live", {}, "")));
  Reply head = c.Read(/*head=*/true);
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.Header("Content-Length"), std::to_string(get.body.size()));
  head = c.Read(/*head=*/true);
  EXPECT_EQ(head.status, 405);
  const Reply live = c.Read();
  EXPECT_EQ(live.status, 200) << live.error;
  EXPECT_EQ(live.body, "");
  // What follows a HEAD is not one: a refusal after it carries its body.
  ASSERT_TRUE(c.Write(
      RawRequest("HEAD", "/v2/health/live", {}, "") +
      RawRequest("POST", "/v2/models/simple/infer", {{"Content-Length", "100000000"}}, "")));
  EXPECT_EQ(c.Read(/*head=*/true).status, 200);
  const Reply refused = c.Read();
  EXPECT_EQ(refused.status, 413);
  EXPECT_THAT(ErrorOf(refused), HasSubstr("exceeds the limit"));
}

// RFC 9112 §3.2.2: a target in absolute form, as a client configured for a proxy sends it.
TEST_F(HttpFrontendTest, AbsoluteFormTargets) {
  TestClient c(server_->port());
  auto r = c.Raw(RawRequest("GET", "http://127.0.0.1:8000/v2/models/simple", {}, ""));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body)["name"].GetString(), std::string("simple"));
  r = c.Raw(RawRequest("GET", "HTTP://example/v2/health/ready?x=1", {}, ""));
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(HttpFrontendTest, ChunkedRequestBody) {
  const std::string body = R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[9]}]})";
  const std::string a = body.substr(0, 10), b = body.substr(10);
  auto hex = [](size_t n) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%zx", n);
    return std::string(buf);
  };
  TestClient c(server_->port());
  auto r = c.Raw(RawRequest(
      "POST", "/v2/models/simple/infer", {{"Transfer-Encoding", "chunked"}},
      hex(a.size()) + "\r\n" + a + "\r\n" + hex(b.size()) + "\r\n" + b + "\r\n0\r\n\r\n"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body)["outputs"][0]["data"][0].GetInt(), 9);
}

const std::string kBody42 =
    R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[42]}]})";

// A body that came with its header is parsed at once; the rest of one that did not is
// read from the socket. Either way a malformed body is a 400 and the server goes on.
TEST_F(HttpFrontendTest, BodyWithItsHeaderOrAfterIt) {
  const std::string head = RawRequest("POST", "/v2/models/simple/infer",
                                      {{"Content-Length", std::to_string(kBody42.size())}}, "");
  TestClient split(server_->port());
  ASSERT_TRUE(split.Write(head + kBody42.substr(0, 20)));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(split.Write(kBody42.substr(20)));
  auto r = split.Read();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body)["outputs"][0]["data"][0].GetInt(), 42);

  TestClient bad_chunk(server_->port());
  auto bad =
      bad_chunk.Raw(RawRequest("POST", "/v2/models/simple/infer",
                               {{"Transfer-Encoding", "chunked"}}, "zz\r\nabc\r\n0\r\n\r\n"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(ErrorOf(bad), HasSubstr("malformed HTTP request"));
  ExpectStillServing();
}

std::string Compress(const std::string& in, bool gzip) {
  z_stream zs{};
  deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, gzip ? 15 + 16 : 15, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, in.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

TEST_F(HttpFrontendTest, CompressedRequestBodies) {
  const std::string body = R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[3]}]})";
  for (bool gzip : {true, false}) {
    auto r = Infer(Compress(body, gzip), {{"Content-Encoding", gzip ? "gzip" : "deflate"}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Json(r.body)["outputs"][0]["data"][0].GetInt(), 3);
  }
  // Several gzip members (RFC 1952 §2.2) are one body; bytes after the last are an error,
  // not dropped.
  const std::string two_members =
      Compress(body.substr(0, 30), true) + Compress(body.substr(30), true);
  auto r = Infer(two_members, {{"Content-Encoding", "gzip"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body)["outputs"][0]["data"][0].GetInt(), 3);
  auto junk = Infer(Compress(body, true) + "trailing junk", {{"Content-Encoding", "gzip"}});
  EXPECT_EQ(junk.status, 400);
  EXPECT_THAT(ErrorOf(junk), HasSubstr("not valid compressed data"));
  auto bad = Infer("not compressed", {{"Content-Encoding", "gzip"}});
  EXPECT_EQ(bad.status, 400);
  auto unknown = Infer(body, {{"Content-Encoding", "br"}});
  EXPECT_EQ(unknown.status, 400);
  EXPECT_THAT(ErrorOf(unknown), HasSubstr("Content-Encoding 'br'"));
  // The repository's bodies too, as Triton inflates every request body.
  auto index = Post("/v2/repository/index", Compress(R"({"ready":true})", true),
                    {{"Content-Encoding", "gzip"}});
  EXPECT_EQ(index.status, 200) << index.body;
  EXPECT_TRUE(Json(index.body).IsArray()) << index.body;
}

// --- bad input: each a 4xx naming the field, and the server keeps serving ---

TEST_F(HttpFrontendTest, BadInputsGetClearErrorsAndTheServerGoesOn) {
  struct Case {
    std::string body;
    Headers headers;
    int status;
    std::string fragment;
  };
  const std::string bin =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]})";
  const std::string bytes_json =
      R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":4}}]})";
  const std::vector<Case> cases = {
      {R"({"inputs":[{"name":"x",)", {}, 400, "malformed JSON in the request body at offset"},
      {R"({"inputs":[{"name":"x","datatype":"FLOAT","shape":[1],"data":[1]}]})",
       {},
       400,
       "input 'x': unknown 'datatype' 'FLOAT'"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[3],"data":[1,2]}]})",
       {},
       400,
       "input 'x': 'data' has 2 elements but shape [3] needs 3"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[-3],"data":[1]}]})",
       {},
       400,
       "input 'x': shape [-3] has negative dimension"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,1000000000000],"data":[1]}]})",
       {},
       400,
       "input 'x': shape [1,1000000000000]"},
      {R"({"id":"1"})", {}, 400, "missing 'inputs'"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]},{"name":"x","datatype":"FP32","shape":[1],"data":[1]}]})",
       {},
       400,
       "input 'x' appears more than once"},
      {R"({"inputs":[],"outputs":[{"name":5}]})", {}, 400, "output 0: 'name' must be a string"},
      {bin + "1234",
       {{"Inference-Header-Content-Length", "10000"}},
       400,
       "Inference-Header-Content-Length is 10000 but the body has only"},
      {bin + "1234",
       {{"Inference-Header-Content-Length", std::to_string(bin.size())}},
       400,
       "input 'x': 'binary_data_size' is 8 but only 4 bytes"},
      {bin + "12345678",
       {{"Inference-Header-Content-Length", "12abc"}},
       400,
       "Inference-Header-Content-Length must be a non-negative integer, got '12abc'"},
      {bin + "12345678",
       {{"Inference-Header-Content-Length", "-5"}},
       400,
       "Inference-Header-Content-Length must be a non-negative integer"},
      {bytes_json + std::string("\x09\x00\x00\x00", 4),
       {{"Inference-Header-Content-Length", std::to_string(bytes_json.size())}},
       400,
       "BYTES tensor 's' element 0 declares 9 bytes"},
      {R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[1],"data":[["a"],1]}]})",
       {},
       400,
       "input 's'"},
  };
  for (const auto& c : cases) {
    auto r = Infer(c.body, c.headers);
    EXPECT_EQ(r.status, c.status) << c.body << " -> " << r.body;
    EXPECT_THAT(ErrorOf(r), HasSubstr(c.fragment)) << c.body;
    EXPECT_EQ(r.Header("Content-Type"), "application/json");
  }
  ExpectStillServing();
}

TEST_F(HttpFrontendTest, OversizedBodyIs413WithoutReadingIt) {
  server_.reset();
  StartServer(/*max_body=*/1000);
  TestClient c(server_->port());
  // Only the header is sent: a server that waited for the body would time out instead.
  auto r =
      c.Raw(RawRequest("POST", "/v2/models/simple/infer", {{"Content-Length", "100000000"}}, ""));
  EXPECT_EQ(r.status, 413);
  EXPECT_THAT(ErrorOf(r), HasSubstr("exceeds the limit of 1000 bytes"));
  EXPECT_FALSE(r.keep_alive);
  EXPECT_TRUE(c.ServerClosed());
  // Chunked bodies are cut off at the limit too.
  TestClient chunked(server_->port());
  std::string big(4000, 'x');
  auto r2 =
      chunked.Raw(RawRequest("POST", "/v2/models/simple/infer", {{"Transfer-Encoding", "chunked"}},
                             "fa0\r\n" + big + "\r\n0\r\n\r\n"));
  EXPECT_EQ(r2.status, 413);
  // Shapes are held to the body limit as well: 2000 elements cannot fit in 1000 bytes, so a
  // small body that declares them contradicts itself (400: no retry can pass).
  auto r3 = Infer(R"({"inputs":[{"name":"x","datatype":"UINT8","shape":[2000],"data":[1]}]})");
  EXPECT_EQ(r3.status, 400);
  EXPECT_THAT(ErrorOf(r3), HasSubstr("shape [2000] has more elements than a request body within "
                                     "the server's limit can hold (1000)"));
  ExpectStillServing();
}

// The bodies in flight are bounded all connections together, each charged as its bytes
// arrive: a request whose body would pass the bound gets 503 with Retry-After and is not read
// further (a burst of large bodies ran the process out of memory: std::bad_alloc, and the
// server was gone), the room comes back once a held body is answered, and a client that
// announces a large body and sends nothing holds nothing.
TEST_F(HttpFrontendTest, BodiesInFlightPastTheirBoundAre503) {
  server_.reset();
  StartServer(/*max_body=*/4000, std::chrono::seconds(300), /*max_body_in_flight=*/5000);
  const std::string head =
      RawRequest("POST", "/v2/models/simple/infer", {{"Content-Length", "3000"}}, "");
  // Announced, nothing sent: holds nothing.
  TestClient idle(server_->port());
  ASSERT_TRUE(
      idle.Write(RawRequest("POST", "/v2/models/simple/infer", {{"Content-Length", "4000"}}, "")));
  // 2500 of 3000 bytes sent: those are held while the rest comes.
  TestClient slow(server_->port());
  ASSERT_TRUE(slow.Write(head + std::string(2500, ' ')));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // read by the server
  TestClient refused(server_->port());
  auto r = refused.Raw(head + std::string(3000, ' '));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.Header("Retry-After"), "1");
  EXPECT_THAT(ErrorOf(r), HasSubstr("the server holds 2500 bytes of requests read or being "
                                    "served, and this one's first 3000 bytes would pass its "
                                    "limit of 5000"));
  EXPECT_TRUE(refused.ServerClosed());
  ExpectStillServing();  // a small body fits beside the held one
  // The held request completes (its body is no inference request: 400) and gives its room back.
  ASSERT_TRUE(slow.Write(std::string(500, ' ')));
  EXPECT_EQ(slow.Read().status, 400);
  auto again = Infer(std::string(3000, ' '));
  EXPECT_EQ(again.status, 400) << again.body;
  ExpectStillServing();
}

TEST_F(HttpFrontendTest, MalformedHttpIs400) {
  TestClient c(server_->port());
  auto r = c.Raw("GET /v2 HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(ErrorOf(r), HasSubstr("malformed HTTP request"));
  ExpectStillServing();
}

TEST_F(HttpFrontendTest, ExceptionInAHandlerBecomes500AndTheConnectionSurvives) {
  fake_.SetHandler(
      [](const InferRequest&) -> StatusOr<InferResponse> { throw std::runtime_error("boom"); });
  TestClient c(server_->port());
  auto r = c.Post("/v2/models/simple/infer",
                  R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[1]}]})");
  EXPECT_EQ(r.status, 500);
  EXPECT_THAT(ErrorOf(r), HasSubstr("boom"));
  EXPECT_EQ(c.Get("/v2/health/live").status, 200);
}

TEST_F(HttpFrontendTest, FacadeErrorsMapThroughHttpStatusFor) {
  fake_.SetHandler(
      [](const InferRequest&) -> StatusOr<InferResponse> { return Unavailable("queue full"); });
  auto r = Infer(R"({"inputs":[]})");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(ErrorOf(r), "queue full");
  EXPECT_FALSE(r.Header("Retry-After").has_value());
}

TEST_F(HttpFrontendTest, OutOfMemoryIs503WithRetryAfter) {
  fake_.SetHandler([](const InferRequest&) -> StatusOr<InferResponse> {
    return ResourceExhausted("out of memory: running model 'm': BFCArena");
  });
  auto r = Infer(R"({"inputs":[]})");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.Header("Retry-After"), "1");
  EXPECT_THAT(ErrorOf(r), HasSubstr("out of memory"));
}

// --- concurrency and lifecycle ---

TEST_F(HttpFrontendTest, AsyncFacadeAnswers) {
  fake_.SetAsync(true);
  TestClient c(server_->port());
  for (int i = 0; i < 10; ++i) {
    auto r = c.Post("/v2/models/simple/infer",
                    R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[)" +
                        std::to_string(i) + "]}]}");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Json(r.body)["outputs"][0]["data"][0].GetInt(), i);
  }
}

TEST_F(HttpFrontendTest, ManyConcurrentConnections) {
  fake_.SetAsync(true);
  constexpr int kClients = 32;
  constexpr int kRequests = 8;
  std::vector<std::unique_ptr<TestClient>> clients;
  for (int i = 0; i < kClients; ++i)
    clients.push_back(std::make_unique<TestClient>(server_->port()));  // all open at once
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      for (int j = 0; j < kRequests; ++j) {
        const int v = i * 1000 + j;
        auto r =
            clients[i]->Post("/v2/models/simple/infer",
                             R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[)" +
                                 std::to_string(v) + "]}]}");
        if (r.status == 200 && Json(r.body)["outputs"][0]["data"][0].GetInt() == v) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kClients * kRequests);
}

// A handler that holds every request until released.
class Gate {
 public:
  void Open() {
    std::lock_guard l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock l(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(l, [&] { return open_; });
  }
  void AwaitWaiters(int n) {
    std::unique_lock l(mu_);
    cv_.wait(l, [&] { return waiting_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int waiting_ = 0;
};

TEST_F(HttpFrontendTest, ShutdownAnswersRequestsInFlight) {
  auto gate = std::make_shared<Gate>();
  fake_.SetAsync(true);
  fake_.SetHandler([gate](const InferRequest& r) {
    gate->Wait();
    return Echo(r);
  });
  TestClient busy(server_->port());
  TestClient idle(server_->port());
  ASSERT_EQ(idle.Get("/v2/health/live").status, 200);
  ASSERT_TRUE(
      busy.Write(RawRequest("POST", "/v2/models/simple/infer",
                            {{"Content-Length", std::to_string(kBody42.size())}}, kBody42)));
  gate->AwaitWaiters(1);
  const int port = server_->port();
  std::thread stopper([&] { server_->Shutdown(std::chrono::seconds(30)); });
  // The idle connection is closed and no new connection is accepted...
  EXPECT_TRUE(idle.ServerClosed());
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket s(ioc);
  boost::system::error_code ec;
  // (Shutdown closes the listener before anything else; allow it to get there.)
  for (int i = 0; i < 200 && !ec; ++i) {
    s = boost::asio::ip::tcp::socket(ioc);
    s.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)}, ec);
    if (!ec) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(ec) << "still accepting connections";
  // ...but the request in flight is answered, and then its connection closes.
  gate->Open();
  auto r = busy.Read();
  EXPECT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(Json(r.body)["outputs"][0]["data"][0].GetInt(), 42);
  EXPECT_FALSE(r.keep_alive);
  stopper.join();
  server_->Shutdown(std::chrono::seconds(0));  // idempotent
}

TEST_F(HttpFrontendTest, LateFacadeReplyAfterShutdownIsDropped) {
  auto gate = std::make_shared<Gate>();
  fake_.SetAsync(true);
  fake_.SetHandler([gate](const InferRequest& r) {
    gate->Wait();
    return Echo(r);
  });
  TestClient c(server_->port());
  ASSERT_TRUE(c.Write(RawRequest("POST", "/v2/models/simple/infer",
                                 {{"Content-Length", std::to_string(kBody42.size())}}, kBody42)));
  gate->AwaitWaiters(1);
  server_->Shutdown(std::chrono::milliseconds(50));
  server_.reset();
  gate->Open();  // the facade answers after the front end is gone: nothing may crash
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(c.ServerClosed());
}

TEST_F(HttpFrontendTest, ADrainAnswersOpenAndNewConnectionsAndClosesThem) {
  TestClient c(server_->port());
  ASSERT_EQ(c.Get("/v2").status, 200);
  server_->BeginDrain();
  // Answered, and told to go elsewhere for the next one.
  const auto reply = c.Get("/v2/health/live");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.Header("Connection"), "close");
  EXPECT_TRUE(c.ServerClosed());
  // A connection made during the drain (a client sent here before the endpoints changed)
  // is answered too, never reset.
  TestClient late(server_->port());
  const auto late_reply = late.Get("/v2/health/live");
  EXPECT_EQ(late_reply.status, 200);
  EXPECT_EQ(late_reply.Header("Connection"), "close");
  EXPECT_TRUE(late.ServerClosed());
}

// The idle timeout: a connection that sends nothing, or stops halfway through a header,
// is closed; one that keeps sending requests, or waits for a reply that takes longer than
// the timeout, is not. (The server checks each connection's deadline with one timer that
// waits again when the deadline has moved on.)
TEST_F(HttpFrontendTest, IdleTimeoutClosesSilentConnectionsOnly) {
  server_.reset();
  StartServer(1 << 20, std::chrono::seconds(1));
  TestClient silent(server_->port());
  TestClient halfway(server_->port());
  ASSERT_TRUE(halfway.Write("GET /v2/health/live HTTP/1.1\r\nHost: t"));
  TestClient busy(server_->port());
  for (int i = 0; i < 12; ++i) {  // 2.4 s of requests 0.2 s apart, past the timer's first firing
    ASSERT_EQ(busy.Get("/v2/health/live").status, 200) << "request " << i;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(silent.ServerClosed());
  EXPECT_TRUE(halfway.ServerClosed());

  auto gate = std::make_shared<Gate>();
  fake_.SetAsync(true);
  fake_.SetHandler([gate](const InferRequest& r) {
    gate->Wait();
    return Echo(r);
  });
  ASSERT_TRUE(
      busy.Write(RawRequest("POST", "/v2/models/simple/infer",
                            {{"Content-Length", std::to_string(kBody42.size())}}, kBody42)));
  gate->AwaitWaiters(1);
  std::this_thread::sleep_for(
      std::chrono::milliseconds(2500));  // the reply takes over two timeouts
  gate->Open();
  auto r = busy.Read();
  EXPECT_EQ(r.status, 200) << r.error;
  EXPECT_TRUE(r.keep_alive);
  EXPECT_EQ(busy.Get("/v2/health/live").status, 200);
}

TEST(HttpServerStart, BindFailureIsAStatus) {
  FakeInferenceServer fake;
  HttpOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  auto first = HttpServer::Start(fake, options);
  ASSERT_TRUE(first.ok());
  options.port = (*first)->port();
  auto second = HttpServer::Start(fake, options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr(std::to_string(options.port)));
  options.address = "not an address";
  auto third = HttpServer::Start(fake, options);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), StatusCode::kInvalidArgument);
}

// --- a client that hangs up while its request is in flight ---

constexpr auto kHangGuard = std::chrono::seconds(20);

// Stands in for a scheduler whose instances are all busy: a request for model "queued"
// stays queued until its client goes away (the request's `cancelled` flag) and is then
// answered CANCELLED without running, as the batcher does; or it runs once Release()
// lets it (the first Release the first such request, and so on). Other requests are
// echoed.
class QueuedUntilCancelled {
 public:
  FakeInferenceServer::Handler handler() {
    return [this](const InferRequest& request) -> StatusOr<InferResponse> {
      if (request.model_name != "queued") return Echo(request);
      int ticket = 0;
      {
        std::lock_guard lock(mu_);
        ticket = ++entered_;
        cv_.notify_all();
      }
      const auto give_up = std::chrono::steady_clock::now() + kHangGuard;
      const auto gone = [&] { return request.cancelled && request.cancelled->load(); };
      // The flag is a plain atomic (nothing to wait on): look at it until it is set.
      while (!gone() && released_ < ticket && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      std::lock_guard lock(mu_);
      const bool dropped = gone();
      ++(dropped ? cancelled_ : ran_);
      cv_.notify_all();
      if (dropped) return Cancelled("cancelled while queued; it never reached the model");
      return Echo(request);
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
  void Release() { ++released_; }
  int ran() {
    std::lock_guard lock(mu_);
    return ran_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> released_{0};
  int entered_ = 0;
  int cancelled_ = 0;
  int ran_ = 0;
};

class HttpCancellationTest : public HttpFrontendTest {
 protected:
  void SetUp() override {
    HttpFrontendTest::SetUp();
    auto queued = SimpleModel();
    queued.metadata.name = "queued";
    queued.config.set_name("queued");
    fake_.AddModel(queued);
    fake_.SetAsync(true);
    fake_.SetHandler(queue_.handler());
  }
  static std::string QueuedRequest() {
    return RawRequest("POST", "/v2/models/queued/infer",
                      {{"Content-Length", std::to_string(kBody42.size())}}, kBody42);
  }

  QueuedUntilCancelled queue_;
};

TEST_F(HttpCancellationTest, ClientThatHangsUpMarksItsQueuedRequest) {
  TestClient gone(server_->port());
  ASSERT_TRUE(gone.Write(QueuedRequest()));
  ASSERT_TRUE(queue_.WaitEntered(1));
  gone.Close();
  ASSERT_TRUE(queue_.WaitCancelled(1)) << "the server never noticed the client hang up";
  EXPECT_EQ(queue_.ran(), 0);
  // The next client is answered as usual.
  ExpectStillServing();
}

TEST_F(HttpCancellationTest, PipelinedRequestIsNotAHangUp) {
  TestClient c(server_->port());
  ASSERT_TRUE(c.Write(QueuedRequest() + RawRequest("GET", "/v2/health/live", {}, "")));
  ASSERT_TRUE(queue_.WaitEntered(1));
  queue_.Release();
  const Reply first = c.Read();
  EXPECT_EQ(first.status, 200) << first.error << first.body;
  EXPECT_EQ(Json(first.body)["outputs"][0]["data"][0].GetInt(), 42);
  EXPECT_EQ(c.Read().status, 200);
  EXPECT_EQ(queue_.ran(), 1);
  // The connection stays usable, and a later hang-up on it is still noticed.
  ASSERT_TRUE(c.Write(QueuedRequest()));
  ASSERT_TRUE(queue_.WaitEntered(2));
  c.Close();
  ASSERT_TRUE(queue_.WaitCancelled(1));
}

}  // namespace
}  // namespace fastpath::frontend
