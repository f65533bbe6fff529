// The process as Prometheus's client libraries describe theirs ("process metrics": CPU time,
// start time, memory, descriptors), read from /proc. Standard dashboards and alerts read these
// names, e.g. process_open_fds / process_max_fds for a server about to stop accepting.
#pragma once

#include <cstdint>
#include <optional>

namespace fastpath {

struct ProcessStatistics {
  std::optional<double> cpu_seconds;         // user and system, all threads
  std::optional<double> start_time_seconds;  // since the Unix epoch
  std::optional<uint64_t> resident_bytes;
  std::optional<uint64_t> virtual_bytes;
  std::optional<uint64_t> open_fds;
  std::optional<uint64_t> max_fds;  // the soft limit; absent when unlimited
};

// What /proc says now; a field it cannot give is left out.
ProcessStatistics ReadProcessStatistics();

}  // namespace fastpath
