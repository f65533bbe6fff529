// `fastpath bench`'s HTTP closed loop (one thread, one io_context, a keep-alive connection per
// request in flight) against a scripted HTTP/1.1 server: every answer reported once and
// replaced by the next request on the same connection, an error status reported with the
// server's text, a reconnect when the server closes, a port with nothing behind it, and a
// server that never answers, which must not keep the loop from returning once stopped and
// whose unanswered requests are reported, and one that answers slowly, which is waited for.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fastpath/bench/client.h"
#include "fastpath/bench/load_generator.h"

namespace fastpath::bench {
namespace {

// An HTTP/1.1 server on a loopback port that reads each request whole (head and
// Content-Length body) and answers it as its mode says.
class ScriptedServer {
 public:
  enum class Mode {
    kOk,           // 200, keep-alive
    kUnavailable,  // 503 with a text, keep-alive
    kOkThenClose,  // 200 with "Connection: close", then closes
    kSilent,       // reads, never answers an inference (a GET, such as statistics, gets 404)
    kSlow,         // 200, keep-alive, 1.2 s after each request
  };

  explicit ScriptedServer(Mode mode) : mode_(mode) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(listener_, 16) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot listen on loopback: " << std::strerror(errno);
    }
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }

  ~ScriptedServer() {
    shutdown(listener_, SHUT_RDWR);  // wakes accept()
    acceptor_.join();
    close(listener_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : fds_) shutdown(fd, SHUT_RDWR);  // wakes each connection's read()
    }
    for (auto& t : connections_) t.join();
    for (int fd : fds_) close(fd);
  }

  int port() const { return port_; }
  int accepted() const { return accepted_.load(); }
  int requests() const { return requests_.load(); }

 private:
  void Accept() {
    while (true) {
      const int fd = accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      ++accepted_;
      std::lock_guard<std::mutex> lock(mu_);
      fds_.push_back(fd);
      connections_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  // Reads requests off `fd` until the peer closes it (or the destructor shuts it down).
  void Serve(int fd) {
    std::string in;
    char chunk[65536];
    while (true) {
      const size_t head_end = in.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        const size_t cl = in.find("Content-Length: ");
        const size_t body = cl == std::string::npos || cl > head_end
                                ? 0
                                : std::stoul(in.substr(cl + std::strlen("Content-Length: ")));
        if (in.size() >= head_end + 4 + body) {
          const bool get = in.starts_with("GET ");
          in.erase(0, head_end + 4 + body);
          if (get) {
            const std::string not_found = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
            if (write(fd, not_found.data(), not_found.size()) < 0) return;
            continue;
          }
          ++requests_;
          if (!Answer(fd)) return;
          continue;
        }
      }
      const ssize_t n = read(fd, chunk, sizeof(chunk));
      if (n <= 0) return;
      in.append(chunk, static_cast<size_t>(n));
    }
  }

  // False once the connection is to be left alone.
  bool Answer(int fd) {
    std::string out;
    switch (mode_) {
      case Mode::kOk:
        out = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
        break;
      case Mode::kUnavailable:
        out =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 24\r\n\r\n"
            "{\"error\":\"model busy\"}\r\n";
        break;
      case Mode::kOkThenClose:
        out = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}";
        break;
      case Mode::kSilent:
        return true;
      case Mode::kSlow:
        std::this_thread::sleep_for(std::chrono::milliseconds(1200));
        out = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
        break;
    }
    if (write(fd, out.data(), out.size()) != static_cast<ssize_t>(out.size())) return false;
    if (mode_ == Mode::kOkThenClose) {
      shutdown(fd, SHUT_WR);
      return false;
    }
    return true;
  }

  const Mode mode_;
  int listener_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> connections_;
  std::atomic<int> accepted_{0};
  std::atomic<int> requests_{0};
};

struct Answers {
  int ok = 0;
  std::map<std::string, int> errors;  // by kind
  std::map<std::string, std::string> messages;
  int total() const {
    int n = ok;
    for (const auto& [kind, count] : errors) n += count;
    return n;
  }
};

// A target on 127.0.0.1:`port` for model "m", with one FP32 [1, 4] request prepared.
std::unique_ptr<Target> PreparedTarget(int port) {
  auto target = MakeHttpTarget({"127.0.0.1", port}, Encoding::kBinary, "m", "");
  EXPECT_TRUE(target.ok()) << target.status().ToString();
  Tensor input{"INPUT0", DataType::kFp32, {1, 4}, std::string(16, '\0')};
  EXPECT_TRUE((*target)->Prepare({{input}}).ok());
  return std::move(target).value();
}

// Runs a closed loop of `concurrency` against 127.0.0.1:`port` until `stop_after` answers
// came back (or, with stop_after 0, at once), and returns what it reported.
Answers RunLoop(int port, int64_t concurrency, int stop_after) {
  auto target = PreparedTarget(port);
  auto loop = target->NewClosedLoop(concurrency);
  EXPECT_TRUE(loop.ok() && *loop != nullptr);
  Answers answers;
  std::atomic<bool> stop{stop_after == 0};
  (*loop)->Run(stop, [&](const InferOutcome& outcome, int64_t latency_ns) {
    EXPECT_GT(latency_ns, 0);
    if (outcome.ok) {
      ++answers.ok;
    } else {
      ++answers.errors[outcome.kind];
      answers.messages[outcome.kind] = outcome.message;
    }
    if (answers.total() >= stop_after) stop = true;
  });
  return answers;
}

TEST(HttpClosedLoopTest, KeepsOneConnectionPerRequestInFlightAndReportsEveryAnswer) {
  ScriptedServer server(ScriptedServer::Mode::kOk);
  const Answers a = RunLoop(server.port(), 3, 300);
  EXPECT_GE(a.ok, 300);
  EXPECT_TRUE(a.errors.empty());
  EXPECT_EQ(server.accepted(), 3);
  // Stopping waits for what is in flight: every request sent was answered and reported.
  EXPECT_EQ(server.requests(), a.total());
}

