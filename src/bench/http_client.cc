#include "fastpath/bench/client.h"

#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <cstring>
#include <ctime>

#include "fastpath/bench/measurement.h"
#include "grpc_service.grpc.pb.h"

namespace fastpath::bench {

StatusOr<Transport> ParseTransport(std::string_view text) {
  if (text == "http") return Transport::kHttp;
  if (text == "grpc") return Transport::kGrpc;
  return InvalidArgument("--protocol must be http or grpc, not '" + std::string(text) + "'");
}
StatusOr<Encoding> ParseEncoding(std::string_view text) {
  if (text == "json") return Encoding::kJson;
  if (text == "binary") return Encoding::kBinary;
  return InvalidArgument("--encoding must be json or binary, not '" + std::string(text) + "'");
}
const char* TransportName(Transport transport) { return transport == Transport::kGrpc ? "grpc" : "http"; }
const char* EncodingName(Encoding encoding) { return encoding == Encoding::kJson ? "json" : "binary"; }

StatusOr<ServerAddress> ParseAddress(std::string_view url, int default_port) {
  std::string_view rest = url;
  for (std::string_view scheme : {"http://", "grpc://"}) {
    if (rest.substr(0, scheme.size()) == scheme) rest.remove_prefix(scheme.size());
  }
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  ServerAddress address;
  address.port = default_port;
  std::string_view port_text;
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return InvalidArgument("--url '" + std::string(url) + "': unclosed '['");
    address.host = std::string(rest.substr(1, close - 1));
    rest.remove_prefix(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return InvalidArgument("--url '" + std::string(url) + "': expected ':port' after ']'");
      port_text = rest.substr(1);
    }
  } else {
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) {
      address.host = std::string(rest);
    } else {
      address.host = std::string(rest.substr(0, colon));
      port_text = rest.substr(colon + 1);
    }
  }
  if (address.host.empty()) return InvalidArgument("--url '" + std::string(url) + "' has no host");
  if (!port_text.empty() || rest.find(':') != std::string_view::npos) {
    int port = 0;
    auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (port_text.empty() || ec != std::errc() || ptr != port_text.data() + port_text.size() || port < 1 ||
        port > 65535) {
      return InvalidArgument("--url '" + std::string(url) + "': the port must be in [1, 65535]");
    }
    address.port = port;
  }
  return address;
}

StatusOr<std::pair<std::string, std::vector<int64_t>>> ParseShapeOverride(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) {
    return InvalidArgument("--shape must be NAME:D1,D2,... (e.g. image:3,224,224), not '" + std::string(text) + "'");
  }
  std::pair<std::string, std::vector<int64_t>> out;
  out.first = std::string(text.substr(0, colon));
  std::string_view dims = text.substr(colon + 1);
  size_t start = 0;
  while (start <= dims.size()) {
    size_t comma = dims.find(',', start);
    std::string_view part = dims.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    int64_t d = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), d);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || d < 1) {
      return InvalidArgument("--shape " + std::string(text) + ": '" + std::string(part) +
                             "' is not a positive dimension");
    }
    out.second.push_back(d);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

