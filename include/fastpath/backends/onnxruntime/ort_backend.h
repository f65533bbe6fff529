// The ONNX Runtime backend: backend::Backend over ORT's C++ API, one Ort::Session per
// model instance. This header deliberately includes no ORT header, so that only this
// module compiles against ORT and a mismatched runtime is caught in one place.
//
// Execution providers are explicit (see backend.h): an instance runs on exactly the
// providers its InstanceOptions name, and a provider that cannot be used is an error,
// never a silent fall back to the CPU.
#pragma once

#include <memory>
#include <string>

#include "fastpath/backend/backend.h"
#include "fastpath/common/status.h"

namespace fastpath::backends::onnxruntime {

// Severity below which ORT's own log lines are dropped; mirrors OrtLoggingLevel.
enum class OrtLogSeverity { kVerbose, kInfo, kWarning, kError, kFatal };

struct OrtBackendOptions {
  // Tag on ORT's log lines (the Ort::Env's log id).
  std::string log_id = "fastpath";
  // Warning by default: ORT logs node placement and fallback decisions as warnings, and
  // a silent fallback is exactly what fastpath must never hide.
  OrtLogSeverity log_severity = OrtLogSeverity::kWarning;
};

// Creates the backend and its Ort::Env. The backend owns the Env; every instance it
// creates keeps the Env alive through a shared reference, so instances may outlive the
// backend object. ORT keeps one environment per process underneath: a second backend
// shares it, and the first backend's logging options win.
//
// Fails with FailedPrecondition when the loaded libonnxruntime is older than the headers
// fastpath was built with, and with Internal when ORT cannot create its environment.
[[nodiscard]] StatusOr<std::unique_ptr<backend::Backend>> CreateOrtBackend(
    const OrtBackendOptions& options = {});

// The version of the ONNX Runtime library loaded at run time, e.g. "1.29.0".
std::string OrtVersion();

}  // namespace fastpath::backends::onnxruntime
