// The HTTP target: KServe v2 over HTTP/1.1 keep-alive connections (Boost.Beast), with the
// requests in JSON or in the binary tensor extension, encoded whole (head and body) before any
// timing. At a fixed concurrency, one thread drives every connection on one io_context
// (HttpClosedLoop) instead of a thread per session.
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>

#include "client_internal.h"
#include "fastpath/bench/client.h"
#include "fastpath/bench/http_once.h"
#include "fastpath/common/json.h"

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

// A request as it goes on the wire, head and body, encoded once in Prepare: each send is one
// write of these bytes, as wrk sends its request, with no per-request header building and no
// copy of the body (49 KB for cnn_classifier) into a Beast message.
std::string WireRequest(const std::string& target, const std::string& host_header,
                        const InferBody& r) {
  std::string wire = "POST " + target + " HTTP/1.1\r\nHost: " + host_header + "\r\n";
  if (r.json_length > 0) {
    wire += "Content-Type: application/octet-stream\r\nInference-Header-Content-Length: " +
            std::to_string(r.json_length) + "\r\n";
  } else {
    wire += "Content-Type: application/json\r\n";
  }
  wire += "Content-Length: " + std::to_string(r.body.size()) + "\r\n\r\n";
  return wire + r.body;
}

using ResponseParser = http::response_parser<http::string_body>;

void PrepareParser(std::optional<ResponseParser>& parser) {
  parser.emplace();
  parser->body_limit(uint64_t{4} << 30);
}

// What an inference answer came back as: ok on 200, else the status and the server's text.
InferOutcome InferAnswer(int status, const std::string& body) {
  if (status == 200) return {};
  return {false, "http_" + std::to_string(status), Truncate(body)};
}

class HttpConnection {
 public:
  HttpConnection(const tcp::resolver::results_type& endpoints, std::string host_header)
      : endpoints_(endpoints), host_header_(std::move(host_header)), socket_(io_) {}

  // A control request (no body): sends it and reads the whole response.
  InferOutcome Exchange(http::verb verb, const std::string& target, int* status,
                        std::string* response_body) {
    if (InferOutcome o = Connect(); !o.ok) return o;
    http::request<http::empty_body> req{verb, target, 11};
    req.set(http::field::host, host_header_);
    req.keep_alive(true);
    const beast::error_code ec = WithDeadline(
        kControlDeadline, [&](auto done) { http::async_write(socket_, req, std::move(done)); });
    if (ec) return Failed("writing the request", ec);
    return Read(kControlDeadline, status, response_body);
  }

  // Sends a prepared request (WireRequest) and reads the whole response.
  InferOutcome Send(const std::string& wire, int* status, std::string* response_body) {
    if (InferOutcome o = Connect(); !o.ok) return o;
    const beast::error_code ec = WithDeadline(kInferDeadline, [&](auto done) {
      asio::async_write(socket_, asio::buffer(wire), std::move(done));
    });
    if (ec) return Failed("writing the request", ec);
    return Read(kInferDeadline, status, response_body);
  }

 private:
  // Connects when needed.
  InferOutcome Connect() {
    if (socket_.is_open()) return {};
    beast::error_code ec;
    asio::connect(socket_, endpoints_, ec);
    if (ec) {
      std::string why = ec.message();  // before close() reuses ec
      socket_.close(ec);
      return {false, "connect", "cannot connect to " + host_header_ + ": " + why};
    }
    socket_.set_option(tcp::no_delay(true), ec);
    return {};
  }

  // A server that stops answering must not hold bench forever: each write and read of an
  // inference gets this long, and of a control request (metadata, statistics) as long as
  // gRPC's control calls; then it fails as a timeout (an "io" error naming it).
  static constexpr auto kInferDeadline = std::chrono::seconds(60);
  static constexpr auto kControlDeadline = std::chrono::seconds(10);

  // Starts an asynchronous operation on socket_ (`start` gets its completion handler) and
  // runs it on this connection's own io_context for at most `deadline`.
  template <typename Start>
  beast::error_code WithDeadline(std::chrono::seconds deadline, Start start) {
    std::optional<beast::error_code> result;
    start([&result](beast::error_code ec, std::size_t) { result = ec; });
    io_.restart();
    io_.run_for(deadline);
    if (result) return *result;
    beast::error_code ignored;
    socket_.cancel(ignored);  // the handler runs with operation_aborted
    io_.restart();
    io_.run();
    return asio::error::timed_out;
  }

  InferOutcome Read(std::chrono::seconds deadline, int* status, std::string* response_body) {
    PrepareParser(parser_);
    const beast::error_code ec = WithDeadline(deadline, [&](auto done) {
      http::async_read(socket_, buffer_, *parser_, std::move(done));
    });
    if (ec) return Failed("reading the response", ec);
    auto& res = parser_->get();
    *status = static_cast<int>(res.result_int());
    if (response_body != nullptr) *response_body = std::move(res.body());
    if (!res.keep_alive()) Close();
    return {};
  }

