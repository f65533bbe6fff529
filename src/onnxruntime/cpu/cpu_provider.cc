#include "cpu/cpu_provider.h"

#include <cpu_provider_factory.h>
#include <onnxruntime_session_options_config_keys.h>

#include <string>

#include "ort_types.h"

namespace fastpath::onnxruntime {

Status ConfigureCpuThreads(const backend::InstanceOptions& options, int global_intra_op_threads,
                           Ort::SessionOptions* session_options) {
  if (options.global_thread_pool) {
    if (global_intra_op_threads < 1) {
      return FailedPrecondition(
          "the instance asks for the process-wide intra-op thread pool, but this ONNX Runtime "
          "environment was created without one (OrtBackendOptions::global_intra_op_threads)");
    }
    session_options->DisablePerSessionThreads();
    session_options->SetExecutionMode(ExecutionMode::ORT_SEQUENTIAL);
    return Status::Ok();
  }
  // 0 would let ORT size the pools from the machine, which on a shared server
  // oversubscribes the cores; every instance says exactly what it gets.
  if (options.intra_op_threads < 1 || options.inter_op_threads < 1) {
    return InvalidArgument("intra_op_threads and inter_op_threads must be at least 1 (got " +
                           std::to_string(options.intra_op_threads) + " and " +
                           std::to_string(options.inter_op_threads) +
                           "); fastpath never lets the runtime pick");
  }
  session_options->SetIntraOpNumThreads(options.intra_op_threads);
  session_options->SetInterOpNumThreads(options.inter_op_threads);
  // ORT uses the inter-op pool only in parallel execution mode; asking for more than one
  // inter-op thread is therefore asking for that mode.
  session_options->SetExecutionMode(options.inter_op_threads > 1 ? ExecutionMode::ORT_PARALLEL
                                                                 : ExecutionMode::ORT_SEQUENTIAL);
  // ORT's pool threads spin after each op waiting for more work. That buys microseconds
  // on an idle machine with cores to spare; on a server where several instances, the
  // front ends and the batcher share few cores, spinning threads burn the CPU the other
  // instances need, and latency gets worse under load rather than better.
  session_options->AddConfigEntry(kOrtSessionOptionsConfigAllowIntraOpSpinning, "0");
  session_options->AddConfigEntry(kOrtSessionOptionsConfigAllowInterOpSpinning, "0");
  return Status::Ok();
}

Status AppendCpuProvider(Ort::SessionOptions* session_options) {
  return StatusFromOrtStatus(
      OrtSessionOptionsAppendExecutionProvider_CPU(*session_options, /*use_arena=*/1),
      "registering the cpu execution provider");
}

}  // namespace fastpath::onnxruntime
