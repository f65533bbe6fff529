// The fastpath executable's subcommands. Exit codes are part of the interface
// (documented in README.md): orchestrators act on them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "fastpath/common/status.h"
#include "fastpath/gpu/capability_snapshot.h"
#include "fastpath/repository/model_repository.h"

namespace fastpath::cli {

constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;  // could not start or serve (repository, ports, runtime)
constexpr int kExitUsage = 2;    // bad command line

// `fastpath doctor --require-gpu` exits with the class of the most fundamental problem it
// found (the values of gpu::FailureClass); without --require-gpu it reports and exits 0.
constexpr int kExitNoDriverLibrary = 10;         // libcuda.so.1 cannot be loaded
constexpr int kExitNoDevice = 11;                // the driver loads but sees no device
constexpr int kExitDriverTooOld = 12;            // the driver's CUDA is older than a library needs
constexpr int kExitNvmlUnavailable = 13;         // libnvidia-ml.so.1 missing or not initializing
constexpr int kExitDriverInitFailed = 14;        // cuInit failed otherwise (stub library, mismatch)
constexpr int kExitNoCudaRuntime = 15;           // no libcudart on the library path
constexpr int kExitDeviceUnhealthy = 16;         // uncorrected ECC errors, hardware slowdown
constexpr int kExitNoGpuExecutionProvider = 17;  // ORT's CUDA EP library: not loadable, no device

// Admission (issue 4 §2, §5, §6; docs/runbooks/admission.md says what to do about each).
// `fastpath doctor --diff` exits 0 when the snapshots agree and 1 when they differ.
constexpr int kExitSnapshotsDiffer = 1;
constexpr int kExitVersionLockMismatch = 20;  // serve: a component the lock pins differs here
constexpr int kExitBadLockFile = 21;       // a lock file or --diff snapshot is unreadable/invalid
constexpr int kExitSelfTestFailed = 22;    // serve, production: a model missed its budget
constexpr int kExitModelNotAdmitted = 23;  // serve, production: a model is not READY at start

// A whole file's bytes; NotFound "cannot read <path>" when it cannot be opened, Internal when
// reading it fails.
StatusOr<std::string> ReadTextFile(const std::filesystem::path& path);

int Serve(const std::vector<std::string>& args);
int Doctor(const std::vector<std::string>& args);
// `fastpath bench` (src/cli/bench.cc): exit 0 measured, 1 server/model unreachable, 2 usage.
int Bench(const std::vector<std::string>& args);

// `fastpath build-engines` (src/cli/build_engines.cc): prebuilds TensorRT engines. Exit 0
// built, 1 a model failed, 2 usage, 17 (kExitNoGpuExecutionProvider) TensorRT unusable here.
int BuildEngines(const std::vector<std::string>& args);

// `fastpath budget` (src/cli/budget.cc): every model's memory budget against its cap and the
// device's memory, without serving. Exit 0 all fit, 1 one does not fit or did not load, 2 usage.
int Budget(const std::vector<std::string>& args);

// `fastpath preflight` (src/cli/preflight.cc): the production checklist on this node against a
// repository. Exit 0 every item passes (NOT CHECKED ones too unless --strict), 1 one fails,
// 2 usage.
constexpr int kExitPreflightFailed = 1;
int Preflight(const std::vector<std::string>& args);

// `fastpath gate` (src/cli/gate.cc): a candidate server's model against a baseline (a live
// server or a recorded one). Exit 0 passed, 1 refused (a regression), 2 usage, 3 nothing
// could be judged: a server or the model unreachable, a request failed, a recorded baseline
// unreadable or of another request, 4 judged (the report printed) but --record could not be
// written. Apart from 1 so that a rollout's log tells "slower" from "could not measure";
// all stop an Argo analysis (any exit but 0 fails its Job).
constexpr int kExitGateRefused = 1;
constexpr int kExitGateNotMeasured = 3;
constexpr int kExitGateRecordFailed = 4;
int Gate(const std::vector<std::string>& args);

// The memory of each device this node gives instances, by MemoryStats::device name: "cpu"
// (the cgroup's memory limit, else the machine's), "gpu<ordinal>" (what the driver reports;
// a MIG slice's own memory when CUDA_VISIBLE_DEVICES names one).
std::map<std::string, uint64_t> DeviceMemoryTotals(const gpu::CapabilitySnapshot& snapshot);

// The TensorRT engine cache of serve and build-engines: root `engine_cache` (empty:
// <repository>/.engine-cache), the TensorRT version (libnvinfer) and each GPU's compute
// capability (the driver) from `snapshot`.
void SetEngineCacheFromSnapshot(const gpu::CapabilitySnapshot& snapshot,
                                const std::filesystem::path& repository,
                                const std::filesystem::path& engine_cache,
                                repository::RepositoryOptions* options);

// Writes via a temporary file and rename, so a reader never sees half a file.
Status WriteFileAtomically(const std::string& path, const std::string& content);

}  // namespace fastpath::cli
