// Connections, the listener and the lifecycle of the HTTP front end. One Beast session per
// connection runs on one of the event loops (an io_context run by one thread); requests on
// a connection are handled one at a time (a pipelined request waits in the read buffer).
//
// Ownership across threads: the facade answers inference on its own threads, possibly
// after this server has stopped. So a reply never travels with a pointer to a session:
// it carries the session's id to ServerCore::Deliver, which looks the session up under
// the core's lock and posts the reply to its loop only while the event loop exists (a
// reply made on that loop's own thread is written at once). While a request waits for its
// reply the core's `pending` map owns the session.
#include "fastpath/frontend/http_server.h"

#include <sys/socket.h>
#include <sys/types.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "endpoint_router.h"
#include "fastpath/common/log.h"
#include "fastpath/common/open_files.h"
#include "fastpath/common/thread_name.h"
#include "fastpath/common/thread_start.h"
#include "infer_codec.h"
#include "request_body.h"
#include "rollout_verdict.h"

namespace fastpath::frontend {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = net::ip::tcp;
// Each event loop is run by one thread, so a connection's handlers never run at once and
// need no strand; and the loop's own executor type, not the type-erased any_io_executor,
// spares the copies of a strand the heap (callgrind counted 16 allocations a request).
using Executor = net::io_context::executor_type;
using Socket = net::basic_stream_socket<tcp, Executor>;
using Clock = std::chrono::steady_clock;
using Timer = net::basic_waitable_timer<Clock, net::wait_traits<Clock>, Executor>;

constexpr char kInferHeaderLength[] = "Inference-Header-Content-Length";
// Large enough for any header a client sends in practice; the body has its own limit.
constexpr uint32_t kHeaderLimitBytes = 64 * 1024;
// After the last response on a closing connection, how long to keep reading (and
// discarding) so that the client receives the response rather than a reset.
constexpr std::chrono::seconds kLingerTimeout{2};
// Beast reads as much as the buffer has room for, but at least 512 bytes, and at most
// 64 KiB, at a time. Left to grow on its own, the buffer stays at 512 bytes (the parser
// consumes what each read brings), so a 12 KiB tensor took 26 reads, each with a
// timer set and cancelled: most of the HTTP thread's time on the example CNN (callgrind,
// issue 11). Room for a typical request's header and small body in one read, and for a
// known body's next 64 KiB before it is read; between requests an idle connection keeps
// only the first (a large body's room is given back: thousands of keep-alive connections
// must not hold 72 KiB each).
constexpr size_t kReadBufferBytes = 8 * 1024;
constexpr size_t kBodyReadBytes = 64 * 1024;

class HttpSession;

// Why a request's Transfer-Encoding cannot be served, empty when it can: only chunked is
// decoded (a compressed body comes as Content-Encoding), and a request whose codings do not
// end in chunked has no knowable length: its "body" could be read as the next request
// (RFC 9112 §6.3, request smuggling). Both are answered and the connection closed.
std::string TransferEncodingRefusal(beast::string_view codings, unsigned* status) {
  beast::string_view last;
  beast::string_view other;
  for (auto rest = codings; !rest.empty();) {
    const size_t comma = rest.find(',');
    beast::string_view coding = rest.substr(0, comma);
    rest = comma == beast::string_view::npos ? beast::string_view() : rest.substr(comma + 1);
    while (!coding.empty() && (coding.front() == ' ' || coding.front() == '\t'))
      coding.remove_prefix(1);
    while (!coding.empty() && (coding.back() == ' ' || coding.back() == '\t'))
      coding.remove_suffix(1);
    coding = coding.substr(0, coding.find(';'));
    if (coding.empty()) continue;
    last = coding;
    if (!beast::iequals(coding, "chunked") && other.empty()) other = coding;
  }
  if (!beast::iequals(last, "chunked")) {
    *status = 400;
    return "Transfer-Encoding '" + std::string(codings.data(), codings.size()) +
           "' does not end in chunked, so the body's length cannot be known";
  }
  if (!other.empty()) {
    *status = 501;
    return "transfer coding '" + std::string(other.data(), other.size()) +
           "' is not supported: only chunked is (send a compressed body as Content-Encoding "
           "gzip or deflate)";
  }
  return "";
}

// RFC 9112 §3.2.2: a server must take a target in absolute form (what a client configured
// for a proxy sends): "http://host:8000/v2/models?x" is served as "/v2/models?x".
std::optional<std::string> OriginForm(beast::string_view target) {
  const size_t scheme = target.find("://");
  if (scheme == beast::string_view::npos || target.empty() || target.front() == '/' ||
      !(beast::iequals(target.substr(0, scheme), "http") ||
        beast::iequals(target.substr(0, scheme), "https"))) {
    return std::nullopt;
  }
  const size_t path = target.find_first_of("/?", scheme + 3);
  if (path == beast::string_view::npos) return std::string("/");
  return (target[path] == '?' ? "/" : "") + std::string(target.data() + path, target.size() - path);
}

// A protocol violation by the client (as opposed to a failed connection).
bool IsHttpError(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
         ec != bhttp::error::partial_message && ec != bhttp::error::end_of_stream;
}

// State shared by the server, its connections and the facade's reply callbacks.
struct ServerCore {
  explicit ServerCore(const HttpOptions& o)
      : options(o),
        request_bytes(o.request_bytes != nullptr
                          ? o.request_bytes
                          : std::make_shared<RequestBytes>(kDefaultRequestBytesInFlight)) {}