TEST(HttpClosedLoopTest, AnErrorStatusIsReportedWithTheServersTextAndTheConnectionKept) {
  ScriptedServer server(ScriptedServer::Mode::kUnavailable);
  const Answers a = RunLoop(server.port(), 2, 50);
  EXPECT_EQ(a.ok, 0);
  EXPECT_EQ(a.errors.size(), 1u);
  EXPECT_GE(a.errors.at("http_503"), 50);
  EXPECT_NE(a.messages.at("http_503").find("model busy"), std::string::npos);
  EXPECT_EQ(server.accepted(), 2);
  EXPECT_EQ(server.requests(), a.total());
}

TEST(HttpClosedLoopTest, ReconnectsWhenTheServerClosesAfterAnAnswer) {
  ScriptedServer server(ScriptedServer::Mode::kOkThenClose);
  const Answers a = RunLoop(server.port(), 2, 40);
  EXPECT_TRUE(a.errors.empty()) << a.messages.begin()->second;
  EXPECT_GE(a.ok, 40);
  EXPECT_EQ(server.accepted(), server.requests());
  EXPECT_EQ(server.requests(), a.total());
}

TEST(HttpClosedLoopTest, NothingListeningIsAConnectErrorNamingTheAddress) {
  int port = 0;
  { port = ScriptedServer(ScriptedServer::Mode::kOk).port(); }  // closed again
  const Answers a = RunLoop(port, 2, 4);
  EXPECT_EQ(a.ok, 0);
  ASSERT_EQ(a.errors.count("connect"), 1u);
  EXPECT_GE(a.errors.at("connect"), 4);
  EXPECT_NE(a.messages.at("connect").find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << a.messages.at("connect");
}

// Runs a closed loop of 2 against a server that never answers, stopped `after` both requests
// arrived, and returns what it reported.
std::vector<InferOutcome> StopSilentLoop(std::chrono::milliseconds after) {
  ScriptedServer server(ScriptedServer::Mode::kSilent);
  auto target = PreparedTarget(server.port());
  auto loop = target->NewClosedLoop(2);
  EXPECT_TRUE(loop.ok());
  std::atomic<bool> stop{false};
  std::vector<InferOutcome> reported;
  std::thread stopper([&] {
    while (server.requests() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(after);
    stop = true;
  });
  (*loop)->Run(stop, [&](const InferOutcome& outcome, int64_t) { reported.push_back(outcome); });
  stopper.join();
  EXPECT_EQ(server.requests(), 2);
  return reported;
}

// Stopped while every request has waited on a server that never answers for longer than the
// patience (a second): the loop gives up on them (after a second more with nothing back) and
// returns, reporting each as unanswered.
TEST(HttpClosedLoopTest, RequestsAServerNeverAnsweredAreReportedUnansweredOnceStopped) {
  const std::vector<InferOutcome> reported = StopSilentLoop(std::chrono::milliseconds(1300));
  ASSERT_EQ(reported.size(), 2u);
  for (const InferOutcome& outcome : reported) {
    EXPECT_FALSE(outcome.ok);
    EXPECT_EQ(outcome.kind, kUnanswered);
    EXPECT_NE(outcome.message.find("stopped answering"), std::string::npos) << outcome.message;
  }
}

// Stopped just after they were sent, the same requests are given up on without a report:
// a batcher may hold requests for company that a stopped run no longer sends.
TEST(HttpClosedLoopTest, RequestsSentJustBeforeTheStopAreGivenUpOnWithoutAReport) {
  EXPECT_TRUE(StopSilentLoop(std::chrono::milliseconds(0)).empty());
}

// A server that answers, slowly: once stopped, the loop waits for what is in flight as long
// as twice the slowest answer of the run, not just a second, so no answer is lost.
TEST(HttpClosedLoopTest, AnswersSlowerThanTheBasePatienceAreWaitedFor) {
  ScriptedServer server(ScriptedServer::Mode::kSlow);
  auto target = PreparedTarget(server.port());
  auto loop = target->NewClosedLoop(1);
  ASSERT_TRUE(loop.ok());
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    // The first answer is back and the second request in flight.
    while (server.requests() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    stop = true;
  });
  Answers a;
  (*loop)->Run(stop, [&](const InferOutcome& outcome, int64_t) {
    if (outcome.ok) {
      ++a.ok;
    } else {
      ++a.errors[outcome.kind];
    }
  });
  stopper.join();
  EXPECT_EQ(a.ok, 2);
  EXPECT_TRUE(a.errors.empty());
}

// A point measured against a server that stopped answering: what it left unanswered counts
// as errors of the point, so that it cannot read as a quiet one (no requests, no errors).
TEST(HttpClosedLoopTest, APointAgainstAServerThatStoppedAnsweringCountsItsUnansweredRequests) {
  ScriptedServer server(ScriptedServer::Mode::kSilent);
  auto target = PreparedTarget(server.port());
  MeasureOptions options;
  options.warmup = std::chrono::milliseconds(100);
  options.window = std::chrono::milliseconds(700);  // stuck past the patience before the end
  options.max_trials = 2;
  auto point = MeasureConcurrency(*target, 3, options);
  ASSERT_TRUE(point.ok()) << point.status().ToString();
  EXPECT_EQ(point->requests, 0u);
  EXPECT_EQ(point->errors, 3u);
  EXPECT_EQ(point->errors_by_kind.at(kUnanswered), 3u);
  EXPECT_EQ(point->error_samples.count(kUnanswered), 1u);
}

}  // namespace
}  // namespace fastpath::bench