namespace {

constexpr int64_t kMaxRequestElements = int64_t{1} << 28;

void FillData(Tensor* t, int64_t count, uint64_t seed) {
  uint64_t state = seed;
  auto put = [&](const auto& v) {
    const char* p = reinterpret_cast<const char*>(&v);
    t->data.append(p, sizeof(v));
  };
  switch (t->dtype) {
    case DataType::kFp32:
      for (int64_t i = 0; i < count; ++i) put(static_cast<float>(UniformDouble(&state) * 2 - 1));
      break;
    case DataType::kFp64:
      for (int64_t i = 0; i < count; ++i) put(UniformDouble(&state) * 2 - 1);
      break;
    case DataType::kFp16:
      for (int64_t i = 0; i < count; ++i) put(uint16_t{0x3C00});
      break;
    case DataType::kBf16:
      for (int64_t i = 0; i < count; ++i) put(uint16_t{0x3F80});
      break;
    case DataType::kBool:
      for (int64_t i = 0; i < count; ++i) put(static_cast<uint8_t>(i % 2));
      break;
    case DataType::kBytes:
      for (int64_t i = 0; i < count; ++i) AppendBytesElement(&t->data, "fastpath-" + std::to_string(SplitMix64(&state) % 1000));
      break;
    default: {
      const size_t size = ElementSize(t->dtype);
      for (int64_t i = 0; i < count; ++i) {
        const uint64_t v = SplitMix64(&state) % 100;
        t->data.append(reinterpret_cast<const char*>(&v), size);  // little-endian low bytes
      }
    }
  }
}

std::string Truncate(std::string s, size_t n = 300) {
  if (s.size() > n) s = s.substr(0, n) + "...";
  return s;
}

// ---- JSON helpers ----

std::string JsonString(const rapidjson::Value& v, const char* key) {
  auto it = v.FindMember(key);
  return it != v.MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
}

uint64_t JsonU64(const rapidjson::Value& v, const char* key) {
  auto it = v.FindMember(key);
  if (it == v.MemberEnd()) return 0;
  if (it->value.IsUint64()) return it->value.GetUint64();
  if (it->value.IsString()) return std::strtoull(it->value.GetString(), nullptr, 10);
  return 0;
}

StatDuration JsonDuration(const rapidjson::Value& v, const char* key) {
  StatDuration d;
  auto it = v.FindMember(key);
  if (it == v.MemberEnd() || !it->value.IsObject()) return d;
  d.count = JsonU64(it->value, "count");
  d.ns = JsonU64(it->value, "ns");
  return d;
}

StatusOr<std::vector<backend::TensorSpec>> JsonTensorList(const rapidjson::Value& doc, const char* key) {
  std::vector<backend::TensorSpec> out;
  auto it = doc.FindMember(key);
  if (it == doc.MemberEnd() || !it->value.IsArray()) {
    return InvalidArgument(std::string("model metadata has no '") + key + "' array");
  }
  for (const auto& t : it->value.GetArray()) {
    if (!t.IsObject()) return InvalidArgument(std::string("model metadata: an entry of '") + key + "' is not an object");
    backend::TensorSpec spec;
    spec.name = JsonString(t, "name");
    const std::string dtype = JsonString(t, "datatype");
    auto parsed = ParseDataType(dtype);
    if (!parsed) return InvalidArgument("model metadata: tensor '" + spec.name + "' has datatype '" + dtype + "'");
    spec.dtype = *parsed;
    auto shape = t.FindMember("shape");
    if (shape != t.MemberEnd() && shape->value.IsArray()) {
      for (const auto& d : shape->value.GetArray()) {
        if (!d.IsInt64()) return InvalidArgument("model metadata: tensor '" + spec.name + "' has a non-integer dim");
        spec.dims.push_back(d.GetInt64());
      }
    }
    out.push_back(std::move(spec));
  }
  return out;
}

template <typename T, typename Fn>
void WriteArray(rapidjson::Writer<rapidjson::StringBuffer>& w, const std::string& data, Fn fn) {
  const size_t n = data.size() / sizeof(T);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, data.data() + i * sizeof(T), sizeof(T));
    fn(v);
  }
}

void WriteJsonData(rapidjson::Writer<rapidjson::StringBuffer>& w, const Tensor& t) {
  w.StartArray();
  switch (t.dtype) {
    case DataType::kFp32: WriteArray<float>(w, t.data, [&](float v) { w.Double(v); }); break;
    case DataType::kFp64: WriteArray<double>(w, t.data, [&](double v) { w.Double(v); }); break;
    case DataType::kBool: WriteArray<uint8_t>(w, t.data, [&](uint8_t v) { w.Bool(v != 0); }); break;
    case DataType::kInt8: WriteArray<int8_t>(w, t.data, [&](int8_t v) { w.Int(v); }); break;
    case DataType::kInt16: WriteArray<int16_t>(w, t.data, [&](int16_t v) { w.Int(v); }); break;
    case DataType::kInt32: WriteArray<int32_t>(w, t.data, [&](int32_t v) { w.Int(v); }); break;
    case DataType::kInt64: WriteArray<int64_t>(w, t.data, [&](int64_t v) { w.Int64(v); }); break;
    case DataType::kUint8: WriteArray<uint8_t>(w, t.data, [&](uint8_t v) { w.Uint(v); }); break;
    case DataType::kUint16: WriteArray<uint16_t>(w, t.data, [&](uint16_t v) { w.Uint(v); }); break;
    case DataType::kUint32: WriteArray<uint32_t>(w, t.data, [&](uint32_t v) { w.Uint(v); }); break;
    case DataType::kUint64: WriteArray<uint64_t>(w, t.data, [&](uint64_t v) { w.Uint64(v); }); break;
    case DataType::kBytes: {
      size_t pos = 0;
      while (pos + 4 <= t.data.size()) {
        uint32_t len;
        std::memcpy(&len, t.data.data() + pos, 4);
        w.String(t.data.data() + pos + 4, len);
        pos += 4 + len;
      }
      break;
    }
    default:  // FP16/BF16 have no JSON form; the binary encoding carries them.
      break;
  }
  w.EndArray();
}

