#include "runtime_options.h"

#include <algorithm>
#include <string>

#include "command_line.h"

namespace fastpath::cli {

CLI::Option* AddThreadPoolOption(CLI::App& app, config::ThreadPoolMode* mode) {
  return AddValue(app, "--ort-thread-pool", "per-session|global",
                  "CPU models that set no thread count: intra-op pools of their own, or one "
                  "process-wide pool of the usable cores shared by all",
                  config::ThreadPoolModeName(*mode), [mode](const std::string& value) {
                    FASTPATH_ASSIGN_OR_RETURN(*mode, config::ParseThreadPoolMode(value));
                    return Status::Ok();
                  });
}

onnxruntime::OrtBackendOptions OrtOptionsFor(config::ThreadPoolMode mode, uint32_t usable_cores) {
  onnxruntime::OrtBackendOptions options;
  if (mode == config::ThreadPoolMode::kGlobal) {
    options.global_intra_op_threads = static_cast<int>(std::max(1u, usable_cores));
  }
  return options;
}

}  // namespace fastpath::cli
