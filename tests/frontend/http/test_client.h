// A small synchronous HTTP/1.1 client on Beast for the front end's tests: one
// connection that can carry several requests (keep-alive), plus raw bytes for requests
// a client library would not send. Every read times out, so a broken server fails the
// test instead of hanging it.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace fastpath::frontend::testing {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Reply {
  int status = 0;  // 0: no response (error says why)
  std::string error;
  std::string body;
  boost::beast::http::fields headers;
  bool keep_alive = false;

  std::optional<std::string> Header(const std::string& name) const {
    auto it = headers.find(name);
    if (it == headers.end()) return std::nullopt;
    return std::string(it->value());
  }
};

class TestClient {
 public:
  explicit TestClient(int port);

  Reply Get(const std::string& target, const Headers& headers = {});
  Reply Post(const std::string& target, const std::string& body, const Headers& headers = {});
  // Writes bytes verbatim on this connection, then reads one response.
  Reply Raw(const std::string& bytes);
  // Writes bytes verbatim without reading.
  bool Write(const std::string& bytes);
  // `head`: the answer to a HEAD request, whose Content-Length has no content behind it.
  Reply Read(bool head = false);
  // True when the server has closed the connection (a read sees end of stream).
  bool ServerClosed();
  // Hangs up: the connection is closed without waiting for any answer.
  void Close();

 private:
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
};

// "POST /x HTTP/1.1\r\nHost: t\r\n<headers>\r\n\r\n<body>", without Content-Length
// unless given in `headers`.
std::string RawRequest(const std::string& method, const std::string& target, const Headers& headers,
                       const std::string& body);

}  // namespace fastpath::frontend::testing
