// Starting a scheduler's threads, which fails when the process is at its thread limit
// (ulimit -u, a container's pids limit): std::thread then throws std::system_error, which
// would end the process from a scheduler's constructor (a joinable std::thread destroyed).
// Private to the scheduler module.
#pragma once

#include <exception>
#include <string>
#include <system_error>

#include "fastpath/common/status.h"

namespace fastpath::scheduler {

// Calls `start`, which starts threads one by one; when one cannot be started, calls `stop`
// (which joins those started) and answers the model's load with RESOURCE_EXHAUSTED: it may
// load once other threads end.
template <typename Start, typename Stop>
Status StartThreads(Start start, Stop stop) {
  try {
    start();
    return Status::Ok();
  } catch (const std::system_error& e) {
    stop();
    return ResourceExhausted(std::string("could not start the model's execution threads (") +
                             e.what() +
                             "): the process is at its thread limit (ulimit -u, or the "
                             "container's pids limit)");
  }
}

}  // namespace fastpath::scheduler
