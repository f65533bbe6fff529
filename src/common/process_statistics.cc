#include "fastpath/common/process_statistics.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "fastpath/common/open_files.h"

namespace fastpath {
namespace {

// The system's boot time in seconds since the epoch (/proc/stat's btime).
std::optional<double> BootTime() {
  std::ifstream in("/proc/stat");
  for (std::string key; in >> key;) {
    if (key == "btime") {
      double seconds = 0;
      if (in >> seconds) return seconds;
      return std::nullopt;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::nullopt;
}

}  // namespace

ProcessStatistics ReadProcessStatistics() {
  ProcessStatistics out;
  out.open_fds = CountOpenFiles();
  out.max_fds = OpenFileLimit();
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return out;
  // The command's name is in parentheses and may hold spaces: the fields start after the last
  // ')'. proc(5) numbers them from 1 (the pid); the first after ')' is field 3 (state).
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return out;
  std::istringstream fields(line.substr(close + 1));
  std::string field;
  const long ticks = sysconf(_SC_CLK_TCK);
  const long page = sysconf(_SC_PAGESIZE);
  double utime = -1;
  double stime = -1;
  for (int n = 3; fields >> field; ++n) {
    const uint64_t value = std::strtoull(field.c_str(), nullptr, 10);  // each is a count
    if (n == 14) utime = static_cast<double>(value);
    if (n == 15) stime = static_cast<double>(value);
    if (n == 22 && ticks > 0) {
      static const std::optional<double> boot = BootTime();  // fixed until the next boot
      if (boot) {
        out.start_time_seconds = *boot + static_cast<double>(value) / static_cast<double>(ticks);
      }
    }
    if (n == 23) out.virtual_bytes = value;
    if (n == 24 && page > 0) {
      out.resident_bytes = value * static_cast<uint64_t>(page);
      break;
    }
  }
  if (utime >= 0 && stime >= 0 && ticks > 0) {
    out.cpu_seconds = (utime + stime) / static_cast<double>(ticks);
  }
  return out;
}

}  // namespace fastpath
