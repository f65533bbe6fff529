// The version matrix (issue 4 §2): one lock file pins the driver branch, the CUDA version
// the driver supports, the CUDA runtime, cuDNN, TensorRT and ONNX Runtime (and optionally
// the GPU model), and `fastpath serve --version-lock` admits a node only on equality.
// Almost-agreeing versions are the expensive case (missing fused kernels, TensorRT plans
// rebuilt with conservative tactics), so there is no "compatible range": a component is
// either pinned and equal, or not pinned.
//
// The file is JSON (docs/runbooks/admission.md shows one):
//   {"fastpath_lock": 1, "driver_branch": "580", "cuda_driver": "13.0",
//    "cuda_runtime": "13.0", "cudnn": "9.10.2", "tensorrt": "10.13.0",
//    "onnxruntime": "1.29.0", "gpu_name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}
// A component that is absent or null is not pinned. `doctor --lock` writes null for what
// the machine it runs on lacks, and says so.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fastpath/common/status.h"
#include "fastpath/gpu/capability_snapshot.h"

namespace fastpath::admission {

// The components, in the order they are checked and printed. Their JSON keys are the names.
struct VersionLock {
  std::optional<std::string> driver_branch;       // NVML driver version up to the first '.'
  std::optional<std::string> cuda_driver;         // CUDA major.minor the driver supports
  std::optional<std::string> cuda_runtime;        // libcudart's major.minor
  std::optional<std::string> cudnn;               // major.minor.patch
  std::optional<std::string> tensorrt;            // major.minor.patch
  std::optional<std::string> onnxruntime;         // the ORT build fastpath runs on
  std::optional<std::string> gpu_name;            // every device's name must equal it
  std::optional<std::string> compute_capability;  // every device's, "9.0"
};

// What the machine in `snapshot` has, as a lock (nullopt for a component it lacks).
VersionLock LockFromSnapshot(const gpu::CapabilitySnapshot& snapshot);

// The lock as a JSON document (pretty, newline-terminated; unpinned components are null).
std::string LockToJson(const VersionLock& lock);
// Parses a lock file's text. `source` names the file in error messages. Unknown keys,
// values that are neither strings nor null, and a missing or wrong "fastpath_lock" format
// number are errors naming the key.
StatusOr<VersionLock> ParseLock(const std::string& text, const std::string& source);
StatusOr<VersionLock> ReadLockFile(const std::string& path);

struct LockMismatch {
  std::string component;  // the JSON key, e.g. "cudnn"
  std::string expected;
  std::string found;  // "not found (...)" when the machine lacks the component
};

// Every pinned component whose value on this machine differs, in VersionLock's order.
// Empty: the node is admitted.
std::vector<LockMismatch> CheckLock(const VersionLock& lock,
                                    const gpu::CapabilitySnapshot& snapshot);

// "  cudnn: expected 9.10.2, found 9.8.0\n" per mismatch.
std::string DescribeMismatches(const std::vector<LockMismatch>& mismatches);

// The names of the components that are pinned (for the start-up log line).
std::vector<std::string> PinnedComponents(const VersionLock& lock);

}  // namespace fastpath::admission
