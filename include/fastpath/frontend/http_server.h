// The HTTP/REST front end: the KServe v2 / Open Inference Protocol as NVIDIA Triton
// serves it on port 8000 (same paths, same JSON shapes, the binary tensor data
// extension), so that Triton's clients (tritonclient, perf_analyzer) work unchanged.
// It parses each request into the facade's vocabulary, calls server::InferenceServer,
// and renders the result; it never reaches past the facade.
//
// Built on Boost.Beast over Asio: connections are served asynchronously by a small,
// fixed pool of threads, so many keep-alive connections cost no thread each.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "fastpath/admission/rollout_gate.h"
#include "fastpath/common/status.h"
#include "fastpath/frontend/request_bytes.h"
#include "fastpath/server/server.h"

namespace fastpath::frontend {

// GET (or POST) /v2/rollout/verdict (issue 12 §3): `fastpath gate` run by this server, as the
// candidate, against a baseline, for Argo Rollouts' web metric provider and Flagger's webhooks
// (docs/rollouts.md). What the query asked, parsed and range-checked by the front end:
struct RolloutVerdictQuery {
  std::string model;
  std::string baseline;          // as given: http://HOST:PORT, or a record file's name
  admission::GatePolicy policy;  // the limits and rounds; the defaults where not given
  bool rounds_given = false;     // not given: a recorded baseline's own number of rounds
  bool require_same_hardware = false;
  // This server's own HTTP address (its bound address, loopback for a wildcard one).
  std::string candidate;
};

struct RolloutVerdict {
  enum class Outcome { kPassed, kRefused, kNotMeasured };
  Outcome outcome = Outcome::kNotMeasured;
  std::string json;  // what `fastpath gate --json` prints, with "passed" and "outcome"
};

// Measures and judges; blocks for seconds, or minutes. An error is the request's fault and
// answers with its code's HTTP status (InvalidArgument 400, PermissionDenied 403).
using RolloutVerdictFn = std::function<StatusOr<RolloutVerdict>(const RolloutVerdictQuery&)>;

struct HttpOptions {
  std::string address = "0.0.0.0";
  int port = 8000;  // 0: an ephemeral port, read it back with HttpServer::port()
  int threads = 2;  // threads running the event loop (parsing and rendering run there too)
  // A request whose body is larger gets 413 without its body being read. It also bounds
  // how many elements a request tensor may declare, before anything is allocated.
  size_t max_body_bytes = size_t{64} << 20;
  // The request bodies being read or served at once, all connections together: a request
  // whose body would take the total past it gets 503 with Retry-After and the connection
  // closes, the rest of its body unread, so that a burst of large requests cannot run the
  // process out of memory. A body is charged as its bytes arrive, not as its Content-Length
  // announces them, and held until it is answered. Shared with the gRPC front end where
  // `fastpath serve` starts both; null: a bound of kDefaultRequestBytesInFlight of its own.
  std::shared_ptr<RequestBytes> request_bytes;
  // A connection with no request in progress for this long is closed.
  std::chrono::seconds idle_timeout{300};
  // /v2/rollout/verdict. Unset (the default) the endpoint answers 404, saying how to turn it
  // on: it makes the server send requests to an address from the query. Set, it runs on the
  // front end's own thread, never an event loop, one measurement at a time (a second one
  // meanwhile is answered 429). `fastpath serve --rollout-verdict-baseline` sets it
  // (src/cli/gate_verdict.cc): the front end does not know `fastpath gate`.
  RolloutVerdictFn rollout_verdict;
};

class HttpServerImpl;

class HttpServer {
 public:
  // Binds and starts serving; returns once listening. `server` is borrowed: it must
  // outlive the returned object.
  [[nodiscard]] static StatusOr<std::unique_ptr<HttpServer>> Start(server::InferenceServer& server,
                                                                   const HttpOptions& options);

  ~HttpServer();  // Shutdown(0)
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The port actually bound (the chosen one when options.port was 0).
  int port() const;

  // The drain begins: every answer from now on carries Connection: close (the connection
  // closes after it). The listener still accepts: a client sent here before the load
  // balancer learned of the drain gets the facade's answer (503 while it drains), never a
  // reset connection. Shutdown closes the listener.
  void BeginDrain();

  // Stops accepting, closes idle connections, waits until every request in flight has
  // been answered or `grace` has passed, then closes everything and stops the threads.
  // A response that the facade delivers later is dropped. Idempotent.
  void Shutdown(std::chrono::milliseconds grace);

 private:
  explicit HttpServer(std::unique_ptr<HttpServerImpl> impl);

  std::unique_ptr<HttpServerImpl> impl_;
};

}  // namespace fastpath::frontend
