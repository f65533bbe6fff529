// A small synchronous HTTP/1.1 client on Boost.Beast, for black-box tests: one
// keep-alive connection, plus raw-bytes helpers for requests that a well-behaved
// client library would refuse to send (no Content-Length, garbage, a cut-off body).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fastpath::integration {

struct HttpResponse {
  // 0 when no response came back; `error` then says why.
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string error;
  bool keep_alive = false;

  std::optional<std::string> Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    if (it == headers.end()) return std::nullopt;
    return it->second;
  }
  // "status 400: {...}" for assertion messages.
  std::string Describe() const;
};

class HttpClient {
 public:
  explicit HttpClient(int port);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends one request on the keep-alive connection (reconnecting once if the server
  // closed it between requests) and reads the whole response. Content-Length is set
  // from the body for POST.
  HttpResponse Get(const std::string& target);
  HttpResponse Post(const std::string& target, std::string body,
                    const std::vector<std::pair<std::string, std::string>>& headers = {});

  // Writes `bytes` verbatim on a fresh connection and reads one response (or the
  // close). The connection is closed afterwards. `on_written`, if set, runs once the
  // last byte has been handed to the kernel, before the response is read.
  HttpResponse SendRaw(std::string_view bytes, const std::function<void()>& on_written = {});

  // Writes `bytes` on a fresh connection and closes it at once without reading.
  void SendAndClose(std::string_view bytes);

  // Sends every request in `requests` (raw bytes, HTTP/1.1) back to back on one fresh
  // connection before reading anything, then reads one response per request.
  std::vector<HttpResponse> Pipeline(const std::vector<std::string>& requests);

  int port() const { return port_; }

 private:
  class Connection;
  HttpResponse SendOnce(const std::string& method, const std::string& target,
                        const std::string& body,
                        const std::vector<std::pair<std::string, std::string>>& headers,
                        bool* connection_failed);

  int port_;
  std::unique_ptr<Connection> connection_;
};

// Builds the bytes of a request for SendRaw. `content_length`: nullopt leaves the
// header out entirely.
std::string RawRequest(const std::string& method, const std::string& target,
                       std::string_view body, std::optional<size_t> content_length,
                       const std::vector<std::pair<std::string, std::string>>& headers = {});

}  // namespace fastpath::integration
