// Building ORT sessions from fastpath's instance options, and reading a session's
// signature. Private to the ORT backend.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <filesystem>
#include <string>

#include "fastpath/backend/backend.h"
#include "fastpath/common/status.h"

namespace fastpath::onnxruntime {

class OrtEnvironment;
struct EpDeviceEntry;
struct EpLibraryState;

// The device of `library` whose CUDA ordinal is `device_id`, or null; `ordinals` (may be
// null) collects every ordinal seen, for the message.
const EpDeviceEntry* FindEpDevice(const EpLibraryState& library, int device_id,
                                  std::string* ordinals);

// Session options for one instance: explicit thread counts or the environment's
// process-wide pool (ConfigureCpuThreads), spinning off, full graph optimization, exactly
// the providers `options` names (ApplyExecutionProviders, which may append to `degraded`),
// and the recording of where each node is placed (AuditPlacement reads it).
[[nodiscard]] StatusOr<Ort::SessionOptions> MakeInstanceSessionOptions(
    const backend::InstanceOptions& options, OrtEnvironment* env, const std::string& log_id,
    std::string* degraded);

// Session options for reading a model's signature: one thread, no graph optimization
// (it cannot change inputs or outputs, and it is the slow part of loading a big model).
[[nodiscard]] StatusOr<Ort::SessionOptions> MakeInspectSessionOptions(const std::string& log_id);

// The one place where an instance's providers reach ORT, in the order given. A GPU
// provider is appended through the plugin-EP API (its library registered in `env`, the
// OrtEpDevice whose CUDA ordinal is options.device_id); any failure on the way (library
// missing or not loadable, no device, no such device) is an error naming it, never a
// quiet CPU fallback. "cpu" beside a GPU provider needs options.allow_cpu_fallback_for_gpu;
// with it (the dev profile's explicit opt-in) a GPU provider that fails is skipped and
// its error appended to `degraded` (may be null: then it stays an error).
// `env` may be null for a CPU-only list.
[[nodiscard]] Status ApplyExecutionProviders(const backend::InstanceOptions& options,
                                             OrtEnvironment* env,
                                             Ort::SessionOptions* session_options,
                                             std::string* degraded);

// Where ORT placed each node of `session` (created with MakeInstanceSessionOptions),
// providers in the order `options` lists them, then the others.
[[nodiscard]] StatusOr<backend::PlacementAudit> AuditPlacement(
    const Ort::Session& session, const backend::InstanceOptions& options);

// Checks that `model_file` is a readable regular file, so that the common mistakes get
// a message in fastpath's words rather than ORT's.
[[nodiscard]] Status CheckModelFile(const std::filesystem::path& model_file);

// Loads `model_file` into a new session. Errors name the file and carry ORT's message.
[[nodiscard]] StatusOr<Ort::Session> OpenSession(const Ort::Env& env,
                                                 const std::filesystem::path& model_file,
                                                 const Ort::SessionOptions& session_options);

// The session's inputs and outputs; -1 for every dynamic or symbolic dim. A non-tensor
// input or output, or an element type KServe cannot carry, is Unimplemented and named.
[[nodiscard]] StatusOr<backend::ModelSignature> ReadSignature(const Ort::Session& session);

}  // namespace fastpath::onnxruntime
