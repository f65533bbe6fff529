// Building ORT sessions from fastpath's instance options, and reading a session's
// signature. Private to the ORT backend.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <filesystem>
#include <string>

#include "fastpath/backend/backend.h"
#include "fastpath/common/status.h"

namespace fastpath::backends::onnxruntime {

// Session options for one instance: explicit thread counts, spinning off, full graph
// optimization, and exactly the providers `options` names (ApplyExecutionProviders).
[[nodiscard]] StatusOr<Ort::SessionOptions> MakeInstanceSessionOptions(
    const backend::InstanceOptions& options, const std::string& log_id);

// Session options for reading a model's signature: one thread, no graph optimization
// (it cannot change inputs or outputs, and it is the slow part of loading a big model).
[[nodiscard]] StatusOr<Ort::SessionOptions> MakeInspectSessionOptions(const std::string& log_id);

// The one place where an instance's providers reach ORT, in the order given.
[[nodiscard]] Status ApplyExecutionProviders(const backend::InstanceOptions& options,
                                             Ort::SessionOptions* session_options);

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

}  // namespace fastpath::backends::onnxruntime