// ---- HTTP ----

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct HttpRequestBody {
  std::string body;
  size_t json_length = 0;  // binary: the Inference-Header-Content-Length
};

class HttpConnection {
 public:
  HttpConnection(const tcp::resolver::results_type& endpoints, std::string host_header)
      : endpoints_(endpoints), host_header_(std::move(host_header)), socket_(io_) {}

  // Sends one request and reads the whole response; reconnects when needed.
  InferOutcome Exchange(http::verb verb, const std::string& target, const std::string* body,
                        size_t json_length, int* status, std::string* response_body) {
    if (!socket_.is_open()) {
      beast::error_code ec;
      asio::connect(socket_, endpoints_, ec);
      if (ec) {
        socket_.close(ec);
        return {false, "connect", "cannot connect to " + host_header_ + ": " + ec.message()};
      }
      socket_.set_option(tcp::no_delay(true), ec);
    }
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, host_header_);
    req.keep_alive(true);
    if (body != nullptr) {
      req.body() = *body;
      if (json_length > 0) {
        req.set(http::field::content_type, "application/octet-stream");
        req.set("Inference-Header-Content-Length", std::to_string(json_length));
      } else {
        req.set(http::field::content_type, "application/json");
      }
      req.prepare_payload();
    }
    beast::error_code ec;
    http::write(socket_, req, ec);
    if (ec) {
      socket_.close(ec);
      return {false, "io", "writing the request: " + ec.message()};
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(uint64_t{4} << 30);
    http::read(socket_, buffer_, parser, ec);
    if (ec) {
      beast::error_code ignored;
      socket_.close(ignored);
      buffer_.clear();
      return {false, "io", "reading the response: " + ec.message()};
    }
    auto& res = parser.get();
    *status = static_cast<int>(res.result_int());
    if (response_body != nullptr) *response_body = std::move(res.body());
    if (!res.keep_alive()) {
      socket_.close(ec);
      buffer_.clear();
    }
    return {};
  }

 private:
  tcp::resolver::results_type endpoints_;
  std::string host_header_;
  asio::io_context io_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
};

class HttpSession : public InferSession {
 public:
  HttpSession(const tcp::resolver::results_type& endpoints, std::string host_header, std::string target,
              std::shared_ptr<const std::vector<HttpRequestBody>> requests)
      : connection_(endpoints, std::move(host_header)), target_(std::move(target)), requests_(std::move(requests)) {}

  InferOutcome Infer(size_t index) override {
    const HttpRequestBody& r = (*requests_)[index % requests_->size()];
    int status = 0;
    std::string body;
    InferOutcome outcome = connection_.Exchange(http::verb::post, target_, &r.body, r.json_length, &status, &body);
    if (!outcome.ok) return outcome;
    if (status != 200) return {false, "http_" + std::to_string(status), Truncate(body)};
    return {};
  }

 private:
  HttpConnection connection_;
  std::string target_;
  std::shared_ptr<const std::vector<HttpRequestBody>> requests_;
};

class HttpTarget : public Target {
 public:
  HttpTarget(ServerAddress address, Encoding encoding, std::string model, std::string version)
      : address_(std::move(address)), encoding_(encoding), model_(std::move(model)), version_(std::move(version)) {}

