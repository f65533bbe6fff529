// What `serve`, `budget` and `preflight` share about the runtime they load models on, so
// that budget and preflight measure the models as serve will run them: the
// --ort-thread-pool flag and the ONNX Runtime backend options it implies.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

#include "fastpath/config/model_config.h"
#include "fastpath/onnxruntime/ort_backend.h"

namespace fastpath::cli {

// --ort-thread-pool per-session|global, into `mode`.
CLI::Option* AddThreadPoolOption(CLI::App& app, config::ThreadPoolMode* mode);

// The backend for `mode`: with kGlobal, one process-wide intra-op pool of the usable cores
// (at least 1), which the CPU models that set no thread count share.
onnxruntime::OrtBackendOptions OrtOptionsFor(config::ThreadPoolMode mode, uint32_t usable_cores);

}  // namespace fastpath::cli
