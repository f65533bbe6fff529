// --soak's metrics scrape: one HTTP/1.1 GET per window boundary on a new connection, with
// one deadline for connecting, sending and reading (bench::GetOnce).
#include "fastpath/bench/http_once.h"
#include "fastpath/bench/soak.h"

namespace fastpath::bench {
namespace {

// The metrics of a big server run to a few hundred KiB; anything past this is not ours.
constexpr uint64_t kBodyLimit = uint64_t{64} << 20;

class HttpMetricsSource final : public MetricsSource {
 public:
  HttpMetricsSource(MetricsUrl url, std::chrono::milliseconds timeout)
      : url_(std::move(url)), timeout_(timeout) {}

  StatusOr<std::string> Scrape() override {
    ServerAddress server;
    server.host = url_.host;
    server.port = url_.port;
    return GetOnce(server, url_.path, timeout_, "text/plain", kBodyLimit);
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