  Status Resolve() {
    try {
      asio::io_context io;
      tcp::resolver resolver(io);
      beast::error_code ec;
      endpoints_ = resolver.resolve(address_.host, std::to_string(address_.port), ec);
      if (ec) return Unavailable("cannot resolve " + address_.host + ": " + ec.message());
    } catch (const std::exception& e) {
      return Unavailable(std::string("cannot resolve ") + address_.host + ": " + e.what());
    }
    host_header_ = address_.host + ":" + std::to_string(address_.port);
    control_ = std::make_unique<HttpConnection>(endpoints_, host_header_);
    return Status::Ok();
  }

  std::string ModelPath() const {
    return "/v2/models/" + model_ + (version_.empty() ? "" : "/versions/" + version_);
  }

  StatusOr<std::string> Get(const std::string& path, int* status) {
    std::string body;
    InferOutcome o = control_->Exchange(http::verb::get, path, nullptr, 0, status, &body);
    if (!o.ok) return Unavailable("server at " + Describe() + " is unreachable: " + o.message);
    return body;
  }

  StatusOr<ModelMetadata> Metadata() override {
    int status = 0;
    FASTPATH_ASSIGN_OR_RETURN(std::string body, Get(ModelPath(), &status));
    if (status == 404) {
      return NotFound("model '" + model_ + "'" + (version_.empty() ? "" : " version " + version_) +
                      " is not known to the server at " + Describe() + ": " + Truncate(body));
    }
    if (status != 200) {
      return Unavailable("GET " + ModelPath() + " answered " + std::to_string(status) + ": " + Truncate(body));
    }
    rapidjson::Document doc;
    doc.Parse(body.data(), body.size());
    if (doc.HasParseError() || !doc.IsObject()) return Internal("GET " + ModelPath() + " did not return a JSON object");
    ModelMetadata m;
    m.name = JsonString(doc, "name");
    if (auto it = doc.FindMember("versions"); it != doc.MemberEnd() && it->value.IsArray()) {
      for (const auto& v : it->value.GetArray()) {
        if (v.IsString()) m.versions.push_back(v.GetString());
      }
    }
    FASTPATH_ASSIGN_OR_RETURN(m.inputs, JsonTensorList(doc, "inputs"));
    FASTPATH_ASSIGN_OR_RETURN(m.outputs, JsonTensorList(doc, "outputs"));
    metadata_ = m;
    return m;
  }

  StatusOr<std::optional<ModelStatsSnapshot>> Stats() override {
    int status = 0;
    FASTPATH_ASSIGN_OR_RETURN(std::string body, Get(ModelPath() + "/stats", &status));
    if (status == 404 || status == 405 || status == 501) return std::optional<ModelStatsSnapshot>();
    if (status != 200) return Unavailable("GET " + ModelPath() + "/stats answered " + std::to_string(status));
    rapidjson::Document doc;
    doc.Parse(body.data(), body.size());
    if (doc.HasParseError() || !doc.IsObject()) return std::optional<ModelStatsSnapshot>();
    auto stats = doc.FindMember("model_stats");
    if (stats == doc.MemberEnd() || !stats->value.IsArray() || stats->value.Empty()) {
      return std::optional<ModelStatsSnapshot>();
    }
    // Several versions: add them up (a version policy serving more than one).
    ModelStatsSnapshot s;
    for (const auto& m : stats->value.GetArray()) {
      if (!m.IsObject()) continue;
      s.inference_count += JsonU64(m, "inference_count");
      s.execution_count += JsonU64(m, "execution_count");
      auto is = m.FindMember("inference_stats");
      if (is != m.MemberEnd() && is->value.IsObject()) {
        auto add = [&](StatDuration* d, const char* key) {
          StatDuration v = JsonDuration(is->value, key);
          d->count += v.count;
          d->ns += v.ns;
        };
        add(&s.success, "success");
        add(&s.fail, "fail");
        add(&s.queue, "queue");
        add(&s.compute_input, "compute_input");
        add(&s.compute_infer, "compute_infer");
        add(&s.compute_output, "compute_output");
      }
      auto bs = m.FindMember("batch_stats");
      if (bs != m.MemberEnd() && bs->value.IsArray()) {
        for (const auto& b : bs->value.GetArray()) {
          if (!b.IsObject()) continue;
          s.batch_executions[JsonU64(b, "batch_size")] += JsonDuration(b, "compute_infer").count;
        }
      }
    }
    return std::optional<ModelStatsSnapshot>(s);
  }

