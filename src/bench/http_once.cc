// One-shot HTTP/1.1 exchanges (http_once.h): a new connection per request, with one deadline
// for connecting, sending and reading. Beast's tcp_stream timeouts work on asynchronous
// operations only, hence the callbacks run to completion here.
#include "fastpath/bench/http_once.h"

#include <rapidjson/document.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <cstdlib>
#include <optional>

#include "client_internal.h"
#include "fastpath/common/json.h"

namespace fastpath::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// An inference's outputs may be large (a big batch of images); anything past this is not a
// model's answer.
constexpr uint64_t kInferBodyLimit = uint64_t{4} << 30;

struct Answer {
  int status = 0;
  std::string body;
  std::optional<size_t> inference_header_length;  // Inference-Header-Content-Length
};

std::string Seconds(std::chrono::milliseconds timeout) {
  return timeout.count() % 1000 == 0 ? std::to_string(timeout.count() / 1000) + " s"
                                     : std::to_string(timeout.count()) + " ms";
}

// One request on a new connection; Unavailable, after `where`, when no answer came.
StatusOr<Answer> Exchange(const ServerAddress& server, const std::string& where,
                          http::request<http::string_body> request,
                          std::chrono::milliseconds timeout, uint64_t body_limit) {
  http::response_parser<http::string_body> parser;
  parser.body_limit(body_limit);
  try {
    asio::io_context io;
    tcp::resolver resolver(io);
    beast::error_code ec;
    const auto endpoints = resolver.resolve(server.host, std::to_string(server.port), ec);
    if (ec) return Unavailable(where + ": cannot resolve " + server.host + ": " + ec.message());
    beast::tcp_stream stream(io);
    request.set(http::field::host, server.host + ":" + std::to_string(server.port));
    request.keep_alive(false);
    request.prepare_payload();
    beast::flat_buffer buffer;
    std::string failed_at;
    beast::error_code failure;
    auto fail = [&](const char* stage, beast::error_code e) {
      failed_at = stage;
      failure = e;
    };
    stream.expires_after(timeout);  // one deadline for the whole exchange
    stream.async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) {
      if (e) return fail("connecting", e);
      http::async_write(stream, request, [&](beast::error_code e, size_t) {
        if (e) return fail("sending", e);
        http::async_read(stream, buffer, parser, [&](beast::error_code e, size_t) {
          if (e) fail("reading", e);
        });
      });
    });
    io.run();
    stream.socket().close(ec);
    if (failure) {
      return Unavailable(where + ": " + failed_at + ": " +
                         (failure == beast::error::timeout ? "no answer within " + Seconds(timeout)
                                                           : failure.message()));
    }
  } catch (const std::exception& e) {
    return Unavailable(where + ": " + e.what());
  }
  auto& response = parser.get();
  Answer answer;
  answer.status = static_cast<int>(response.result_int());
  if (auto it = response.find("Inference-Header-Content-Length"); it != response.end()) {
    answer.inference_header_length = std::strtoull(std::string(it->value()).c_str(), nullptr, 10);
  }
  answer.body = std::move(response.body());
  return answer;
}

// The outputs of a binary inference answer.
StatusOr<std::vector<Tensor>> DecodeOutputs(const std::string& where, const Answer& answer) {
  const std::string& body = answer.body;
  const size_t header_length = answer.inference_header_length.value_or(body.size());
  if (header_length > body.size()) {
    return Internal(where + ": Inference-Header-Content-Length is past the body's end");
  }
  rapidjson::Document doc;
  if (!json::ParseBounded(&doc, std::string_view(body).substr(0, header_length)).empty() ||
      !doc.IsObject() || !doc.HasMember("outputs") || !doc["outputs"].IsArray()) {
    return Internal(where + ": the answer is not a KServe v2 response: " +
                    internal::Truncate(body.substr(0, header_length)));
  }
  std::vector<Tensor> outputs;
  size_t offset = header_length;
  for (const auto& o : doc["outputs"].GetArray()) {
    Tensor t;
    if (!o.IsObject() || !o.HasMember("name") || !o["name"].IsString() ||
        !o.HasMember("datatype") || !o["datatype"].IsString() || !o.HasMember("shape") ||
        !o["shape"].IsArray()) {
      return Internal(where + ": an output lacks its name, datatype or shape");
    }
    t.name = o["name"].GetString();
    const auto dtype = ParseDataType(o["datatype"].GetString());
    if (!dtype) return Internal(where + ": output '" + t.name + "' has an unknown datatype");
    t.dtype = *dtype;
    for (const auto& d : o["shape"].GetArray()) {
      if (!d.IsInt64()) return Internal(where + ": output '" + t.name + "' has a bad shape");
      t.shape.push_back(d.GetInt64());
    }
    const auto parameters = o.FindMember("parameters");
    const rapidjson::Value* size = nullptr;
    if (parameters != o.MemberEnd() && parameters->value.IsObject() &&
        parameters->value.HasMember("binary_data_size")) {
      size = &parameters->value["binary_data_size"];
    }
    if (size == nullptr || !size->IsUint64()) {
      return FailedPrecondition(where + ": output '" + t.name +
                                "' came back as JSON: outputs are read in the binary tensor "
                                "extension, which the server must support");
    }
    if (offset + size->GetUint64() > body.size()) {
      return Internal(where + ": output '" + t.name + "' runs past the body's end");
    }
    t.data = body.substr(offset, size->GetUint64());
    offset += size->GetUint64();
    outputs.push_back(std::move(t));
  }
  return outputs;
}

}  // namespace

std::string DescribeServer(const ServerAddress& server) {
  const bool v6 = server.host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + server.host + "]" : server.host) + ":" +
         std::to_string(server.port);
}

StatusOr<std::string> GetOnce(const ServerAddress& server, const std::string& path,
                              std::chrono::milliseconds timeout, const std::string& accept,
                              uint64_t body_limit) {
  const std::string where = "GET " + DescribeServer(server) + path;
  http::request<http::string_body> request{http::verb::get, path, 11};
  if (!accept.empty()) request.set(http::field::accept, accept);
  FASTPATH_ASSIGN_OR_RETURN(Answer answer,
                            Exchange(server, where, std::move(request), timeout, body_limit));
  if (answer.status != 200) {
    return Unavailable(where + " answered " + std::to_string(answer.status) + ": " +
                       internal::Truncate(answer.body, 200));
  }
  return std::move(answer.body);
}

StatusOr<std::vector<Tensor>> InferOnce(const ServerAddress& server, const std::string& model,
                                        const std::vector<Tensor>& inputs,
                                        const std::vector<std::string>& outputs,
                                        std::chrono::milliseconds timeout) {
  const std::string path = "/v2/models/" + model + "/infer";
  const std::string where = "POST " + DescribeServer(server) + path;
  FASTPATH_ASSIGN_OR_RETURN(
      internal::InferBody body,
      internal::EncodeInferBody("fastpath-infer-once", inputs, outputs, Encoding::kBinary));
  http::request<http::string_body> request{http::verb::post, path, 11};
  request.set(http::field::content_type, "application/octet-stream");
  request.set("Inference-Header-Content-Length", std::to_string(body.json_length));
  request.body() = std::move(body.body);
  FASTPATH_ASSIGN_OR_RETURN(Answer answer,
                            Exchange(server, where, std::move(request), timeout, kInferBodyLimit));
  if (answer.status != 200) {
    return FailedPrecondition(where + " answered " + std::to_string(answer.status) + ": " +
                              internal::Truncate(answer.body));
  }
  return DecodeOutputs(where, answer);
}

}  // namespace fastpath::bench
