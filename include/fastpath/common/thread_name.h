// Names the calling thread, so that `top -H`, `ps -L`, gdb and /proc/PID/task/*/comm tell
// fastpath's threads apart (an HTTP event loop, a gRPC queue, an instance's worker) when
// someone asks where a server's cores go.
#pragma once

#include <string_view>

namespace fastpath {

// Linux keeps 15 bytes of a thread's name; a longer one is cut there. Best effort: a
// platform without thread names ignores it. Threads the thread creates inherit the name
// (ONNX Runtime's pool threads show their creator's).
void NameThisThread(std::string_view name);

}  // namespace fastpath
