#include "http_client.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cctype>

namespace fastpath::integration {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// Generous: a test that waits this long on one socket has found a hang, which the
// test then reports as a missing response instead of blocking ctest forever.
constexpr int kSocketTimeoutSecs = 60;

void SetTimeouts(tcp::socket& socket) {
  timeval tv{};
  tv.tv_sec = kSocketTimeoutSecs;
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Reads one response; fills `error` (and leaves status 0) when none arrives whole.
HttpResponse ReadResponse(tcp::socket& socket, beast::flat_buffer& buffer) {
  HttpResponse out;
  http::response_parser<http::string_body> parser;
  parser.body_limit(uint64_t{4} << 30);
  parser.header_limit(1 << 20);
  beast::error_code ec;
  http::read(socket, buffer, parser, ec);
  if (ec) {
    out.error = "reading the response: " + ec.message();
    return out;
  }
  const auto& message = parser.get();
  out.status = static_cast<int>(message.result_int());
  for (const auto& field : message) {
    out.headers[Lower(std::string(field.name_string()))] = std::string(field.value());
  }
  out.body = message.body();
  out.keep_alive = message.keep_alive();
  return out;
}

}  // namespace

std::string HttpResponse::Describe() const {
  if (status == 0) return "no response (" + error + ")";
  return "status " + std::to_string(status) + ": " + body.substr(0, 2000);
}

class HttpClient::Connection {
 public:
  explicit Connection(int port) : socket_(io_) {
    beast::error_code ec;
    socket_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"),
                                  static_cast<unsigned short>(port)),
                    ec);
    if (ec) {
      error_ = "connect: " + ec.message();
      return;
    }
    SetTimeouts(socket_);
    socket_.set_option(tcp::no_delay(true), ec);
  }

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  tcp::socket& socket() { return socket_; }
  beast::flat_buffer& buffer() { return buffer_; }

  // Writes everything, tolerating a peer that stops reading (the caller then reads
  // whatever response the server already sent).
  bool WriteAll(std::string_view bytes, std::string* error) {
    beast::error_code ec;
    asio::write(socket_, asio::buffer(bytes.data(), bytes.size()), ec);
    if (ec) {
      *error = "writing the request: " + ec.message();
      return false;
    }
    return true;
  }

 private:
  asio::io_context io_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
  std::string error_;
};

HttpClient::HttpClient(int port) : port_(port) {}
HttpClient::~HttpClient() = default;

std::string RawRequest(const std::string& method, const std::string& target,
                       std::string_view body, std::optional<size_t> content_length,
                       const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string out = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const auto& [name, value] : headers) out += name + ": " + value + "\r\n";
  if (content_length) out += "Content-Length: " + std::to_string(*content_length) + "\r\n";
  out += "\r\n";
  out.append(body);
  return out;
}

HttpResponse HttpClient::SendOnce(const std::string& method, const std::string& target,
                                  const std::string& body,
                                  const std::vector<std::pair<std::string, std::string>>& headers,
                                  bool* connection_failed) {
  *connection_failed = false;
  if (!connection_ || !connection_->ok()) connection_ = std::make_unique<Connection>(port_);
  if (!connection_->ok()) {
    HttpResponse r;
    r.error = connection_->error();
    connection_.reset();
    return r;
  }
  std::optional<size_t> length;
  if (method == "POST" || !body.empty()) length = body.size();
  std::string bytes = RawRequest(method, target, body, length, headers);
  HttpResponse r;
  if (!connection_->WriteAll(bytes, &r.error)) {
    *connection_failed = true;
    connection_.reset();
    return r;
  }
  r = ReadResponse(connection_->socket(), connection_->buffer());
  if (r.status == 0) {
    *connection_failed = true;
    connection_.reset();
  } else if (!r.keep_alive) {
    connection_.reset();
  }
  return r;
}

HttpResponse HttpClient::Get(const std::string& target) {
  bool failed = false;
  HttpResponse r = SendOnce("GET", target, "", {}, &failed);
  // A keep-alive connection the server closed while idle fails on first use; one
  // retry on a fresh connection tells that apart from a real failure.
  if (failed) r = SendOnce("GET", target, "", {}, &failed);
  return r;
}

HttpResponse HttpClient::Post(const std::string& target, std::string body,
                              const std::vector<std::pair<std::string, std::string>>& headers) {
  bool had_connection = connection_ != nullptr;
  bool failed = false;
  HttpResponse r = SendOnce("POST", target, body, headers, &failed);
  if (failed && had_connection) r = SendOnce("POST", target, body, headers, &failed);
  return r;
}

HttpResponse HttpClient::SendRaw(std::string_view bytes, const std::function<void()>& on_written) {
  Connection connection(port_);
  HttpResponse r;
  if (!connection.ok()) {
    r.error = connection.error();
    if (on_written) on_written();  // nothing more will be written
    return r;
  }
  std::string write_error;
  connection.WriteAll(bytes, &write_error);
  if (on_written) on_written();
  r = ReadResponse(connection.socket(), connection.buffer());
  if (r.status == 0 && !write_error.empty()) r.error = write_error + "; " + r.error;
  return r;
}

void HttpClient::SendAndClose(std::string_view bytes) {
  Connection connection(port_);
  if (!connection.ok()) return;
  std::string ignored;
  connection.WriteAll(bytes, &ignored);
  beast::error_code ec;
  connection.socket().shutdown(tcp::socket::shutdown_both, ec);
  connection.socket().close(ec);
}

std::vector<HttpResponse> HttpClient::Pipeline(const std::vector<std::string>& requests) {
  Connection connection(port_);
  std::vector<HttpResponse> out;
  if (!connection.ok()) return out;
  std::string all;
  for (const auto& r : requests) all += r;
  std::string error;
  connection.WriteAll(all, &error);
  for (size_t i = 0; i < requests.size(); ++i) {
    out.push_back(ReadResponse(connection.socket(), connection.buffer()));
    if (out.back().status == 0) break;
  }
  return out;
}

}  // namespace fastpath::integration