  InferOutcome Failed(const char* doing, const beast::error_code& ec) {
    InferOutcome o{false, "io", std::string(doing) + ": " + ec.message()};
    Close();
    return o;
  }

  void Close() {
    beast::error_code ignored;
    socket_.close(ignored);
    buffer_.clear();
  }

  tcp::resolver::results_type endpoints_;
  std::string host_header_;
  asio::io_context io_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
  std::optional<ResponseParser> parser_;
};

class HttpSession : public InferSession {
 public:
  HttpSession(const tcp::resolver::results_type& endpoints, std::string host_header,
              std::shared_ptr<const std::vector<std::string>> requests)
      : connection_(endpoints, std::move(host_header)), requests_(std::move(requests)) {}

  InferOutcome Infer(size_t index) override {
    int status = 0;
    std::string body;
    InferOutcome outcome =
        connection_.Send((*requests_)[index % requests_->size()], &status, &body);
    if (!outcome.ok) return outcome;
    return InferAnswer(status, body);
  }

 private:
  HttpConnection connection_;
  std::shared_ptr<const std::vector<std::string>> requests_;
};

// Every request of a closed loop on one io_context, driven by the thread that runs it; one
// keep-alive connection per request in flight, as each session has its own. A thread per
// connection cost the client 33-41 us of CPU per request on 2 shared cores, this loop 17-24
// (docs/benchmarks.md sections 17 and 18).
class HttpClosedLoop : public ClosedLoop {
 public:
  HttpClosedLoop(const tcp::resolver::results_type& endpoints, std::string host_header,
                 std::shared_ptr<const std::vector<std::string>> requests, int64_t concurrency)
      : endpoints_(endpoints),
        host_header_(std::move(host_header)),
        requests_(std::move(requests)) {
    for (int64_t i = 0; i < concurrency; ++i) conns_.emplace_back(io_);
  }

  void Run(const std::atomic<bool>& stop, const OnAnswer& on_answer) override {
    stop_ = &stop;
    on_answer_ = &on_answer;
    abandoned_ = false;
    last_answer_ = Clock::now();
    slowest_ = Clock::duration(0);
    stopped_.reset();
    io_.restart();
    for (Conn& c : conns_) Start(c);
    Tick();
    io_.run();
  }

 private:
  using Clock = std::chrono::steady_clock;
  // After a failed connect, as the thread-per-session workers pause.
  static constexpr auto kReconnectPause = std::chrono::milliseconds(20);

  struct Conn {
    explicit Conn(asio::io_context& io) : socket(io), pause(io) {}
    tcp::socket socket;
    asio::steady_timer pause;
    beast::flat_buffer buffer;
    std::optional<ResponseParser> parser;
    Clock::time_point sent;
    bool busy = false;
  };

  bool Stopping() const { return stop_->load(std::memory_order_relaxed); }

  // Sends the next request on `c`, connecting first when needed; nothing once stopping.
  void Start(Conn& c) {
    if (Stopping() || abandoned_) return;
    c.busy = true;
    c.sent = Clock::now();
    if (c.socket.is_open()) {
      Write(c);
      return;
    }
    asio::async_connect(
        c.socket, endpoints_, [this, &c](const beast::error_code& ec, const tcp::endpoint&) {
          if (ec) {
            Close(c);
            Finish(c,
                   {false, "connect", "cannot connect to " + host_header_ + ": " + ec.message()});
            return;
          }
          beast::error_code ignored;
          c.socket.set_option(tcp::no_delay(true), ignored);
          Write(c);
        });
  }

  void Write(Conn& c) {
    const std::string& wire = (*requests_)[next_++ % requests_->size()];
    asio::async_write(
        c.socket, asio::buffer(wire), [this, &c](const beast::error_code& ec, size_t) {
          if (ec) {
            Close(c);
            Finish(c, {false, "io", "writing the request: " + ec.message()});
            return;
          }
          PrepareParser(c.parser);
          http::async_read(c.socket, c.buffer, *c.parser,
                           [this, &c](const beast::error_code& ec, size_t) {
                             if (ec) {
                               Close(c);
                               Finish(c, {false, "io", "reading the response: " + ec.message()});
                               return;
                             }
                             const auto& res = c.parser->get();
                             if (!res.keep_alive()) Close(c);
                             Finish(c, InferAnswer(static_cast<int>(res.result_int()), res.body()));
                           });
        });
  }

