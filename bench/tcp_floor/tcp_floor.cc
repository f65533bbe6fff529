// The floor under any server's round trip on this machine: two threads of one process
// ping-pong N bytes over a loopback TCP connection (TCP_NODELAY), blocking reads, or
// (--spin) reads that never sleep. The difference between the two is what the thread
// wake-ups cost, which on a virtual machine can be most of a small request's latency.
// Usage: tcp_floor [bytes] [--spin]; prints p50 and p99 of 20000 round trips.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

bool spin = false;

// Reads exactly n bytes; false when the peer has closed.
bool ReadAll(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t got = recv(fd, p, n, spin ? MSG_DONTWAIT : 0);
    if (got == 0) return false;
    if (got < 0) {
      if (spin && errno == EAGAIN) continue;
      return false;
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

void NoDelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--spin") == 0) {
      spin = true;
    } else {
      bytes = std::strtoul(argv[i], nullptr, 10);
    }
  }
  if (bytes == 0) {
    std::fprintf(stderr, "usage: tcp_floor [bytes] [--spin]\n");
    return 2;
  }
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("tcp_floor: listen");
    return 1;
  }
  std::thread echo([&] {
    const int fd = accept(listener, nullptr, nullptr);
    NoDelay(fd);
    std::vector<char> buf(bytes);
    while (ReadAll(fd, buf.data(), bytes)) {
      if (write(fd, buf.data(), bytes) != static_cast<ssize_t>(bytes)) break;
    }
    close(fd);
  });
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::perror("tcp_floor: connect");
    return 1;
  }
  NoDelay(fd);
  std::vector<char> buf(bytes, 'x');
  std::vector<double> us;
  constexpr int kWarmup = 2000, kRounds = 20000;
  for (int i = 0; i < kWarmup + kRounds; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (write(fd, buf.data(), bytes) != static_cast<ssize_t>(bytes) || !ReadAll(fd, buf.data(), bytes)) {
      std::perror("tcp_floor: round trip");
      return 1;
    }
    if (i >= kWarmup) {
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    }
  }
  close(fd);
  echo.join();
  std::sort(us.begin(), us.end());
  std::printf("%zu bytes, %s reads: p50 %.1f us, p99 %.1f us\n", bytes, spin ? "spinning" : "blocking",
              us[us.size() / 2], us[us.size() * 99 / 100]);
  return 0;
}