  Status Prepare(const std::vector<std::vector<Tensor>>& requests) override {
    auto prepared = std::make_shared<std::vector<HttpRequestBody>>();
    for (size_t i = 0; i < requests.size(); ++i) {
      rapidjson::StringBuffer buffer;
      rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
      std::string blobs;
      w.StartObject();
      w.Key("id");
      const std::string id = "bench-" + std::to_string(i);
      w.String(id.c_str());
      w.Key("inputs");
      w.StartArray();
      for (const Tensor& t : requests[i]) {
        if (encoding_ == Encoding::kJson && (t.dtype == DataType::kFp16 || t.dtype == DataType::kBf16)) {
          return InvalidArgument("input '" + t.name + "' is " + std::string(DataTypeName(t.dtype)) +
                                 ", which has no JSON form: use --encoding binary");
        }
        w.StartObject();
        w.Key("name");
        w.String(t.name.c_str());
        w.Key("shape");
        w.StartArray();
        for (int64_t d : t.shape) w.Int64(d);
        w.EndArray();
        w.Key("datatype");
        w.String(std::string(DataTypeName(t.dtype)).c_str());
        if (encoding_ == Encoding::kBinary) {
          w.Key("parameters");
          w.StartObject();
          w.Key("binary_data_size");
          w.Uint64(t.data.size());
          w.EndObject();
          blobs += t.data;
        } else {
          w.Key("data");
          WriteJsonData(w, t);
        }
        w.EndObject();
      }
      w.EndArray();
      w.Key("outputs");
      w.StartArray();
      for (const auto& o : metadata_.outputs) {
        w.StartObject();
        w.Key("name");
        w.String(o.name.c_str());
        if (encoding_ == Encoding::kBinary) {
          w.Key("parameters");
          w.StartObject();
          w.Key("binary_data");
          w.Bool(true);
          w.EndObject();
        }
        w.EndObject();
      }
      w.EndArray();
      w.EndObject();
      HttpRequestBody body;
      body.body.assign(buffer.GetString(), buffer.GetSize());
      if (encoding_ == Encoding::kBinary) {
        body.json_length = body.body.size();
        body.body += blobs;
      }
      prepared->push_back(std::move(body));
    }
    if (prepared->empty()) return InvalidArgument("no requests to prepare");
    requests_ = std::move(prepared);
    return Status::Ok();
  }

  StatusOr<std::unique_ptr<InferSession>> NewSession() override {
    if (!requests_) return FailedPrecondition("Prepare was not called");
    return std::unique_ptr<InferSession>(
        std::make_unique<HttpSession>(endpoints_, host_header_, ModelPath() + "/infer", requests_));
  }

  std::string Describe() const override { return "http://" + address_.host + ":" + std::to_string(address_.port); }

 private:
  ServerAddress address_;
  Encoding encoding_;
  std::string model_;
  std::string version_;
  tcp::resolver::results_type endpoints_;
  std::string host_header_;
  std::unique_ptr<HttpConnection> control_;
  ModelMetadata metadata_;
  std::shared_ptr<const std::vector<HttpRequestBody>> requests_;
};

// ---- gRPC ----

const char* GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target, int index) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // A distinct argument per worker gives each its own connection (subchannel), as each
  // HTTP worker has its own keep-alive connection.
  args.SetInt("fastpath.bench.worker", index);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

class GrpcSession : public InferSession {
 public:
  GrpcSession(std::shared_ptr<grpc::Channel> channel,
              std::shared_ptr<const std::vector<inference::ModelInferRequest>> requests)
      : stub_(inference::GRPCInferenceService::NewStub(channel)), requests_(std::move(requests)) {}

  InferOutcome Infer(size_t index) override {
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    grpc::Status status = stub_->ModelInfer(&context, (*requests_)[index % requests_->size()], &response);
    if (!status.ok()) {
      return {false, std::string("grpc_") + GrpcCodeName(status.error_code()), Truncate(status.error_message())};
    }
    return {};
  }

 private:
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  std::shared_ptr<const std::vector<inference::ModelInferRequest>> requests_;
};

