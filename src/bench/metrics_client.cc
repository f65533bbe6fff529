// --soak's metrics scrape: one HTTP/1.1 GET per window boundary on a new connection, with
// one deadline for connecting, sending and reading (Beast's tcp_stream timeouts work on
// asynchronous operations only, hence the callbacks run to completion here).
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include "client_internal.h"
#include "fastpath/bench/soak.h"

namespace fastpath::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// The metrics of a big server run to a few hundred KiB; anything past this is not ours.
constexpr uint64_t kBodyLimit = uint64_t{64} << 20;

class HttpMetricsSource final : public MetricsSource {
 public:
  HttpMetricsSource(MetricsUrl url, std::chrono::milliseconds timeout)
      : url_(std::move(url)), timeout_(timeout) {}

  StatusOr<std::string> Scrape() override {
    const std::string where = "GET " + Describe();
    try {
      asio::io_context io;
      tcp::resolver resolver(io);
      beast::error_code ec;
      const auto endpoints = resolver.resolve(url_.host, std::to_string(url_.port), ec);
      if (ec) return Unavailable(where + ": cannot resolve " + url_.host + ": " + ec.message());

      beast::tcp_stream stream(io);
      http::request<http::empty_body> request{http::verb::get, url_.path, 11};
      request.set(http::field::host, url_.host + ":" + std::to_string(url_.port));
      request.set(http::field::accept, "text/plain");
      request.keep_alive(false);
      beast::flat_buffer buffer;
      http::response_parser<http::string_body> parser;
      parser.body_limit(kBodyLimit);
      std::string failed_at;
      beast::error_code failure;
      auto fail = [&](const char* stage, beast::error_code e) {
        failed_at = stage;
        failure = e;
      };
      stream.expires_after(timeout_);  // one deadline for the whole exchange
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
        const std::string why = failure == beast::error::timeout
                                    ? "no answer within " + std::to_string(timeout_.count()) + " ms"
                                    : failure.message();
        return Unavailable(where + ": " + failed_at + ": " + why);
      }
      const auto& response = parser.get();
      if (response.result_int() != 200) {
        return Unavailable(where + " answered " + std::to_string(response.result_int()) + ": " +
                           internal::Truncate(response.body(), 200));
      }
      return std::string(response.body());
    } catch (const std::exception& e) {
      return Unavailable(where + ": " + e.what());
    }
  }

  std::string Describe() const override { return DescribeMetricsUrl(url_); }

 private:
  MetricsUrl url_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

std::unique_ptr<MetricsSource> MakeHttpMetricsSource(const MetricsUrl& url,
                                                     std::chrono::milliseconds timeout) {
  return std::make_unique<HttpMetricsSource>(url, timeout);
}

}  // namespace fastpath::bench
