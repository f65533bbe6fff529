// The gRPC port's listening socket, accepted by fastpath rather than by gRPC. Each connection is
// handed to the server (grpc::AddInsecureChannelFromFd), which serves it as one it had accepted.
//
// Why not gRPC's own listener: in gRPC 1.51 (Debian 12's), the first accept that fails for a
// reason other than a reset connection stops it for good. Out of descriptors once, the port
// stays open, its queue fills, and no call is answered again (grpc/grpc#16058, #20418), while
// the HTTP port answers the health checks. This listener says so, waits, and tries again
// (fastpath/common/open_files.h), as the HTTP front end's does.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "fastpath/common/open_files.h"
#include "fastpath/common/status.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace fastpath::frontend::grpc_internal {

class GrpcListener {
 public:
  // Binds and listens on `address` (an IP literal) and `port` (0: an ephemeral one).
  [[nodiscard]] static StatusOr<std::unique_ptr<GrpcListener>> Listen(const std::string& address,
                                                                      int port);
  ~GrpcListener();  // Stop()s
  GrpcListener(const GrpcListener&) = delete;
  GrpcListener& operator=(const GrpcListener&) = delete;

  int port() const { return port_; }

  // Accepts on a thread of its own and hands every connection to `server`, which must be
  // started and outlive Stop().
  Status Start(grpc::Server* server);

  // Closes the listening socket. Once it returns no connection is handed over; connections
  // still in the listen queue are reset. Idempotent.
  void Stop();

  // Shutdown's step before gRPC's own (GrpcServer::Shutdown): waits until every connection
  // handed over and still open has had each byte sent acknowledged by its client, or until
  // `deadline`. gRPC closes a connection the moment its last call ends after its GOAWAY,
  // shutting the socket while the client's last frames (a window update, a ping's answer)
  // still come in: the kernel answers those with a reset and throws away what was still
  // queued to send, the last answers with it. Once delivered, they are safe from that.
  void WaitDelivered(std::chrono::steady_clock::time_point deadline);

 private:
  GrpcListener() = default;
  void Accept();

  boost::asio::io_context io_{1};
  boost::asio::ip::tcp::acceptor acceptor_{io_};
  boost::asio::steady_timer retry_{io_};
  AcceptFailures failures_{"gRPC"};  // used on the thread only
  grpc::Server* server_ = nullptr;
  int port_ = 0;
  std::thread thread_;
  // Each descriptor handed over, with its socket's cookie (SO_COOKIE, unique while the
  // system runs): after gRPC closes it the number may name another file, which the cookie
  // tells apart. A number reused by a new connection replaces its entry.
  std::mutex handed_mu_;
  std::unordered_map<int, uint64_t> handed_;  // guarded by handed_mu_
};

}  // namespace fastpath::frontend::grpc_internal
