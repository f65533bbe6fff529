// `promtool check metrics` on a text exposition, for the tests that hold fastpath's own
// metric names to Prometheus's naming lint (base units, counters ending in _total, ...).
// promtool comes from Debian's `prometheus` package, which the test command installs
// (tools/setup.sh --test): a machine without it fails these tests rather than skipping them.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "fakes/run_command.h"

namespace fastpath::testing {

// Succeeds when promtool read `exposition` and reported nothing about a name that starts
// with fastpath_. What it says about Triton's nv_* names (kept as Triton spells them, for
// compatibility) is accepted. A failure carries promtool's whole output.
inline ::testing::AssertionResult FastpathNamesPassPromtool(const std::string& exposition) {
  const CommandRun which = RunCommand({"sh", "-c", "command -v promtool"});
  if (which.exit_code != 0) {
    return ::testing::AssertionFailure()
           << "promtool is not installed: it comes with Debian's `prometheus` package, which "
              "tools/setup.sh --test (the test command, tools/test.sh) installs";
  }
  static std::atomic<int> counter{0};
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("fastpath_scrape_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".txt");
  {
    std::ofstream out(path, std::ios::binary);
    out << exposition;
  }
  // The text goes to promtool's standard input, as `curl .../metrics | promtool check
  // metrics` would send it.
  const CommandRun run =
      RunCommand({"sh", "-c", "exec promtool check metrics < \"$1\"", "promtool", path.string()});
  std::filesystem::remove(path);
  const std::string output = run.out + run.err;
  // 0: nothing to report; 3: lint problems (judged below); anything else: it could not
  // read the text at all.
  if (run.exit_code != 0 && run.exit_code != 3) {
    return ::testing::AssertionFailure()
           << "promtool check metrics failed (exit " << run.exit_code << "):\n"
           << output;
  }
  std::istringstream lines(output);
  std::string line;
  std::string fastpath_lines;
  while (std::getline(lines, line)) {
    if (line.find("fastpath_") != std::string::npos) fastpath_lines += "  " + line + "\n";
  }
  if (!fastpath_lines.empty()) {
    return ::testing::AssertionFailure()
           << "promtool check metrics reports fastpath_ names:\n"
           << fastpath_lines << "its whole output (exit " << run.exit_code << "):\n"
           << output;
  }
  return ::testing::AssertionSuccess() << "promtool check metrics (exit " << run.exit_code << "):\n"
                                       << output;
}

}  // namespace fastpath::testing