  // Reports `c`'s answer and sends its next request.
  void Finish(Conn& c, const InferOutcome& outcome) {
    c.busy = false;
    if (abandoned_) return;  // closed by Tick: not an answer
    const auto answered = Clock::now();
    last_answer_ = answered;
    slowest_ = std::max(slowest_, answered - c.sent);
    (*on_answer_)(outcome,
                  std::chrono::duration_cast<std::chrono::nanoseconds>(answered - c.sent).count());
    if (!outcome.ok && outcome.kind == "connect") {
      c.pause.expires_after(kReconnectPause);
      c.pause.async_wait([this, &c](const beast::error_code&) { Start(c); });
      return;
    }
    Start(c);
  }

  void Close(Conn& c) {
    beast::error_code ignored;
    c.socket.close(ignored);
    c.buffer.clear();
  }

  // Every 100 ms: once stopping, ends the run when nothing is in flight; when nothing came back
  // for internal::Patience, abandons what is in flight (closes its connection) rather than
  // waiting for it, reporting what was long stuck (internal::GiveUp).
  void Tick() {
    tick_.expires_after(std::chrono::milliseconds(100));
    tick_.async_wait([this](const beast::error_code&) {
      if (Stopping()) {
        bool in_flight = false;
        for (Conn& c : conns_) in_flight = in_flight || c.busy;
        if (!in_flight) {
          for (Conn& c : conns_) c.pause.cancel();
          return;
        }
        const auto now = Clock::now();
        if (!stopped_) stopped_ = now;
        const auto patience = internal::Patience(slowest_);
        if (!abandoned_ && now - last_answer_ > patience) {
          abandoned_ = true;
          for (Conn& c : conns_) {
            if (!c.busy) continue;
            if (auto outcome = internal::GiveUp(c.sent, *stopped_, now, patience)) {
              (*on_answer_)(
                  *outcome,
                  std::chrono::duration_cast<std::chrono::nanoseconds>(now - c.sent).count());
            }
            Close(c);
          }
        }
      }
      Tick();
    });
  }

  asio::io_context io_;
  tcp::resolver::results_type endpoints_;
  std::string host_header_;
  std::shared_ptr<const std::vector<std::string>> requests_;
  std::deque<Conn> conns_;  // a deque: the handlers hold references
  asio::steady_timer tick_{io_};
  size_t next_ = 0;
  const std::atomic<bool>* stop_ = nullptr;
  const OnAnswer* on_answer_ = nullptr;
  Clock::time_point last_answer_ = Clock::now();
  Clock::duration slowest_{0};  // the slowest answer of the run
  std::optional<Clock::time_point> stopped_;  // when Tick first saw the stop
  bool abandoned_ = false;
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
    InferOutcome o = control_->Exchange(http::verb::get, path, status, &body);
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
    if (!json::ParseBounded(&doc, body).empty() || !doc.IsObject())
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
    // The config extension, where the server has it (Triton's and fastpath's do).
    int config_status = 0;
    if (auto config = Get(ModelPath() + "/config", &config_status);
        config.ok() && config_status == 200) {
      rapidjson::Document c;
      if (json::ParseBounded(&c, *config).empty() && c.IsObject()) {
        if (auto it = c.FindMember("max_batch_size"); it != c.MemberEnd() && it->value.IsInt64()) {
          m.max_batch_size = it->value.GetInt64();
        } else {
          m.max_batch_size = 0;  // proto3's JSON leaves a 0 out
        }
      }
    }
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
    if (!json::ParseBounded(&doc, body).empty() || !doc.IsObject()) {
      return std::optional<ModelStatsSnapshot>();
    }
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
    auto prepared = std::make_shared<std::vector<std::string>>();
    const std::string target = ModelPath() + "/infer";
    for (size_t i = 0; i < requests.size(); ++i) {
      FASTPATH_ASSIGN_OR_RETURN(
          InferBody body,
          internal::EncodeInferBody("bench-" + std::to_string(i), requests[i], outputs, encoding_));
      prepared->push_back(WireRequest(target, host_header_, body));
    }
    if (prepared->empty()) return InvalidArgument("no requests to prepare");
    requests_ = std::move(prepared);
    return Status::Ok();
  }

  StatusOr<std::unique_ptr<InferSession>> NewSession() override {
    if (!requests_) return FailedPrecondition("Prepare was not called");
    return std::unique_ptr<InferSession>(
        std::make_unique<HttpSession>(endpoints_, host_header_, requests_));
  }

  StatusOr<std::unique_ptr<ClosedLoop>> NewClosedLoop(int64_t concurrency) override {
    if (!requests_) return FailedPrecondition("Prepare was not called");
    return std::unique_ptr<ClosedLoop>(
        std::make_unique<HttpClosedLoop>(endpoints_, host_header_, requests_, concurrency));
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
  std::shared_ptr<const std::vector<std::string>> requests_;  // WireRequest
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
