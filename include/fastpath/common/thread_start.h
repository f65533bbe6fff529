// Starting a model's threads (a scheduler's, admission's holds), which fails when the process
// is at its thread limit (ulimit -u, a container's pids limit): std::thread and std::async
// then throw std::system_error, which would end the process (from a constructor, a joinable
// std::thread destroyed; on the poll thread, uncaught). The model's load fails instead.
#pragma once

#include <exception>
#include <string>
#include <system_error>

#include "fastpath/common/status.h"

namespace fastpath {

// What the model's load is told: RESOURCE_EXHAUSTED, as it may load once other threads end.
inline Status ThreadLimitReached(const std::system_error& e) {
  return ResourceExhausted(std::string("could not start the model's threads (") + e.what() +
                           "): the process is at its thread limit (ulimit -u, or the "
                           "container's pids limit)");
}

// Calls `start`, which starts threads one by one; when one cannot be started, calls `stop`
// (which joins those started) and returns ThreadLimitReached.
template <typename Start, typename Stop>
Status StartThreads(Start start, Stop stop) {
  try {
    start();
    return Status::Ok();
  } catch (const std::system_error& e) {
    stop();
    return ThreadLimitReached(e);
  }
}

}  // namespace fastpath
