// The capability snapshot as JSON: `fastpath doctor --json`, and later the lock file,
// `doctor --diff` and the readiness detail (issue 4 §2, §6) read the same document.
#pragma once

#include <string>
#include <vector>

#include "fastpath/gpu/capability_snapshot.h"

namespace fastpath::gpu {

// One JSON object: {"fastpath_version", "ort_version", "driver", "nvml", "libraries",
// "container", "onnxruntime", "compatibility", "findings"}. A field NVML does not support
// is null; so is "onnxruntime" when the caller did not probe ORT. "onnxruntime" is
// {"version", "ep_library_dir", "error", "execution_providers": [{"provider", "path",
// "registered", "error", "devices"}], "ep_devices": [{"ep_name", "ep_vendor",
// "device_type", "vendor", "vendor_id", "device_id", "cuda_device_id", "metadata"}]}.
std::string SnapshotToJson(const CapabilitySnapshot& snapshot, const std::vector<Finding>& findings);

}  // namespace fastpath::gpu