class GrpcTarget : public Target {
 public:
  GrpcTarget(ServerAddress address, std::string model, std::string version)
      : address_(std::move(address)), model_(std::move(model)), version_(std::move(version)) {
    target_ = (address_.host.find(':') != std::string::npos ? "[" + address_.host + "]" : address_.host) + ":" +
              std::to_string(address_.port);
    control_ = inference::GRPCInferenceService::NewStub(MakeChannel(target_, -1));
  }

  StatusOr<ModelMetadata> Metadata() override {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    inference::ModelMetadataRequest request;
    request.set_name(model_);
    request.set_version(version_);
    inference::ModelMetadataResponse response;
    grpc::Status status = control_->ModelMetadata(&context, request, &response);
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
      return NotFound("model '" + model_ + "' is not known to the server at " + Describe() + ": " +
                      status.error_message());
    }
    if (!status.ok()) {
      return Unavailable("server at " + Describe() + ": ModelMetadata failed with " +
                         GrpcCodeName(status.error_code()) + ": " + status.error_message());
    }
    ModelMetadata m;
    m.name = response.name();
    m.versions.assign(response.versions().begin(), response.versions().end());
    auto convert = [](const auto& list, std::vector<backend::TensorSpec>* out) -> Status {
      for (const auto& t : list) {
        backend::TensorSpec spec;
        spec.name = t.name();
        auto dtype = ParseDataType(t.datatype());
        if (!dtype) return InvalidArgument("model metadata: tensor '" + t.name() + "' has datatype '" + t.datatype() + "'");
        spec.dtype = *dtype;
        spec.dims.assign(t.shape().begin(), t.shape().end());
        out->push_back(std::move(spec));
      }
      return Status::Ok();
    };
    FASTPATH_RETURN_IF_ERROR(convert(response.inputs(), &m.inputs));
    FASTPATH_RETURN_IF_ERROR(convert(response.outputs(), &m.outputs));
    metadata_ = m;
    return m;
  }

  StatusOr<std::optional<ModelStatsSnapshot>> Stats() override {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    inference::ModelStatisticsRequest request;
    request.set_name(model_);
    request.set_version(version_);
    inference::ModelStatisticsResponse response;
    grpc::Status status = control_->ModelStatistics(&context, request, &response);
    if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED || status.error_code() == grpc::StatusCode::NOT_FOUND) {
      return std::optional<ModelStatsSnapshot>();
    }
    if (!status.ok()) return Unavailable("ModelStatistics failed: " + status.error_message());
    ModelStatsSnapshot s;
    for (const auto& m : response.model_stats()) {
      s.inference_count += m.inference_count();
      s.execution_count += m.execution_count();
      const auto& is = m.inference_stats();
      auto add = [](StatDuration* d, const inference::StatisticDuration& v) {
        d->count += v.count();
        d->ns += v.ns();
      };
      add(&s.success, is.success());
      add(&s.fail, is.fail());
      add(&s.queue, is.queue());
      add(&s.compute_input, is.compute_input());
      add(&s.compute_infer, is.compute_infer());
      add(&s.compute_output, is.compute_output());
      for (const auto& b : m.batch_stats()) s.batch_executions[b.batch_size()] += b.compute_infer().count();
    }
    return std::optional<ModelStatsSnapshot>(s);
  }

  Status Prepare(const std::vector<std::vector<Tensor>>& requests) override {
    auto prepared = std::make_shared<std::vector<inference::ModelInferRequest>>();
    for (size_t i = 0; i < requests.size(); ++i) {
      inference::ModelInferRequest r;
      r.set_model_name(model_);
      r.set_model_version(version_);
      r.set_id("bench-" + std::to_string(i));
      for (const Tensor& t : requests[i]) {
        auto* in = r.add_inputs();
        in->set_name(t.name);
        in->set_datatype(std::string(DataTypeName(t.dtype)));
        for (int64_t d : t.shape) in->add_shape(d);
        r.add_raw_input_contents(t.data);
      }
      for (const auto& o : metadata_.outputs) r.add_outputs()->set_name(o.name);
      prepared->push_back(std::move(r));
    }
    if (prepared->empty()) return InvalidArgument("no requests to prepare");
    requests_ = std::move(prepared);
    return Status::Ok();
  }

  StatusOr<std::unique_ptr<InferSession>> NewSession() override {
    if (!requests_) return FailedPrecondition("Prepare was not called");
    return std::unique_ptr<InferSession>(std::make_unique<GrpcSession>(MakeChannel(target_, next_++), requests_));
  }

  std::string Describe() const override { return "grpc://" + target_; }

 private:
  ServerAddress address_;
  std::string model_;
  std::string version_;
  std::string target_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> control_;
  ModelMetadata metadata_;
  std::shared_ptr<const std::vector<inference::ModelInferRequest>> requests_;
  std::atomic<int> next_{0};
};