  const HttpOptions options;
  std::unique_ptr<http::EndpointRouter> router;  // set once before the first accept
  std::atomic<bool> draining{false};             // BeginDrain or Shutdown began: no keep-alive
  std::atomic<bool> closing{false};              // Shutdown began: no request is read any more
  std::atomic<uint64_t> next_session_id{1};
  // Held by request bodies being read or served (and by the gRPC front end's requests).
  const std::shared_ptr<RequestBytes> request_bytes;

  void AddSession(uint64_t id, const std::shared_ptr<HttpSession>& s) {
    std::lock_guard lock(mu);
    sessions[id] = s;
  }
  void RemoveSession(uint64_t id) {
    std::lock_guard lock(mu);
    sessions.erase(id);
  }
  std::vector<std::shared_ptr<HttpSession>> LiveSessions() {
    std::vector<std::shared_ptr<HttpSession>> out;
    std::lock_guard lock(mu);
    for (auto& [id, weak] : sessions) {
      if (auto s = weak.lock()) out.push_back(std::move(s));
    }
    return out;
  }
  void AwaitReply(uint64_t id, std::shared_ptr<HttpSession> s) {
    std::lock_guard lock(mu);
    pending[id] = std::move(s);
  }
  // Called from any thread, at most once per request.
  void Deliver(uint64_t id, http::HttpReply reply);

  void BeginRequest() {
    std::lock_guard lock(mu);
    ++in_flight;
  }
  void EndRequest() {
    std::lock_guard lock(mu);
    if (--in_flight == 0) idle_cv.notify_all();
  }
  void WaitNoneInFlight(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mu);
    idle_cv.wait_until(lock, deadline, [&] { return in_flight == 0; });
  }
  // After the event loop has stopped for good: later replies are dropped. Returns the
  // sessions that were waiting, for the caller to release outside the lock.
  std::unordered_map<uint64_t, std::shared_ptr<HttpSession>> StopDelivering() {
    std::lock_guard lock(mu);
    io_alive = false;
    return std::move(pending);
  }

  std::mutex mu;
  std::condition_variable idle_cv;
  bool io_alive = true;  // guarded by mu
  int64_t in_flight = 0;  // guarded by mu: requests begun and not yet answered
  std::unordered_map<uint64_t, std::weak_ptr<HttpSession>> sessions;  // guarded by mu
  std::unordered_map<uint64_t, std::shared_ptr<HttpSession>> pending;  // guarded by mu
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(Socket&& socket, std::shared_ptr<ServerCore> core, uint64_t id)
      : socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        core_(std::move(core)),
        id_(id) {
    buffer_.reserve(kReadBufferBytes);
    beast::error_code ec;
    socket_.non_blocking(true, ec);
    write_at_once_ = !ec;  // a blocking write here would wait for the client
  }

