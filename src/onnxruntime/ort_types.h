// Translations between fastpath's vocabulary and ORT's: datatypes, and ORT errors into
// Status. Private to the ORT backend; the only files that include ORT headers are here.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <exception>
#include <new>
#include <optional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fastpath/common/dtype.h"
#include "fastpath/common/status.h"

namespace fastpath::onnxruntime {

// The ONNX element type that carries a KServe datatype; nullopt for kInvalid.
std::optional<ONNXTensorElementDataType> OnnxElementType(DataType type);
// The KServe datatype of an ONNX element type; nullopt for types KServe has no name for
// (complex, float8, int4, ...), which the backend then refuses by name.
std::optional<DataType> FastpathDataType(ONNXTensorElementDataType type);
// "tensor(float16)"-style name for messages about types fastpath cannot carry.
std::string OnnxElementTypeName(ONNXTensorElementDataType type);

// True when an ORT error message says memory ran out: the BFC arena's "Failed to allocate
// memory for requested buffer", the arena limit's "Available memory of X is smaller than
// requested bytes of Y", CUDA's "out of memory", cuBLAS's and cuDNN's ALLOC_FAILED.
bool IsOutOfMemoryMessage(std::string_view message);

// One place where ORT's error codes become Status codes; an out-of-memory message is
// ResourceExhausted starting "out of memory" whatever its code (HTTP 503 with
// Retry-After, gRPC RESOURCE_EXHAUSTED: the request may be retried). `context` says what fastpath
// was doing ("loading model '/m/model.onnx'") and prefixes ORT's own message.
Status StatusFromOrtError(OrtErrorCode code, const std::string& context,
                          const std::string& message);
Status StatusFromOrtException(const Ort::Exception& e, const std::string& context);
// Takes ownership of `raw` (may be null: OK) and releases it.
Status StatusFromOrtStatus(OrtStatus* raw, const std::string& context);

// A provider-bridge provider's V2 options as ORT's Update*ProviderOptions take them:
// parallel C-string arrays, valid while `options` is; and what appending it is called in
// messages ("appending the cuda execution provider (provider bridge) for GPU 0").
struct BridgeOptionArrays {
  BridgeOptionArrays(const char* provider, const std::map<std::string, std::string>& options);
  std::vector<const char*> keys;
  std::vector<const char*> values;
  std::string context;
};

// Runs `body` (which returns Status or StatusOr) and turns any exception into a Status:
// the ORT C++ API reports errors by throwing, and no exception may leave this backend.
template <typename Fn>
auto CatchOrtExceptions(const std::string& context, Fn&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Ort::Exception& e) {
    return StatusFromOrtException(e, context);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory: " + context);
  } catch (const std::exception& e) {
    return Internal(context + ": " + e.what());
  } catch (...) {
    return Internal(context + ": unknown exception");
  }
}

}  // namespace fastpath::onnxruntime