// ---- In-process ----

class InProcessSession : public InferSession {
 public:
  InProcessSession(std::unique_ptr<backend::ModelInstance> instance,
                   std::shared_ptr<const std::vector<std::vector<Tensor>>> requests, std::vector<std::string> outputs)
      : instance_(std::move(instance)), requests_(std::move(requests)), outputs_(std::move(outputs)) {}

  InferOutcome Infer(size_t index) override {
    auto result = instance_->Run((*requests_)[index % requests_->size()], outputs_);
    if (!result.ok()) {
      cpu_mark_ns_ = -1;  // the span no longer holds only successful runs
      return {false, std::string("ort_") + StatusCodeName(result.status().code()), result.status().message()};
    }
    InferOutcome outcome;
    if (measure_cpu_ && ++runs_since_mark_ >= kCpuSpan) {
      const int64_t now = ThreadCpuNs();
      if (cpu_mark_ns_ >= 0 && now > cpu_mark_ns_) {
        outcome.cpu_ns = now - cpu_mark_ns_;
        outcome.cpu_runs = runs_since_mark_;
      }
      cpu_mark_ns_ = now;
      runs_since_mark_ = 0;
    }
    return outcome;
  }

  // With one intra-op and one inter-op thread ORT runs on the calling thread, so its CPU
  // time is the run's compute time whatever else the machine is doing.
  void set_measure_cpu(bool on) { measure_cpu_ = on; }

 private:
  static int64_t ThreadCpuNs() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  }
  static constexpr uint64_t kCpuSpan = 16;
  bool measure_cpu_ = false;
  int64_t cpu_mark_ns_ = -1;
  uint64_t runs_since_mark_ = 0;
  std::unique_ptr<backend::ModelInstance> instance_;
  std::shared_ptr<const std::vector<std::vector<Tensor>>> requests_;
  std::vector<std::string> outputs_;
};

class InProcessTarget : public Target {
 public:
  InProcessTarget(std::shared_ptr<backend::Backend> backend, std::filesystem::path model_file,
                  backend::InstanceOptions options)
      : backend_(std::move(backend)), model_file_(std::move(model_file)), options_(std::move(options)) {}

  StatusOr<ModelMetadata> Metadata() override {
    FASTPATH_ASSIGN_OR_RETURN(backend::ModelSignature signature, backend_->Inspect(model_file_));
    ModelMetadata m;
    m.name = model_file_.parent_path().parent_path().filename().string();
    m.inputs = signature.inputs;
    m.outputs = signature.outputs;
    outputs_.clear();
    for (const auto& o : m.outputs) outputs_.push_back(o.name);
    return m;
  }
  StatusOr<std::optional<ModelStatsSnapshot>> Stats() override { return std::optional<ModelStatsSnapshot>(); }
  Status Prepare(const std::vector<std::vector<Tensor>>& requests) override {
    requests_ = std::make_shared<const std::vector<std::vector<Tensor>>>(requests);
    return Status::Ok();
  }
  StatusOr<std::unique_ptr<InferSession>> NewSession() override {
    if (!requests_) return FailedPrecondition("Prepare was not called");
    FASTPATH_ASSIGN_OR_RETURN(auto instance, backend_->CreateInstance(model_file_, options_));
    auto session = std::make_unique<InProcessSession>(std::move(instance), requests_, outputs_);
    session->set_measure_cpu(options_.intra_op_threads == 1 && options_.inter_op_threads == 1);
    return std::unique_ptr<InferSession>(std::move(session));
  }
  std::string Describe() const override { return "in-process " + model_file_.string(); }

