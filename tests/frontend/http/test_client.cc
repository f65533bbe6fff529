#include "test_client.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>

namespace fastpath::frontend::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;

TestClient::TestClient(int port) : socket_(ioc_) {
  socket_.connect({net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  timeval tv{};
  tv.tv_sec = 20;
  ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

void TestClient::Close() {
  boost::system::error_code ignored;
  socket_.close(ignored);
}

Reply TestClient::Read(bool head) {
  Reply out;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(1ull << 32);
  parser.skip(head);
  beast::error_code ec;
  bhttp::read(socket_, buffer_, parser, ec);
  if (ec) {
    out.error = ec.message();
    return out;
  }
  auto res = parser.release();
  out.status = static_cast<int>(res.result_int());
  out.keep_alive = res.keep_alive();
  out.body = std::move(res.body());
  out.headers = std::move(res.base());
  return out;
}

bool TestClient::Write(const std::string& bytes) {
  beast::error_code ec;
  net::write(socket_, net::buffer(bytes), ec);
  return !ec;
}

Reply TestClient::Raw(const std::string& bytes) {
  if (!Write(bytes)) {
    Reply r;
    r.error = "write failed";
    return r;
  }
  return Read();
}

Reply TestClient::Get(const std::string& target, const Headers& headers) {
  bhttp::request<bhttp::string_body> req(bhttp::verb::get, target, 11);
  req.set(bhttp::field::host, "test");
  for (const auto& [k, v] : headers) req.set(k, v);
  beast::error_code ec;
  bhttp::write(socket_, req, ec);
  if (ec) {
    Reply r;
    r.error = ec.message();
    return r;
  }
  return Read();
}

Reply TestClient::Post(const std::string& target, const std::string& body, const Headers& headers) {
  bhttp::request<bhttp::string_body> req(bhttp::verb::post, target, 11);
  req.set(bhttp::field::host, "test");
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  beast::error_code ec;
  bhttp::write(socket_, req, ec);
  if (ec) {
    Reply r;
    r.error = ec.message();
    return r;
  }
  return Read();
}

bool TestClient::ServerClosed() {
  char c;
  beast::error_code ec;
  // Anything already buffered would be a protocol error from the server.
  if (buffer_.size() > 0) return false;
  socket_.read_some(net::buffer(&c, 1), ec);
  return ec == net::error::eof || ec == net::error::connection_reset;
}

std::string RawRequest(const std::string& method, const std::string& target, const Headers& headers,
                       const std::string& body) {
  std::string out = method + " " + target + " HTTP/1.1\r\nHost: test\r\n";
  for (const auto& [k, v] : headers) out += k + ": " + v + "\r\n";
  out += "\r\n";
  out += body;
  return out;
}

}  // namespace fastpath::frontend::testing
