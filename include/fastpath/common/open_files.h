// Open file descriptors: what a server that accepts connections runs out of first. Every
// connection, model file and log is one, and Debian's default soft limit is 1024. So `fastpath
// serve` raises the soft limit to the hard one at start-up (as Go's runtime does; nothing in the
// process uses select()), and its listeners say when they cannot accept, and wait before they
// try again. A listener that retried at once would spin: the connection waiting in its listen
// queue keeps it readable, and every try fails until a descriptor is freed.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fastpath/common/clock.h"

namespace fastpath {

// Raises the soft RLIMIT_NOFILE to the hard limit (to the kernel's fs.nr_open when the hard
// limit is unlimited). Returns a line for the start-up log: the limit, and whether it was raised.
std::string RaiseOpenFileLimit();

// The descriptors the process has open (/proc/self/fd), nullopt when they cannot be counted
// (counting takes a descriptor).
std::optional<uint64_t> CountOpenFiles();
// The soft RLIMIT_NOFILE; nullopt when unknown or unlimited.
std::optional<uint64_t> OpenFileLimit();

// "97 files open, the limit is 128", or "all 128 files the limit allows are open": the
// process's descriptors (/proc/self/fd) and its soft limit, for the messages about running out.
std::string DescribeOpenFiles();

// A listener's failed accepts. A run of failures is logged when it starts, once a minute while it
// lasts, and when it ends, with a count, instead of a line per try. One per listener, used on
// its accept path only (not thread-safe).
class AcceptFailures {
 public:
  // How long a listener waits after a failure that is its own (out of descriptors or memory)
  // before it tries again. Connections wait in the kernel's listen queue meanwhile.
  static constexpr std::chrono::milliseconds kRetryAfter{100};

  // `listener` names it in the log ("HTTP", "gRPC", "metrics"). `clock` is for tests.
  explicit AcceptFailures(std::string listener, Clock* clock = nullptr);

  // A failed accept, with the errno it failed with. Returns how long to wait before the next
  // try: zero for a failure that belongs to the one connection (its client reset it, a network
  // error): accept(2) says to try again at once, and these are not logged.
  std::chrono::milliseconds Failed(int error_number, std::string_view message);

  // A connection accepted: logs the end of a run of failures, if one was going on.
  void Accepted() {
    if (run_failures_ != 0) Recovered();
  }

 private:
  void Recovered();

  std::string listener_;
  Clock* clock_;
  uint64_t run_failures_ = 0;  // in the current run of failures
  Clock::time_point run_started_{};
  Clock::time_point last_logged_{};
};

}  // namespace fastpath
