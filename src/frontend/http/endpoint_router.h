// Maps one parsed HTTP request to the facade and its result to one reply: Triton's
// paths, methods, statuses and bodies. No sockets here: the connection code
// (http_server.cc) feeds it requests and writes what it replies.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "fastpath/server/server.h"

namespace fastpath::frontend::http {

using Request = boost::beast::http::request<boost::beast::http::string_body>;

struct HttpReply {
  unsigned status = 200;
  std::string content_type;  // empty: no Content-Type header (Triton's health replies)
  std::string body;
  // Set on binary inference replies: the size of the JSON part of `body`.
  std::optional<size_t> inference_header_length;
  // Seconds in a Retry-After header: set on errors a client should simply retry (out of
  // memory under transient pressure).
  std::optional<unsigned> retry_after_s;
};

// Called exactly once per request, possibly on a facade thread, possibly before
// EndpointRouter::Handle returns.
using ReplyFn = std::function<void(HttpReply)>;
// Set by the connection code once the client has gone away while its request is in
// flight; null where it cannot tell. An inference request carries it to the facade, so
// that a request still queued then never reaches the model.
using ClientGone = std::shared_ptr<const std::atomic<bool>>;

class RolloutVerdictEndpoint;

class EndpointRouter {
 public:
  // `server` and `verdict` (/v2/rollout/verdict) are borrowed and must outlive the router.
  EndpointRouter(server::InferenceServer& server, size_t max_body_bytes,
                 RolloutVerdictEndpoint& verdict);

  // Handles one complete request (the body is consumed: inference parses it in place).
  // This is the front end's one safety net: an exception escaping any handler becomes a
  // 500 JSON error, unless a reply was already sent.
  void Handle(Request&& request, ReplyFn reply, ClientGone client_gone = nullptr);

 private:
  void Route(Request& request, const ReplyFn& reply, const ClientGone& client_gone);
  void HandleInfer(Request& request, const std::string& model, const std::string& version,
                   const ReplyFn& reply, const ClientGone& client_gone);
  void HandleRepositoryIndex(Request& request, const ReplyFn& reply);
  void HandleRepositoryControl(Request& request, const std::string& model, bool load,
                               const ReplyFn& reply);

  server::InferenceServer& server_;
  size_t max_body_bytes_;
  RolloutVerdictEndpoint& verdict_;
};

// %XX decoding, as tritonclient encodes model names in the path (and clients a query's
// values); nullopt for a bad escape. A '+' stays a '+'.
std::optional<std::string> PercentDecode(std::string_view s);

// Replies shared by the router and the connection code.
HttpReply JsonReply(unsigned status, std::string body);
HttpReply ErrorReply(const Status& status);  // {"error": message} with HttpStatusFor(code)
HttpReply ErrorReply(unsigned status, std::string_view message);

}  // namespace fastpath::frontend::http
