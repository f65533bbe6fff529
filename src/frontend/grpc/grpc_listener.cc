#include "grpc_listener.h"

#include <fcntl.h>
#include <grpcpp/server.h>
#include <grpcpp/server_posix.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <boost/asio/post.hpp>
#include <iterator>

#include "fastpath/common/thread_name.h"
#include "fastpath/common/thread_start.h"

namespace fastpath::frontend::grpc_internal {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// The socket's cookie, or 0 when `fd` is no socket (or the kernel predates SO_COOKIE).
uint64_t SocketCookie(int fd) {
#ifdef SO_COOKIE
  uint64_t cookie = 0;
  socklen_t length = sizeof(cookie);
  if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &length) == 0) return cookie;
#else
  (void)fd;
#endif
  return 0;
}

}  // namespace

StatusOr<std::unique_ptr<GrpcListener>> GrpcListener::Listen(const std::string& address, int port) {
  boost::system::error_code ec;
  const auto ip = net::ip::make_address(address, ec);
  if (ec) return InvalidArgument("invalid gRPC address '" + address + "': " + ec.message());
  const std::string where = address + ":" + std::to_string(port);
  std::unique_ptr<GrpcListener> out(new GrpcListener());
  const tcp::endpoint endpoint(ip, static_cast<unsigned short>(port));
  tcp::acceptor& acceptor = out->acceptor_;
  acceptor.open(endpoint.protocol(), ec);
  // SO_REUSEADDR only: gRPC's own listener would set SO_REUSEPORT, which lets a second server
  // (or a stale one) bind the same port silently and split the traffic.
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return Unavailable("cannot listen for gRPC on " + where + ": " + ec.message());
  out->port_ = acceptor.local_endpoint().port();
  return out;
}

GrpcListener::~GrpcListener() { Stop(); }

Status GrpcListener::Start(grpc::Server* server) {
  server_ = server;
  Accept();
  return StartThreads(
      [this] {
        thread_ = std::thread([this] {
          NameThisThread("fp-grpc-accept");
          io_.run();
        });
      },
      [] {}, "the gRPC front end's accepting thread");
}

void GrpcListener::Stop() {
  if (!thread_.joinable()) {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    return;
  }
  // On the thread, between two handlers: a connection being handed over is handed over whole.
  net::post(io_, [this] {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    retry_.cancel();
  });
  thread_.join();  // the loop ends once nothing is pending
}

void GrpcListener::Accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    if (!acceptor_.is_open()) return;
    if (ec) {
      const auto wait = failures_.Failed(ec.value(), ec.message());
      if (wait.count() == 0) return Accept();
      retry_.expires_after(wait);
      retry_.async_wait([this](boost::system::error_code wait_ec) {
        if (!wait_ec && acceptor_.is_open()) Accept();
      });
      return;
    }
    failures_.Accepted();
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);  // as gRPC's listener sets it
    const int fd = socket.release(ignored);
    if (fd >= 0) {
      // gRPC's endpoint expects a non-blocking socket, as its own accept4 makes one.
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
      if (const uint64_t cookie = SocketCookie(fd); cookie != 0) {
        std::lock_guard lock(handed_mu_);
        handed_[fd] = cookie;
      }
      grpc::AddInsecureChannelFromFd(server_, fd);  // takes the descriptor
    }
    Accept();
  });
}

void GrpcListener::WaitDelivered(std::chrono::steady_clock::time_point deadline) {
  std::lock_guard lock(handed_mu_);
  // Closed since (by the client, or idle): the number names another file, or none.
  for (auto it = handed_.begin(); it != handed_.end();) {
    it = SocketCookie(it->first) == it->second ? std::next(it) : handed_.erase(it);
  }
  while (std::chrono::steady_clock::now() < deadline) {
    bool delivered = true;
    for (const auto& [fd, cookie] : handed_) {
      // gRPC may close it meanwhile and the number name another file: looked at only while
      // it is the same socket, before and after.
      if (SocketCookie(fd) != cookie) continue;
      int unacknowledged = 0;
      if (ioctl(fd, SIOCOUTQ, &unacknowledged) == 0 && unacknowledged > 0 &&
          SocketCookie(fd) == cookie) {
        delivered = false;
        break;
      }
    }
    if (delivered) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace fastpath::frontend::grpc_internal
