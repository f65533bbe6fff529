#include "fastpath/common/open_files.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "fastpath/common/log.h"

namespace fastpath {
namespace {

constexpr auto kRemindEvery = std::chrono::minutes(1);

std::string LimitText(rlim_t limit) {
  return limit == RLIM_INFINITY ? std::string("unlimited") : std::to_string(limit);
}

// The most descriptors a process may have (fs.nr_open): what an unlimited hard limit allows.
rlim_t KernelMaxOpenFiles() {
  std::ifstream in("/proc/sys/fs/nr_open");
  unsigned long long n = 0;
  if (in >> n && n > 0) return static_cast<rlim_t>(n);
  return 1024 * 1024;  // the kernel's default
}

// accept(2): errors of the connection being accepted, after which the next accept may well
// succeed. Everything else (EMFILE, ENFILE, ENOBUFS, ENOMEM) is the listener's own.
bool IsTheConnections(int error_number) {
  switch (error_number) {
    case ECONNABORTED:
    case EPROTO:
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
    case EAGAIN:
    case EINTR:
      return true;
    default:
      return false;
  }
}

// The descriptors open, or the errno that stopped the count in `error`. (The errno is read from
// the error_code, not compared with a std::errc: that comparison is a virtual call, which UBSan's
// vptr check cannot verify in a process out of descriptors, and reports.)
std::optional<uint64_t> CountOpenFiles(int* error) {
  std::error_code ec;
  uint64_t open = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++open;
  }
  if (ec || open == 0) {
    *error = ec.value();
    return std::nullopt;
  }
  return open - 1;  // the directory's own descriptor was one of them
}

std::string Seconds(Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace

std::string RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return std::string("open files: the limit is unknown (getrlimit: ") + std::strerror(errno) +
           ")";
  }
  const rlim_t target = limit.rlim_max == RLIM_INFINITY ? KernelMaxOpenFiles() : limit.rlim_max;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < target) {
    const rlim_t was = limit.rlim_cur;
    limit.rlim_cur = target;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      return "open files: the limit stays " + LimitText(was) + " (raising it to " +
             LimitText(target) + ": " + std::strerror(errno) + ")";
    }
    return "open files: the limit was raised from " + LimitText(was) + " to " + LimitText(target) +
           " (the hard limit)";
  }
  return "open files: the limit is " + LimitText(limit.rlim_cur) + " (the hard limit is " +
         LimitText(limit.rlim_max) + ")";
}

std::optional<uint64_t> CountOpenFiles() {
  int error = 0;
  return CountOpenFiles(&error);
}

std::optional<uint64_t> OpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) {
    return std::nullopt;
  }
  return static_cast<uint64_t>(limit.rlim_cur);
}

std::string DescribeOpenFiles() {
  const std::optional<uint64_t> limit = OpenFileLimit();
  const std::string of_limit = limit ? std::to_string(*limit) : std::string("unknown");
  int error = 0;
  if (const std::optional<uint64_t> open = CountOpenFiles(&error)) {
    return std::to_string(*open) + " files open, the limit is " + of_limit;
  }
  // Counting takes a descriptor too, which a process at its limit does not have.
  if (error == EMFILE) return "all " + of_limit + " files the limit allows are open";
  return "the limit of open files is " + of_limit;
}

AcceptFailures::AcceptFailures(std::string listener, Clock* clock)
    : listener_(std::move(listener)), clock_(OrSteadyClock(clock)) {}

std::chrono::milliseconds AcceptFailures::Failed(int error_number, std::string_view message) {
  if (IsTheConnections(error_number)) return std::chrono::milliseconds(0);
  const Clock::time_point now = clock_->Now();
  if (run_failures_++ == 0) {
    run_started_ = last_logged_ = now;
    log::Warn(listener_ + " cannot accept connections: " + std::string(message) + " (" +
              DescribeOpenFiles() + "). New connections wait in the listen queue; trying again " +
              "every " + std::to_string(kRetryAfter.count()) + " ms");
  } else if (now - last_logged_ >= kRemindEvery) {
    last_logged_ = now;
    log::Warn(listener_ + " still cannot accept connections: " + std::string(message) + " (" +
              DescribeOpenFiles() + "; " + std::to_string(run_failures_) + " failed accepts over " +
              Seconds(now - run_started_) + ")");
  }
  return kRetryAfter;
}

void AcceptFailures::Recovered() {
  log::Info(listener_ + " accepts connections again, after " + std::to_string(run_failures_) +
            " failed accepts over " + Seconds(clock_->Now() - run_started_));
  run_failures_ = 0;
}

}  // namespace fastpath
