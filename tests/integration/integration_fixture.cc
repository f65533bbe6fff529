#include "integration_fixture.h"

#include <algorithm>

namespace fastpath::integration {

namespace fs = std::filesystem;

void CopyTestModel(const fs::path& repo, const std::string& model) {
  fs::copy(fs::path(FASTPATH_TEST_REPOSITORY_DIR) / model, repo / model,
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
}

std::vector<std::string> AllTestModels() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(FASTPATH_TEST_REPOSITORY_DIR)) {
    // The corrupt model is added only by the tests about bad models.
    if (entry.is_directory() && entry.path().filename() != "corrupt") {
      names.push_back(entry.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

void AddCorruptModel(testing::TempRepository& repo) {
  repo.AddVersion("corrupt", 1, "corrupt");
  std::string config = testing::kSimpleConfig;
  config.replace(config.find("\"simple\""), 8, "\"corrupt\"");
  repo.WriteConfig("corrupt", config);
}

rapidjson::Document ParseJson(const std::string& text) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseNanAndInfFlag>(text.data(), text.size());
  EXPECT_FALSE(doc.HasParseError()) << "not JSON: " << text.substr(0, 500);
  return doc;
}

std::string ToJson(const rapidjson::Value& value) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  value.Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::optional<uint64_t> JsonUint(const rapidjson::Value& value) {
  if (value.IsUint64()) return value.GetUint64();
  if (value.IsString()) {
    try {
      return std::stoull(std::string(value.GetString(), value.GetStringLength()));
    } catch (...) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::string ErrorMessage(const std::string& body) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("error") ||
      !doc["error"].IsString()) {
    return "";
  }
  return doc["error"].GetString();
}

std::vector<int32_t> Iota(int32_t start, size_t n) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<int32_t>(i);
  return v;
}

namespace {
std::string IntList(const std::vector<int32_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}
}  // namespace

std::string SimpleJsonRequest(const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                              const std::string& id) {
  std::string rows = std::to_string(a.size() / 16);
  std::string out = "{";
  if (!id.empty()) out += "\"id\":\"" + id + "\",";
  out += "\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"INT32\",\"shape\":[" + rows +
         ",16],\"data\":" + IntList(a) + "},{\"name\":\"INPUT1\",\"datatype\":\"INT32\",\"shape\":[" +
         rows + ",16],\"data\":" + IntList(b) + "}]}";
  return out;
}

void ExpectSimpleJsonResponse(const std::string& body, const std::vector<int32_t>& a,
                              const std::vector<int32_t>& b) {
  rapidjson::Document doc = ParseJson(body);
  ASSERT_TRUE(doc.IsObject() && doc.HasMember("outputs") && doc["outputs"].IsArray()) << body;
  const auto& outputs = doc["outputs"];
  ASSERT_EQ(outputs.Size(), 2u) << body;
  for (const auto& out : outputs.GetArray()) {
    ASSERT_TRUE(out.HasMember("name") && out.HasMember("data") && out["data"].IsArray()) << body;
    std::string name = out["name"].GetString();
    ASSERT_TRUE(name == "OUTPUT0" || name == "OUTPUT1") << body;
    EXPECT_STREQ(out["datatype"].GetString(), "INT32");
    ASSERT_EQ(out["shape"].Size(), 2u);
    EXPECT_EQ(out["shape"][0].GetInt64(), static_cast<int64_t>(a.size() / 16));
    EXPECT_EQ(out["shape"][1].GetInt64(), 16);
    const auto& data = out["data"];
    ASSERT_EQ(data.Size(), a.size()) << body;
    for (size_t i = 0; i < a.size(); ++i) {
      int32_t want = name == "OUTPUT0" ? a[i] + b[i] : a[i] - b[i];
      ASSERT_EQ(data[static_cast<rapidjson::SizeType>(i)].GetInt(), want) << name << "[" << i << "]";
    }
  }
}

BinaryBody MakeBinaryBody(const std::string& json, const std::vector<std::string>& blobs) {
  BinaryBody out;
  out.body = json;
  out.json_length = json.size();
  for (const auto& b : blobs) out.body += b;
  return out;
}

DecodedBinaryResponse DecodeBinaryResponse(const HttpResponse& response) {
  DecodedBinaryResponse out;
  size_t json_length = response.body.size();
  if (auto h = response.Header("inference-header-content-length")) json_length = std::stoul(*h);
  EXPECT_LE(json_length, response.body.size());
  json_length = std::min(json_length, response.body.size());
  out.json = ParseJson(response.body.substr(0, json_length));
  size_t offset = json_length;
  if (!out.json.IsObject() || !out.json.HasMember("outputs")) return out;
  for (const auto& o : out.json["outputs"].GetArray()) {
    std::string blob;
    if (o.HasMember("parameters") && o["parameters"].HasMember("binary_data_size")) {
      size_t size = o["parameters"]["binary_data_size"].GetUint64();
      EXPECT_LE(offset + size, response.body.size()) << "binary output beyond the body";
      if (offset + size <= response.body.size()) blob = response.body.substr(offset, size);
      offset += size;
    }
    out.blobs.push_back(std::move(blob));
  }
  EXPECT_EQ(offset, response.body.size()) << "bytes after the last binary output";
  return out;
}

std::string BytesElements(const std::vector<std::string>& elements) {
  std::string out;
  for (const auto& e : elements) {
    uint32_t n = static_cast<uint32_t>(e.size());
    char prefix[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                      static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
    out.append(prefix, 4);
    out += e;
  }
  return out;
}

std::unique_ptr<inference::GRPCInferenceService::Stub> MakeStub(const std::string& target) {
  grpc::ChannelArguments args;
  // Raised like tritonclient does: tensors are routinely larger than gRPC's 4 MB default.
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return inference::GRPCInferenceService::NewStub(
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
}

inference::ModelInferRequest SimpleGrpcRequest(const std::vector<int32_t>& a,
                                               const std::vector<int32_t>& b,
                                               const std::string& id) {
  inference::ModelInferRequest request;
  request.set_model_name("simple");
  request.set_id(id);
  for (const char* name : {"INPUT0", "INPUT1"}) {
    auto* input = request.add_inputs();
    input->set_name(name);
    input->set_datatype("INT32");
    input->add_shape(static_cast<int64_t>(a.size() / 16));
    input->add_shape(16);
  }
  request.add_raw_input_contents(AsBytes(a));
  request.add_raw_input_contents(AsBytes(b));
  return request;
}

void ExpectSimpleGrpcResponse(const inference::ModelInferResponse& response,
                              const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  ASSERT_EQ(response.outputs_size(), 2);
  ASSERT_EQ(response.raw_output_contents_size(), 2);
  for (int i = 0; i < 2; ++i) {
    const auto& out = response.outputs(i);
    EXPECT_EQ(out.datatype(), "INT32");
    ASSERT_EQ(out.shape_size(), 2);
    EXPECT_EQ(out.shape(0), static_cast<int64_t>(a.size() / 16));
    EXPECT_EQ(out.shape(1), 16);
    std::vector<int32_t> got = FromBytes<int32_t>(response.raw_output_contents(i));
    ASSERT_EQ(got.size(), a.size()) << out.name();
    for (size_t j = 0; j < a.size(); ++j) {
      int32_t want = out.name() == "OUTPUT0" ? a[j] + b[j] : a[j] - b[j];
      ASSERT_EQ(got[j], want) << out.name() << "[" << j << "]";
    }
  }
}

std::string Describe(const grpc::Status& status) {
  return "code " + std::to_string(status.error_code()) + ": " + status.error_message();
}

SimpleLoad::SimpleLoad(int port, int clients) {
  for (int c = 0; c < clients; ++c) {
    threads_.emplace_back([this, port, c] {
      Client(port, "/v2/models/simple/infer", SimpleJsonRequest(Iota(c, 16), Iota(100 + c, 16)));
    });
  }
}

SimpleLoad::SimpleLoad(int port, int clients, const std::string& path, const std::string& body) {
  for (int c = 0; c < clients; ++c) {
    threads_.emplace_back([this, port, path, body] { Client(port, path, body); });
  }
}

void SimpleLoad::Client(int port, const std::string& path, const std::string& body) {
  HttpClient client(port);
  while (!stop_.load()) {
    const HttpResponse r = client.Post(path, body);
    if (r.status == 200) {
      ok_.fetch_add(1);
    } else {
      std::lock_guard lock(mu_);
      if (failed_++ == 0) first_failure_ = r.Describe();
    }
  }
}

void SimpleLoad::Stop() {
  stop_ = true;
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void SimpleLoad::WaitSucceeded(int64_t n) {
  const int64_t target = ok_.load() + n;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (ok_.load() < target) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "only " << ok_.load() << " of " << target << " requests succeeded in 60 s";
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

int64_t SimpleLoad::failed() {
  std::lock_guard lock(mu_);
  return failed_;
}

std::string SimpleLoad::first_failure() {
  std::lock_guard lock(mu_);
  return first_failure_;
}

void ServerTest::SetUp() {
  repo_ = std::make_unique<testing::TempRepository>(FASTPATH_TEST_MODELS_DIR);
  work_ = std::make_unique<testing::TempRepository>(FASTPATH_TEST_MODELS_DIR);
  for (const auto& model : Models()) CopyTestModel(repo_->root(), model);
  PrepareRepository(*repo_);
  server_ = std::make_unique<ServerProcess>(work_->root());
  ServeOptions options;
  options.repository = repo_->root();
  options.extra_args = ExtraArgs();
  options.environment = Environment();
  options.wait_ready = WaitReady();
  options.command_prefix = CommandPrefix();
  ASSERT_TRUE(server_->Start(options));
  http_ = std::make_unique<HttpClient>(server_->http_port());
  stub_ = MakeStub(server_->grpc_target());
}

void ServerTest::TearDown() {
  stub_.reset();
  http_.reset();
  if (server_ && server_->running() && !stopped_) {
    EXPECT_TRUE(server_->Stop());
  }
  server_.reset();
  work_.reset();
  repo_.reset();
}

void ServerTest::ExpectStillServing() {
  auto a = Iota(7, 16), b = Iota(-3, 16);
  HttpClient fresh(server_->http_port());
  HttpResponse r = fresh.Post("/v2/models/simple/infer", SimpleJsonRequest(a, b));
  ASSERT_EQ(r.status, 200) << r.Describe() << "\nlog:\n" << server_->LogTail();
  ExpectSimpleJsonResponse(r.body, a, b);
  grpc::ClientContext context;
  inference::ModelInferResponse response;
  grpc::Status status = stub_->ModelInfer(&context, SimpleGrpcRequest(a, b), &response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  ExpectSimpleGrpcResponse(response, a, b);
}

}  // namespace fastpath::integration