  ~HttpSession() {
    if (request_active_) core_->EndRequest();
    core_->request_bytes->Release(body_held_);
    core_->RemoveSession(id_);
  }

  Executor executor() { return socket_.get_executor(); }

  void Start() {
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] {
      self->ArmTimer(Clock::now() + self->core_->options.idle_timeout);
      self->ReadHeader();
    });
  }

  // Shutdown: a connection waiting for its next request is closed now; one with a
  // request in progress closes after answering it (`draining` turns keep-alive off).
  void CloseIfIdle() {
    net::post(socket_.get_executor(), [self = shared_from_this()] {
      beast::error_code ignored;
      if (self->idle_ && !self->closed_) self->socket_.cancel(ignored);  // OnHeader then closes
    });
  }

  // Only once the event loop has stopped (no handler can run concurrently).
  void CloseSocketNow() {
    beast::error_code ec;
    socket_.close(ec);
  }

  void OnReply(http::HttpReply reply) {
    StopWatchingClient();
    // Answered: its body's room goes back before the client can see the answer, so that what
    // it sends next finds it.
    ReleaseBodyHold();
    if (closed_) return;
    const bool keep_alive = keep_alive_ && !core_->draining;
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>();
    res->version(version_);
    res->result(reply.status);
    res->keep_alive(keep_alive);
    if (!reply.content_type.empty()) res->set(bhttp::field::content_type, reply.content_type);
    if (reply.retry_after_s) res->set(bhttp::field::retry_after, std::to_string(*reply.retry_after_s));
    if (reply.inference_header_length) {
      res->set(kInferHeaderLength, std::to_string(*reply.inference_header_length));
    }
    res->body() = std::move(reply.body);
    res->prepare_payload();  // Content-Length on every response, empty bodies included
    if (head_) res->body().clear();  // the length of what GET would send, and no content
    Write(std::move(res), keep_alive);
  }

 private:
  void ReadHeader() {
    idle_ = true;
    // While draining, a request is still read and answered (with Connection: close): one
    // on a connection made meanwhile, or sent on a kept-alive one as the drain began, would
    // otherwise meet a closed connection and be lost to its client.
    if (core_->closing) return Close();
    if (buffer_.size() == 0 && buffer_.capacity() > kReadBufferBytes) {
      buffer_ = beast::flat_buffer();
      buffer_.reserve(kReadBufferBytes);
    }
    parser_.emplace();
    parser_->header_limit(kHeaderLimitBytes);
    parser_->body_limit(core_->options.max_body_bytes);
    ExpireIn(core_->options.idle_timeout);
    bhttp::async_read_header(socket_, buffer_, *parser_,
                             beast::bind_front_handler(&HttpSession::OnHeader, shared_from_this()));
  }

  void OnHeader(beast::error_code ec, size_t) {
    if (ec == bhttp::error::end_of_stream || ec == net::error::operation_aborted) {
      return Close();
    }
    idle_ = false;
    head_ = false;  // until this request's header says so
    BeginRequest();
    const auto& req = parser_->get();
    version_ = req.version() == 10 ? 10 : 11;
    if (ec == bhttp::error::body_limit) return RejectTooLarge();
    if (ec) {
      if (IsHttpError(ec)) return Reject(400, "malformed HTTP request: " + ec.message());
      return Close();  // the connection failed; there is no one to answer
    }
    keep_alive_ = req.keep_alive();
    if (auto origin = OriginForm(req.target())) parser_->get().target(*origin);
    // HEAD is GET without the content (RFC 9110 §9.3.2: every server supports both), but
    // for the rollout verdict, whose GET runs a measurement of seconds.
    head_ = req.method() == bhttp::verb::head &&
            !req.target().starts_with(beast::string_view("/v2/rollout/"));
    if (head_) parser_->get().method(bhttp::verb::get);
    if (auto [first, last] = req.equal_range(bhttp::field::transfer_encoding); first != last) {
      // An HTTP/1.0 message with one has faulty framing (RFC 9112 §6.1).
      if (version_ == 10) return Reject(400, "Transfer-Encoding in an HTTP/1.0 request");
      std::string codings;  // every field line, as one list
      for (auto field = first; field != last; ++field) {
        codings += (codings.empty() ? "" : ", ") + std::string(field->value());
      }
      unsigned status = 400;
      const std::string why = TransferEncodingRefusal(codings, &status);
      if (!why.empty()) return Reject(status, why);
    }
    if (auto length = parser_->content_length(); length && *length > core_->options.max_body_bytes) {
      return RejectTooLarge();  // decided on the header alone: the body is never read
    }
    // An HTTP/1.0 client knows no interim response: it would take the 100 for the answer.
    auto expect = req.find(bhttp::field::expect);
    if (version_ == 11 && expect != req.end() && beast::iequals(expect->value(), "100-continue")) {
      auto cont = std::make_shared<bhttp::response<bhttp::empty_body>>(bhttp::status::continue_, version_);
      bhttp::async_write(socket_, *cont,
                         [self = shared_from_this(), cont](beast::error_code ec, size_t) {
                           if (ec) return self->Close();
                           self->ReadBody();
                         });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    const uint64_t body = parser_->content_length().value_or(kBodyReadBytes);
    buffer_.reserve(buffer_.size() + std::min<uint64_t>(body, kBodyReadBytes));
    ExpireIn(core_->options.idle_timeout);
    // A small request's body usually came in the header's read. Parsed here, it is
    // handled at once; async_read would find it complete too, but answer through the
    // loop's queue, a pass through epoll_wait later (issue 11).
    beast::error_code ec;
    parser_->eager(true);
    while (!parser_->is_done() && buffer_.size() > 0) {
      const size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec == bhttp::error::need_more) {
        ec = {};
        break;
      }
      if (ec || used == 0) break;
    }
    if (!ec && !HoldReceived()) return RejectBusy();
    if (ec || parser_->is_done()) return OnBody(ec, 0);
    ReadBodySome();
  }

  // The body read a part at a time, each part charged to the bodies in flight as it comes:
  // a client that announces a large body and sends nothing holds nothing.
  void ReadBodySome() {
    bhttp::async_read_some(socket_, buffer_, *parser_,
                           beast::bind_front_handler(&HttpSession::OnBodySome, shared_from_this()));
  }

  void OnBodySome(beast::error_code ec, size_t) {
    if (!ec && !HoldReceived()) return RejectBusy();
    if (ec || parser_->is_done()) return OnBody(ec, 0);
    ReadBodySome();
  }

  // Takes what the body read so far has beyond what it holds; false when that would pass
  // the request bytes in flight (RequestBytes).
  bool HoldReceived() {
    const uint64_t have = parser_->get().body().size();
    if (have <= body_held_) return true;
    const uint64_t more = have - body_held_;
    if (!core_->request_bytes->TryTake(more)) return false;
    body_held_ += more;
    return true;
  }

  void OnBody(beast::error_code ec, size_t) {
    if (ec == bhttp::error::body_limit) return RejectTooLarge();  // chunked past the limit
    if (ec) {
      if (IsHttpError(ec)) {
        return Reject(400, "malformed HTTP request: " + ec.message());
      }
      return Close();
    }
    // The facade may take its time: no timeout while the reply is computed.
    deadline_ = Clock::time_point::max();
    core_->AwaitReply(id_, shared_from_this());
    auto in_flight = std::make_shared<InFlight>();
    in_flight_ = in_flight;
    bhttp::request<http::RequestBody> received = parser_->release();
    core_->router->Handle(
        http::Request(std::move(received.base()), std::move(received.body())),
        [core = core_, id = id_, in_flight](http::HttpReply reply) {
          in_flight->answered.store(true, std::memory_order_release);
          core->Deliver(id, std::move(reply));
        },
        std::shared_ptr<const std::atomic<bool>>(in_flight, &in_flight->client_gone));
    // A short model may have run on this thread, answered already (the reply is posted
    // to this loop): then there is nothing to watch. If the answer comes just after
    // this look, OnReply stops the watch.
    if (in_flight->answered.load(std::memory_order_acquire)) return;
    watching_ = true;
    WatchClient();
  }

  // While a request is in flight nothing reads the socket, so a client that hangs up
  // would go unnoticed until its reply is written. Waiting for readability (no read)
  // notices it: a peek that finds end-of-stream (or a reset) marks the request's flag,
  // and a request still queued then never reaches the model. A peek that finds bytes
  // is a pipelined request: the client is still there, and watching stops (it would
  // only wake again at once). A client that half-closes its side after sending and
  // still waits for the reply looks gone too; HTTP/1.1 clients do not do that.
  void WatchClient() {
    socket_.async_wait(tcp::socket::wait_read,
                       [self = shared_from_this(), generation = watch_generation_](
                           beast::error_code ec) { self->OnClientReadable(ec, generation); });
  }

  void OnClientReadable(beast::error_code ec, uint64_t generation) {
    if (!watching_ || generation != watch_generation_) return;  // the reply came first
    if (ec == net::error::operation_aborted) return;
    bool gone = static_cast<bool>(ec);
    if (!gone) {
      char byte = 0;
      const ssize_t n = ::recv(socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        return WatchClient();  // woken without data: wait again
      }
      gone = n <= 0;
    }
    watching_ = false;
    if (gone && in_flight_) in_flight_->client_gone.store(true, std::memory_order_relaxed);
  }

  void StopWatchingClient() {
    in_flight_.reset();
    if (!watching_) return;
    watching_ = false;
    ++watch_generation_;
    beast::error_code ignored;
    socket_.cancel(ignored);  // only the wait is outstanding while a reply is due
  }

  // Answers 503 to a request whose body, as read so far, would take the bodies in flight past
  // their bound; the connection closes (the rest of the body is not read).
  void RejectBusy() {
    keep_alive_ = false;
    const uint64_t read = parser_->get().body().size();
    http::HttpReply reply = http::ErrorReply(
        503, core_->request_bytes->Refusal("this one's first " + std::to_string(read) + " bytes"));
    reply.retry_after_s = 1;
    OnReply(std::move(reply));
  }

  void RejectTooLarge() {
    Reject(413, "request body exceeds the limit of " + std::to_string(core_->options.max_body_bytes) + " bytes");
  }

  // Answers and closes: the rest of the request cannot be trusted or is not wanted.
  void Reject(unsigned status, const std::string& message) {
    keep_alive_ = false;
    http::HttpReply reply = http::ErrorReply(status, message);
    OnReply(std::move(reply));
  }

  void Write(std::shared_ptr<bhttp::response<bhttp::string_body>> res, bool keep_alive) {
    ExpireIn(core_->options.idle_timeout);  // a client that never reads
    // Most replies fit in the socket's send buffer: written here (the socket does not
    // block), the loop goes straight back to reading. async_write would send at once
    // too, but answer through the loop's queue, a pass through epoll_wait later
    // (issue 11). What does not fit is left to async_write, from where this stopped.
    auto sr = std::make_shared<bhttp::response_serializer<bhttp::string_body>>(*res);
    beast::error_code ec;
    while (write_at_once_ && !ec && !sr->is_done()) bhttp::write_some(socket_, *sr, ec);
    if (write_at_once_ && ec != net::error::would_block) return OnWritten(ec, keep_alive);
    bhttp::async_write(socket_, *sr,
                       [self = shared_from_this(), res, sr, keep_alive](
                           beast::error_code ec, size_t) { self->OnWritten(ec, keep_alive); });
  }

  void OnWritten(beast::error_code ec, bool keep_alive) {
    EndRequest();
    if (ec || !keep_alive) return Close();
    ReadHeader();
  }

  void BeginRequest() {
    if (request_active_) return;
    request_active_ = true;
    core_->BeginRequest();
  }
  void ReleaseBodyHold() {
    core_->request_bytes->Release(body_held_);
    body_held_ = 0;
  }
  void EndRequest() {
    ReleaseBodyHold();
    if (!request_active_) return;
    request_active_ = false;
    core_->EndRequest();
  }

  // Graceful close: send FIN, then read and discard until the client closes (or the
  // linger timeout), so that unread request bytes do not turn our last response into
  // a connection reset on the client's side.
  void Close() {
    if (closed_) return;
    closed_ = true;
    EndRequest();
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    if (ec) {
      socket_.close(ec);
      return;
    }
    ExpireIn(kLingerTimeout);
    Discard();
  }

  void Discard() {
    socket_.async_read_some(net::buffer(discard_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) {
                                beast::error_code ignored;
                                self->socket_.close(ignored);
                                return;
                              }
                              self->Discard();
                            });
  }

  // Timeouts. The operation in progress must end by deadline_ (max while the facade
  // computes a reply). One timer per connection checks it: moving a deadline later only
  // stores it, and the timer, when it fires early, waits again for the rest. Beast's
  // basic_stream instead set and cancelled a timer around every read and write, two
  // timerfd_settime calls a request (strace), 3.7 us of a 57 us round trip at
  // concurrency 1 (issue 11).
  void ExpireIn(Clock::duration d) {
    deadline_ = Clock::now() + d;
    if (deadline_ < timer_.expiry()) ArmTimer(deadline_);  // sooner: the linger timeout
  }

  void ArmTimer(Clock::time_point when) {
    timer_.expires_at(when);  // a wait still pending ends with operation_aborted
    timer_.async_wait([weak = weak_from_this()](beast::error_code ec) {
      auto self = weak.lock();
      if (!ec && self) self->OnTimer();
    });
  }

  void OnTimer() {
    if (!socket_.is_open()) return;
    const auto now = Clock::now();
    if (deadline_ > now) {
      // Early: the deadline moved on, or no operation is timed (a reply is computed).
      return ArmTimer(deadline_ == Clock::time_point::max() ? now + core_->options.idle_timeout
                                                            : deadline_);
    }
    // Time is up: the operation in progress ends with an error and the connection closes.
    beast::error_code ignored;
    socket_.close(ignored);
  }

  Socket socket_;
  Timer timer_;
  Clock::time_point deadline_ = Clock::time_point::max();
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<http::RequestBody>> parser_;
  std::shared_ptr<ServerCore> core_;
  const uint64_t id_;
  // All below: touched only on the session's event loop.
  bool idle_ = true;             // waiting for the next request's header
  bool head_ = false;            // the request in progress is a HEAD: its reply has no content
  bool request_active_ = false;  // counted in core_->in_flight
  uint64_t body_held_ = 0;       // its body's share of core_->request_bytes
  bool closed_ = false;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool write_at_once_ = false;  // the socket does not block: Write tries before async_write
  std::array<char, 4096> discard_{};
  // The request in flight: whether its client has gone (the request carries this flag
  // to the facade) and whether the facade has answered (set on the facade's thread).
  struct InFlight {
    std::atomic<bool> client_gone{false};
    std::atomic<bool> answered{false};
  };
  std::shared_ptr<InFlight> in_flight_;  // and whether its socket is watched:
  bool watching_ = false;
  uint64_t watch_generation_ = 0;  // a wait from an earlier request finds it changed
};

