// Starting threads, which fails when the process is at its thread limit (ulimit -u, a
// container's pids limit): std::thread and std::async then throw std::system_error, which
// would end the process (from a constructor, a joinable std::thread destroyed; on the poll
// thread, uncaught). What wanted them fails instead: a model's load (its scheduler's,
// admission's holds), or the server's start (its front ends', its watches').
#pragma once

#include <exception>
#include <string>
#include <system_error>

#include "fastpath/common/status.h"

namespace fastpath {

// RESOURCE_EXHAUSTED, as it may start once other threads end. `what` names the threads
// ("the model's threads"), `cause` is what the failed start said.
inline Status ThreadLimitReached(const std::string& what, const std::string& cause) {
  return ResourceExhausted("could not start " + what + " (" + cause +
                           "): the process is at its thread limit (ulimit -u, or the "
                           "container's pids limit)");
}

inline Status ThreadLimitReached(const std::system_error& e,
                                 const std::string& what = "the model's threads") {
  return ThreadLimitReached(what, e.what());
}

// Calls `start`, which starts threads one by one; when one cannot be started, calls `stop`
// (which joins those started) and returns ThreadLimitReached(e, what).
template <typename Start, typename Stop>
Status StartThreads(Start start, Stop stop, const std::string& what = "the model's threads") {
  try {
    start();
    return Status::Ok();
  } catch (const std::system_error& e) {
    stop();
    return ThreadLimitReached(e, what);
  }
}

}  // namespace fastpath
