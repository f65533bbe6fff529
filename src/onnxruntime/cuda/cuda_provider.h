// The CUDA execution provider: the options fastpath sets for every CUDA instance, and its
// registration through ORT's provider bridge (Microsoft's GPU release). Through the
// plugin-EP interface (the repackaged GPU library this project ships) it is appended like
// any plugin EP (ort_session.cc). Private to the ORT backend.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "fastpath/common/status.h"

namespace fastpath::onnxruntime {

// Adds the options every CUDA instance gets whatever the config says: its own compute
// stream (no user stream), so that instances never queue behind each other on a shared
// one. config/execution_providers.cc refuses the config's attempts to set them. With a
// `memory_limit_bytes`, the device arena's gpu_mem_limit (config validation refuses it
// beside the arena's own gpu_mem_limit).
void SetCudaInstanceOptions(std::optional<uint64_t> memory_limit_bytes,
                            std::map<std::string, std::string>* options);

// Appends the CUDA provider through the provider bridge with `options` (device_id
// included) as its V2 options.
[[nodiscard]] Status AppendCudaBridge(const std::map<std::string, std::string>& options,
                                      Ort::SessionOptions* session_options);

}  // namespace fastpath::onnxruntime
