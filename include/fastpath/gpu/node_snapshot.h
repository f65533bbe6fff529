// The node's capability snapshot as `doctor` prints it, `serve` keeps it for
// /v2/health/admission and checks the version lock against it, and `build-engines` keys
// engines with it: the driver, NVML, CUDA libraries and container probes
// (capability_snapshot.h), plus ONNX Runtime with its execution-provider libraries
// registered exactly as a GPU model will meet them.
//
// A library of its own (fastpath::node_snapshot) above both the probes and the ORT
// backend, so that neither depends on the other.
#pragma once

#include <string>

#include "fastpath/gpu/capability_snapshot.h"

namespace fastpath::gpu {

// Probes this host. `fastpath_version` is recorded as the snapshot's.
CapabilitySnapshot TakeNodeSnapshot(const std::string& fastpath_version);

}  // namespace fastpath::gpu
