// The HTTP target: KServe v2 over HTTP/1.1 keep-alive connections (Boost.Beast), with the
// request bodies in JSON or in the binary tensor extension, prepared before any timing.
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstdlib>
#include <cstring>

#include "client_internal.h"
#include "fastpath/bench/client.h"
#include "fastpath/bench/http_once.h"

namespace fastpath::bench {
namespace {

using internal::Truncate;

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

StatusOr<std::vector<backend::TensorSpec>> JsonTensorList(const rapidjson::Value& doc,
                                                          const char* key) {
  std::vector<backend::TensorSpec> out;
  auto it = doc.FindMember(key);
  if (it == doc.MemberEnd() || !it->value.IsArray()) {
    return InvalidArgument(std::string("model metadata has no '") + key + "' array");
  }
  for (const auto& t : it->value.GetArray()) {
    if (!t.IsObject())
      return InvalidArgument(std::string("model metadata: an entry of '") + key +
                             "' is not an object");
    backend::TensorSpec spec;
    spec.name = JsonString(t, "name");
    const std::string dtype = JsonString(t, "datatype");
    auto parsed = ParseDataType(dtype);
    if (!parsed)
      return InvalidArgument("model metadata: tensor '" + spec.name + "' has datatype '" + dtype +
                             "'");
    spec.dtype = *parsed;
    auto shape = t.FindMember("shape");
    if (shape != t.MemberEnd() && shape->value.IsArray()) {
      for (const auto& d : shape->value.GetArray()) {
        if (!d.IsInt64())
          return InvalidArgument("model metadata: tensor '" + spec.name +
                                 "' has a non-integer dim");
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
    case DataType::kFp32:
      WriteArray<float>(w, t.data, [&](float v) { w.Double(v); });
      break;
    case DataType::kFp64:
      WriteArray<double>(w, t.data, [&](double v) { w.Double(v); });
      break;
    case DataType::kBool:
      WriteArray<uint8_t>(w, t.data, [&](uint8_t v) { w.Bool(v != 0); });
      break;
    case DataType::kInt8:
      WriteArray<int8_t>(w, t.data, [&](int8_t v) { w.Int(v); });
      break;
    case DataType::kInt16:
      WriteArray<int16_t>(w, t.data, [&](int16_t v) { w.Int(v); });
      break;
    case DataType::kInt32:
      WriteArray<int32_t>(w, t.data, [&](int32_t v) { w.Int(v); });
      break;
    case DataType::kInt64:
      WriteArray<int64_t>(w, t.data, [&](int64_t v) { w.Int64(v); });
      break;
    case DataType::kUint8:
      WriteArray<uint8_t>(w, t.data, [&](uint8_t v) { w.Uint(v); });
      break;
    case DataType::kUint16:
      WriteArray<uint16_t>(w, t.data, [&](uint16_t v) { w.Uint(v); });
      break;
    case DataType::kUint32:
      WriteArray<uint32_t>(w, t.data, [&](uint32_t v) { w.Uint(v); });
      break;
    case DataType::kUint64:
      WriteArray<uint64_t>(w, t.data, [&](uint64_t v) { w.Uint64(v); });
      break;
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

using internal::InferBody;

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
        std::string why = ec.message();  // before close() reuses ec
        socket_.close(ec);
        return {false, "connect", "cannot connect to " + host_header_ + ": " + why};
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
  HttpSession(const tcp::resolver::results_type& endpoints, std::string host_header,
              std::string target, std::shared_ptr<const std::vector<InferBody>> requests)
      : connection_(endpoints, std::move(host_header)),
        target_(std::move(target)),
        requests_(std::move(requests)) {}

  InferOutcome Infer(size_t index) override {
    const InferBody& r = (*requests_)[index % requests_->size()];
    int status = 0;
    std::string body;
    InferOutcome outcome =
        connection_.Exchange(http::verb::post, target_, &r.body, r.json_length, &status, &body);
    if (!outcome.ok) return outcome;
    if (status != 200) return {false, "http_" + std::to_string(status), Truncate(body)};
    return {};
  }

 private:
  HttpConnection connection_;
  std::string target_;
  std::shared_ptr<const std::vector<InferBody>> requests_;
};

class HttpTarget : public Target {
 public:
  HttpTarget(ServerAddress address, Encoding encoding, std::string model, std::string version)
      : address_(std::move(address)),
        encoding_(encoding),
        model_(std::move(model)),
        version_(std::move(version)) {}

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
      return Unavailable("GET " + ModelPath() + " answered " + std::to_string(status) + ": " +
                         Truncate(body));
    }
    rapidjson::Document doc;
    doc.Parse(body.data(), body.size());
    if (doc.HasParseError() || !doc.IsObject())
      return Internal("GET " + ModelPath() + " did not return a JSON object");
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
    if (status != 200)
      return Unavailable("GET " + ModelPath() + "/stats answered " + std::to_string(status));
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
    std::vector<std::string> outputs;
    for (const auto& o : metadata_.outputs) outputs.push_back(o.name);
    auto prepared = std::make_shared<std::vector<InferBody>>();
    for (size_t i = 0; i < requests.size(); ++i) {
      FASTPATH_ASSIGN_OR_RETURN(
          InferBody body,
          internal::EncodeInferBody("bench-" + std::to_string(i), requests[i], outputs, encoding_));
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

  std::string Describe() const override { return DescribeServer(address_); }

 private:
  ServerAddress address_;
  Encoding encoding_;
  std::string model_;
  std::string version_;
  tcp::resolver::results_type endpoints_;
  std::string host_header_;
  std::unique_ptr<HttpConnection> control_;
  ModelMetadata metadata_;
  std::shared_ptr<const std::vector<InferBody>> requests_;
};

}  // namespace

namespace internal {

StatusOr<InferBody> EncodeInferBody(const std::string& id, const std::vector<Tensor>& inputs,
                                    const std::vector<std::string>& outputs, Encoding encoding) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  std::string blobs;
  w.StartObject();
  w.Key("id");
  w.String(id.c_str());
  w.Key("inputs");
  w.StartArray();
  for (const Tensor& t : inputs) {
    if (encoding == Encoding::kJson && (t.dtype == DataType::kFp16 || t.dtype == DataType::kBf16)) {
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
    if (encoding == Encoding::kBinary) {
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
  for (const std::string& name : outputs) {
    w.StartObject();
    w.Key("name");
    w.String(name.c_str());
    if (encoding == Encoding::kBinary) {
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
  InferBody body;
  body.body.assign(buffer.GetString(), buffer.GetSize());
  if (encoding == Encoding::kBinary) {
    body.json_length = body.body.size();
    body.body += blobs;
  }
  return body;
}

}  // namespace internal

StatusOr<std::unique_ptr<Target>> MakeHttpTarget(const ServerAddress& address, Encoding encoding,
                                                 const std::string& model,
                                                 const std::string& version) {
  auto target = std::make_unique<HttpTarget>(address, encoding, model, version);
  FASTPATH_RETURN_IF_ERROR(target->Resolve());
  return std::unique_ptr<Target>(std::move(target));
}

}  // namespace fastpath::bench