void ServerCore::Deliver(uint64_t id, http::HttpReply reply) {
  std::shared_ptr<HttpSession> session;
  {
    std::lock_guard lock(mu);
    if (!io_alive) return;
    auto it = pending.find(id);
    if (it == pending.end()) return;
    session = std::move(it->second);
    pending.erase(it);
    auto executor = session->executor();
    if (!executor.running_in_this_thread()) {
      // The posted handler holds the only reference, so the session is never destroyed
      // here, under the lock.
      net::post(executor, [session = std::move(session), reply = std::move(reply)]() mutable {
        session->OnReply(std::move(reply));
      });
      return;
    }
  }
  // Answered on the session's own event loop, from within its OnBody: every endpoint but
  // inference, and a model run on this thread. The reply is written now rather than
  // posted, which would cost the loop a pass through epoll_wait before it (issue 11).
  // That loop is running, so it cannot be destroyed meanwhile.
  session->OnReply(std::move(reply));
}

}  // namespace

class HttpServerImpl {
 public:
  HttpServerImpl(server::InferenceServer& server, const HttpOptions& options)
      : verdict_(options.rollout_verdict),
        iocs_(MakeEventLoops(std::max(options.threads, 1))),
        acceptor_(net::make_strand(*iocs_[0])),
        core_(std::make_shared<ServerCore>(options)) {
    core_->router =
        std::make_unique<http::EndpointRouter>(server, options.max_body_bytes, verdict_);
  }

