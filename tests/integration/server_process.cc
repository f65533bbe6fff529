#include "server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "http_client.h"

extern char** environ;

namespace fastpath::integration {
namespace {

using Clock = std::chrono::steady_clock;

// Polling, not sleeping for a fixed time: the tests wait for a state, never for a
// duration, and this interval only bounds how quickly a state change is noticed.
constexpr auto kPollInterval = std::chrono::milliseconds(20);
// Loading every tiny test model takes well under a second; this is only the point at
// which a hung start-up is declared a failure.
constexpr auto kStartTimeout = std::chrono::seconds(120);

// This process's environment with `assignments` ("NAME=VALUE") applied on top, as
// `env NAME=VALUE ...` (fakes/run_command.h) applies them: a later entry replaces an
// earlier one of the same name.
std::vector<std::string> ChildEnvironment(const std::vector<std::string>& assignments) {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) out.emplace_back(*e);
  for (const std::string& assignment : assignments) {
    const size_t equals = assignment.find('=');
    const std::string name =  // "NAME="
        equals == std::string::npos ? assignment + "=" : assignment.substr(0, equals + 1);
    bool replaced = false;
    for (std::string& entry : out) {
      if (entry.rfind(name, 0) == 0) {
        entry = assignment;
        replaced = true;
      }
    }
    if (!replaced) out.push_back(assignment);
  }
  return out;
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "wait status " + std::to_string(status);
}

}  // namespace

std::string FastpathBinary() { return FASTPATH_BINARY; }

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

::testing::AssertionResult ServerProcess::Start(const ServeOptions& options) {
  const std::filesystem::path port_file = work_dir_ / "ports";
  std::filesystem::remove(port_file);
  std::vector<std::string> args = {FastpathBinary(),
                                   "serve",
                                   "--model-repository",
                                   options.repository.string(),
                                   "--host",
                                   "127.0.0.1",
                                   "--http-port",
                                   "0",
                                   "--grpc-port",
                                   "0",
                                   "--metrics-port",
                                   "0",
                                   "--port-file",
                                   port_file.string()};
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  args.insert(args.begin(), options.command_prefix.begin(), options.command_prefix.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> environment = ChildEnvironment(options.environment);
  std::vector<char*> envp;
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const std::string log = log_path().string();
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return ::testing::AssertionFailure() << "posix_spawn " << argv[0] << ": " << strerror(rc);
  }
  pid_ = pid;

  const auto deadline = Clock::now() + kStartTimeout;
  while (true) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return ::testing::AssertionFailure()
             << "fastpath exited during start-up (" << DescribeWaitStatus(status)
             << "); log:\n" << LogTail();
    }
    std::ifstream in(port_file);
    std::string http_field, grpc_field;
    if (in >> http_field >> grpc_field && http_field.rfind("http=", 0) == 0 &&
        grpc_field.rfind("grpc=", 0) == 0) {
      http_port_ = std::stoi(http_field.substr(5));
      grpc_port_ = std::stoi(grpc_field.substr(5));
      metrics_port_ = 0;
      std::string metrics_field;
      if (in >> metrics_field && metrics_field.rfind("metrics=", 0) == 0) {
        metrics_port_ = std::stoi(metrics_field.substr(8));
      }
      break;
    }
    if (Clock::now() > deadline) {
      return ::testing::AssertionFailure() << "no port file after " << kStartTimeout.count()
                                           << " s; log:\n" << LogTail();
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  if (http_port_ <= 0 || grpc_port_ <= 0) {
    return ::testing::AssertionFailure() << "bad port file: http=" << http_port_
                                         << " grpc=" << grpc_port_;
  }

  HttpClient client(http_port_);
  const std::string probe = options.wait_ready ? "/v2/health/ready" : "/v2/health/live";
  while (true) {
    HttpResponse r = client.Get(probe);
    if (r.status == 200) return ::testing::AssertionSuccess();
    if (Clock::now() > deadline) {
      return ::testing::AssertionFailure() << probe << " never answered 200 (last: "
                                           << r.Describe() << "); log:\n" << LogTail();
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

void ServerProcess::Terminate() {
  if (pid_ > 0) kill(pid_, SIGTERM);
}

::testing::AssertionResult ServerProcess::Wait(std::chrono::seconds timeout) {
  if (pid_ <= 0) return ::testing::AssertionFailure() << "fastpath is not running";
  const auto deadline = Clock::now() + timeout;
  int status = 0;
  while (true) {
    pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) break;
    if (done < 0) {
      pid_ = -1;
      return ::testing::AssertionFailure() << "waitpid: " << strerror(errno);
    }
    if (Clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      pid_ = -1;
      return ::testing::AssertionFailure()
             << "fastpath did not exit within " << timeout.count()
             << " s of SIGTERM and was killed; log:\n" << LogTail();
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  pid_ = -1;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "fastpath ended with " << DescribeWaitStatus(status)
                                       << " after SIGTERM; log:\n" << LogTail();
}

::testing::AssertionResult ServerProcess::Stop(std::chrono::seconds timeout) {
  Terminate();
  return Wait(timeout);
}

long ServerProcess::RssKiB() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

std::string ServerProcess::LogTail(size_t max_bytes) const {
  std::ifstream in(log_path(), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (text.size() > max_bytes) text = "..." + text.substr(text.size() - max_bytes);
  return text;
}

}  // namespace fastpath::integration
