// The CPU execution provider, built into ONNX Runtime: an instance's thread pools and the
// provider's registration. Private to the ORT backend.
#pragma once

#include <onnxruntime_cxx_api.h>

#include "fastpath/backend/backend.h"
#include "fastpath/common/status.h"

namespace fastpath::onnxruntime {

// The instance's intra-op and inter-op thread counts, exactly as given (InvalidArgument
// below 1: ORT would size its pools from the machine), the execution mode they imply, and
// spinning off. With options.global_thread_pool, no pools of its own: the session runs on
// the environment's process-wide pool of `global_intra_op_threads` (FailedPrecondition
// when that is 0, the environment has none).
[[nodiscard]] Status ConfigureCpuThreads(const backend::InstanceOptions& options,
                                         int global_intra_op_threads,
                                         Ort::SessionOptions* session_options);

// Registers ORT's CPU provider, arena included, so that a CPU-only session uses the
// provider list as written (ORT would add it implicitly anyway).
[[nodiscard]] Status AppendCpuProvider(Ort::SessionOptions* session_options);

}  // namespace fastpath::onnxruntime
