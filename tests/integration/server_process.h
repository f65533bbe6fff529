// The real `fastpath serve` binary as a child process: started on port 0 with a
// temporary repository, found through its --port-file, stopped with SIGTERM. The tests
// talk to it only over loopback sockets, as a user's client would.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace fastpath::integration {

struct ServeOptions {
  std::filesystem::path repository;
  // Appended to `fastpath serve --model-repository R --http-port 0 --grpc-port 0
  // --port-file F --host 127.0.0.1`.
  std::vector<std::string> extra_args;
  // "NAME=VALUE" entries for the child's environment, on top of this process's: an entry
  // replaces a variable of the same name, as `env NAME=VALUE fastpath ...` would.
  std::vector<std::string> environment = {};
  // Wait for /v2/health/ready to answer 200; otherwise only for /v2/health/live.
  bool wait_ready = true;
  // A command that runs the binary, put before it: an absolute path, then its arguments, e.g.
  // {"/usr/bin/prlimit", "--nofile=48:96", "--"}. It must exec the binary (keep its pid).
  std::vector<std::string> command_prefix = {};
};

class ServerProcess {
 public:
  // `work_dir` holds the port file and the server's log; it must outlive the process.
  explicit ServerProcess(std::filesystem::path work_dir) : work_dir_(std::move(work_dir)) {}
  ~ServerProcess();  // SIGKILLs a process that is still running (a test already failed)
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Spawns the binary and waits until it listens (and is ready, if asked).
  ::testing::AssertionResult Start(const ServeOptions& options);

  // Sends SIGTERM and waits for the exit; succeeds only on exit status 0. After
  // `timeout` the process is SIGKILLed and the result is a failure.
  ::testing::AssertionResult Stop(std::chrono::seconds timeout = std::chrono::seconds(90));

  // Sends SIGTERM without waiting; pair with Wait().
  void Terminate();
  ::testing::AssertionResult Wait(std::chrono::seconds timeout = std::chrono::seconds(90));

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  int http_port() const { return http_port_; }
  int grpc_port() const { return grpc_port_; }
  // 0 when the server serves no metrics (--allow-metrics false).
  int metrics_port() const { return metrics_port_; }
  std::string grpc_target() const { return "127.0.0.1:" + std::to_string(grpc_port_); }

  // Resident set size from /proc/<pid>/status, in KiB; -1 when unreadable.
  long RssKiB() const;
  // The last `max_bytes` of the server's stderr, for failure messages.
  std::string LogTail(size_t max_bytes = 4000) const;
  std::filesystem::path log_path() const { return work_dir_ / "fastpath.log"; }

 private:
  std::filesystem::path work_dir_;
  pid_t pid_ = -1;
  int http_port_ = 0;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
};

// The flags every test passes; kept in one place so that the binary's interface is
// exercised the same way everywhere.
std::string FastpathBinary();

}  // namespace fastpath::integration