 private:
  std::shared_ptr<backend::Backend> backend_;
  std::filesystem::path model_file_;
  backend::InstanceOptions options_;
  std::vector<std::string> outputs_;
  std::shared_ptr<const std::vector<std::vector<Tensor>>> requests_;
};

}  // namespace

StatusOr<std::unique_ptr<Target>> MakeHttpTarget(const ServerAddress& address, Encoding encoding,
                                                 const std::string& model, const std::string& version) {
  auto target = std::make_unique<HttpTarget>(address, encoding, model, version);
  FASTPATH_RETURN_IF_ERROR(target->Resolve());
  return std::unique_ptr<Target>(std::move(target));
}

StatusOr<std::unique_ptr<Target>> MakeGrpcTarget(const ServerAddress& address, const std::string& model,
                                                 const std::string& version) {
  return std::unique_ptr<Target>(std::make_unique<GrpcTarget>(address, model, version));
}

StatusOr<std::unique_ptr<Target>> MakeInProcessTarget(std::shared_ptr<backend::Backend> backend,
                                                      const std::filesystem::path& model_file,
                                                      const backend::InstanceOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(model_file, ec)) {
    return NotFound("model file " + model_file.string() + " does not exist");
  }
  return std::unique_ptr<Target>(std::make_unique<InProcessTarget>(std::move(backend), model_file, options));
}

StatusOr<std::vector<Tensor>> MakeInputs(const ModelMetadata& metadata,
                                         const std::map<std::string, std::vector<int64_t>>& shapes,
                                         int64_t batch_size, uint64_t seed, uint64_t request_index) {
  for (const auto& [name, dims] : shapes) {
    bool found = false;
    for (const auto& in : metadata.inputs) found = found || in.name == name;
    if (!found) {
      std::string names;
      for (const auto& in : metadata.inputs) names += (names.empty() ? "" : ", ") + in.name;
      return InvalidArgument("--shape names input '" + name + "', which the model does not have (inputs: " + names + ")");
    }
  }
  std::vector<Tensor> out;
  uint64_t position = 0;
  for (const auto& in : metadata.inputs) {
    Tensor t;
    t.name = in.name;
    t.dtype = in.dtype;
    t.shape = in.dims;
    const bool batched = !t.shape.empty() && t.shape[0] == -1;
    if (auto it = shapes.find(in.name); it != shapes.end()) {
      if (it->second.size() == in.dims.size()) {
        t.shape = it->second;
        if (batched) t.shape[0] = batch_size;
      } else if (batched && it->second.size() + 1 == in.dims.size()) {
        t.shape = {batch_size};
        t.shape.insert(t.shape.end(), it->second.begin(), it->second.end());
      } else {
        return InvalidArgument("--shape " + in.name + ": the model's shape is " + ShapeToString(in.dims) +
                               ", so give " + std::to_string(in.dims.size()) + " dims" +
                               (batched ? " (or " + std::to_string(in.dims.size() - 1) + " without the batch dim)" : ""));
      }
      for (size_t i = 0; i < in.dims.size() && i < t.shape.size(); ++i) {
        if (in.dims[i] >= 0 && t.shape[i] != in.dims[i] && !(batched && i == 0)) {
          return InvalidArgument("--shape " + in.name + ": dim " + std::to_string(i) + " is fixed at " +
                                 std::to_string(in.dims[i]) + " by the model, not " + std::to_string(t.shape[i]));
        }
      }
    } else if (batched) {
      t.shape[0] = batch_size;
    }
    for (int64_t d : t.shape) {
      if (d < 0) {
        return InvalidArgument("input '" + in.name + "' has shape " + ShapeToString(in.dims) +
                               " with a dynamic dim besides the batch: give it with --shape " + in.name + ":D1,D2,...");
      }
    }
    FASTPATH_ASSIGN_OR_RETURN(int64_t count, ElementCount(t.shape, kMaxRequestElements));
    // Each (seed, request, input) has its own stream.
    uint64_t stream = seed;
    SplitMix64(&stream);
    stream ^= (request_index + 1) * 0x9e3779b97f4a7c15ULL + (position++ << 32);
    FillData(&t, count, stream);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace fastpath::bench
