// Runs a program to its exit and captures what it wrote, for the tests that drive the
// built `fastpath` binary's subcommands (doctor, build-engines, a serve that must refuse
// to start, bench) as an operator would.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fastpath::testing {

struct CommandRun {
  int exit_code = -1;  // -1: killed by a signal, or could not run
  std::string out;
  std::string err;
};

// One word for the shell, whatever it contains.
inline std::string ShellQuote(const std::string& word) {
  std::string out = "'";
  for (const char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs `env <assignments> <argv...>` (assignments are NAME=value) with stdin from
// /dev/null, at most `timeout_s` seconds (a server that fails to refuse would otherwise
// never return); stdout and stderr are captured apart.
inline CommandRun RunCommand(const std::vector<std::string>& argv,
                             const std::vector<std::string>& assignments = {},
                             int timeout_s = 120) {
  static std::atomic<int> counter{0};
  const std::filesystem::path base =
      std::filesystem::temp_directory_path() /
      ("fastpath_command_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  const std::string out_path = base.string() + ".out";
  const std::string err_path = base.string() + ".err";
  std::string command = "env";
  for (const std::string& a : assignments) command += " " + ShellQuote(a);
  command += " timeout " + std::to_string(timeout_s);
  for (const std::string& word : argv) command += " " + ShellQuote(word);
  command +=
      " <" + ShellQuote("/dev/null") + " >" + ShellQuote(out_path) + " 2>" + ShellQuote(err_path);
  CommandRun run;
  const int status = std::system(command.c_str());
  run.exit_code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto read = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    std::filesystem::remove(path);
    return text.str();
  };
  run.out = read(out_path);
  run.err = read(err_path);
  return run;
}

}  // namespace fastpath::testing