  ~HttpServerImpl() { Shutdown(std::chrono::milliseconds(0)); }

  Status Listen() {
    beast::error_code ec;
    const auto address = net::ip::make_address(core_->options.address, ec);
    if (ec) return InvalidArgument("invalid HTTP address '" + core_->options.address + "': " + ec.message());
    if (core_->options.port < 0 || core_->options.port > 65535) {
      return InvalidArgument("invalid HTTP port " + std::to_string(core_->options.port));
    }
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(core_->options.port));
    const std::string where = core_->options.address + ":" + std::to_string(core_->options.port);
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) return Unavailable("cannot listen for HTTP on " + where + ": " + ec.message());
    port_ = acceptor_.local_endpoint().port();
    // The verdict endpoint measures this server through its own address: loopback for a
    // wildcard one.
    std::string host = core_->options.address;
    if (address.is_unspecified()) host = address.is_v6() ? "::1" : "127.0.0.1";
    verdict_.SetCandidate("http://" + (address.is_v6() ? "[" + host + "]" : host) + ":" +
                          std::to_string(port_));
    return Status::Ok();
  }

  // Starts the event loops' threads. At the thread limit, RESOURCE_EXHAUSTED with none left
  // running.
  Status Run() {
    Accept();
    return StartThreads([this] { StartLoopThreads(); },
                        [this] {
                          for (auto& loop : iocs_) loop->stop();
                          for (auto& t : threads_) t.join();
                          threads_.clear();
                        },
                        "the HTTP front end's threads");
  }

  void StartLoopThreads() {
    const int n = std::max(core_->options.threads, 1);
    threads_.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([loop = iocs_[static_cast<size_t>(i)].get(), i] {
        NameThisThread("fp-http/" + std::to_string(i));
        // A handler that throws (an allocation that failed) loses its connection, which
        // closes as the handler's hold on it goes, not the process.
        while (true) {
          try {
            loop->run();
            return;
          } catch (const std::exception& e) {
            log::Error(std::string("HTTP: a connection failed and was closed: ") + e.what());
          }
        }
      });
    }
    running_ = true;
  }

  int port() const { return port_; }

  void BeginDrain() {
    // What is answered from now on carries Connection: close, so that a client takes its next
    // request to a server that still accepts, instead of meeting this one's refusals.
    core_->draining = true;
  }

  void Shutdown(std::chrono::milliseconds grace) {
    std::lock_guard lock(lifecycle_mu_);
    if (shut_down_) return;
    shut_down_ = true;
    const auto deadline = std::chrono::steady_clock::now() + grace;
    StopAcceptingLocked();
    core_->draining = true;
    core_->closing = true;
    if (running_) {
      for (auto& session : core_->LiveSessions()) session->CloseIfIdle();
      core_->WaitNoneInFlight(deadline);
      for (auto& loop : iocs_) loop->stop();
      for (auto& t : threads_) t.join();
      threads_.clear();
    }
    // Released here, outside the core's lock, while the io_context still exists.
    { auto abandoned = core_->StopDelivering(); }
    for (auto& session : core_->LiveSessions()) session->CloseSocketNow();
    // A verdict still measuring finds this server's sockets closed and ends; its reply is
    // dropped.
    verdict_.Stop();
  }

 private:
  void StopAcceptingLocked() {
    if (accept_stopped_) return;
    accept_stopped_ = true;
    if (!running_) {
      beast::error_code ec;
      acceptor_.close(ec);
      return;
    }
    // The acceptor belongs to its strand; close it there and wait, so that no
    // connection is accepted once this returns.
    std::promise<void> closed;
    net::post(acceptor_.get_executor(), [this, &closed] {
      beast::error_code ec;
      acceptor_.close(ec);
      accept_retry_.cancel();
      closed.set_value();
    });
    closed.get_future().wait();
  }

  void Accept() {
    // Connections are dealt to the event loops in turn; next_loop_ is touched only on the
    // acceptor's strand.
    net::io_context& loop = *iocs_[next_loop_++ % iocs_.size()];
    acceptor_.async_accept(loop.get_executor(), [this](beast::error_code ec, Socket socket) {
      if (!acceptor_.is_open()) return;
      if (ec) {
        const auto wait = accept_failures_.Failed(ec.value(), ec.message());
        if (wait.count() == 0) return Accept();
        accept_retry_.expires_after(wait);
        accept_retry_.async_wait([this](beast::error_code wait_ec) {
          if (!wait_ec && acceptor_.is_open()) Accept();
        });
        return;
      }
      accept_failures_.Accepted();
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);  // small replies must not wait for Nagle
      const uint64_t id = core_->next_session_id++;
      auto session = std::make_shared<HttpSession>(std::move(socket), core_, id);
      core_->AddSession(id, session);
      session->Start();
      Accept();
    });
  }

  // One event loop per thread, each connection on one of them for its whole life. One
  // io_context shared by several threads costs a cross-thread wake-up (an eventfd
  // interrupt of the thread in epoll_wait, and contention on the context's lock) for
  // nearly every handler a request runs, which at concurrency 1 is most of the HTTP
  // front end's latency; a loop per thread wakes another thread only when the facade
  // answers from its own thread. Kept running by work guards until Shutdown stops them.
  static std::vector<std::unique_ptr<net::io_context>> MakeEventLoops(int n) {
    std::vector<std::unique_ptr<net::io_context>> loops;
    for (int i = 0; i < n; ++i) loops.push_back(std::make_unique<net::io_context>(1));
    return loops;
  }

  // Its thread may run a measurement that replies through core_ and talks to this server:
  // Shutdown stops it once this server's sockets are closed (which ends such talk).
  http::RolloutVerdictEndpoint verdict_;
  // Destroyed last (but for verdict_, stopped by then): every socket and queued handler
  // belongs to one of them.
  std::vector<std::unique_ptr<net::io_context>> iocs_;
  std::vector<net::executor_work_guard<net::io_context::executor_type>> work_ = [this] {
    std::vector<net::executor_work_guard<net::io_context::executor_type>> guards;
    for (auto& loop : iocs_) guards.push_back(net::make_work_guard(*loop));
    return guards;
  }();
  size_t next_loop_ = 0;
  tcp::acceptor acceptor_;
  // Both used on the acceptor's strand only.
  net::steady_timer accept_retry_{acceptor_.get_executor()};
  AcceptFailures accept_failures_{"HTTP"};
  std::shared_ptr<ServerCore> core_;
  std::vector<std::thread> threads_;
  int port_ = 0;
  std::mutex lifecycle_mu_;
  bool running_ = false;         // guarded by lifecycle_mu_ after Run
  bool accept_stopped_ = false;  // guarded by lifecycle_mu_
  bool shut_down_ = false;       // guarded by lifecycle_mu_
};

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(server::InferenceServer& server,
                                                        const HttpOptions& options) {
  if (options.max_body_bytes == 0) return InvalidArgument("HTTP max_body_bytes must be positive");
  std::unique_ptr<HttpServerImpl> impl;
  try {
    impl = std::make_unique<HttpServerImpl>(server, options);
  } catch (const std::system_error& e) {
    return ThreadLimitReached(e, "the HTTP front end's rollout-verdict thread");
  }
  FASTPATH_RETURN_IF_ERROR(impl->Listen());
  FASTPATH_RETURN_IF_ERROR(impl->Run());
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<HttpServerImpl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;  // the impl's destructor shuts down
int HttpServer::port() const { return impl_->port(); }
void HttpServer::BeginDrain() { impl_->BeginDrain(); }
void HttpServer::Shutdown(std::chrono::milliseconds grace) { impl_->Shutdown(grace); }

}  // namespace fastpath::frontend
