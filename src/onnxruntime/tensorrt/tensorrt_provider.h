// The TensorRT execution provider: its registration through ORT's provider bridge, and
// the keyed engine cache (engine_cache.h) wired into its options. The repackaged GPU
// library this project ships has only the legacy bridge, which its core cannot load, so
// a "tensorrt" instance is refused there with the reason (ort_environment.cc); these run
// with Microsoft's GPU release. Private to the ORT backend.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "fastpath/backend/backend.h"
#include "fastpath/common/status.h"
#include "fastpath/onnxruntime/tensorrt/engine_cache.h"

namespace fastpath::onnxruntime {

// Appends the TensorRT provider through the provider bridge with `options` (device_id
// included) as its V2 options.
[[nodiscard]] Status AppendTensorRtBridge(const std::map<std::string, std::string>& options,
                                          Ort::SessionOptions* session_options);

// Points the instance's TensorRT options (`trt_options`) at the keyed engine folder for
// `model_file`, creating it. nullopt when fastpath manages no engine cache
// (options.engine_cache.root is empty). Errors name the model.
[[nodiscard]] StatusOr<std::optional<TrtEngineCachePlan>> PrepareTrtEngineCache(
    const backend::InstanceOptions& options, const std::filesystem::path& model_file,
    std::map<std::string, std::string>* trt_options);

// Once the session exists: writes the manifest for engines it built into the folder. With
// the key already found, or no engine files (dynamic shapes, built at the first run),
// there is nothing to vouch for, and the next start looks again.
[[nodiscard]] Status RecordBuiltTrtEngines(const TrtEngineCachePlan& plan);

}  // namespace fastpath::onnxruntime
