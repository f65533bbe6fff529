#include "ort_types.h"

#include <array>
#include <utility>

#include "fastpath/common/thread_start.h"

namespace fastpath::onnxruntime {
namespace {

struct TypePair {
  DataType fastpath;
  ONNXTensorElementDataType onnx;
};

// Every KServe datatype has an ONNX twin. BOOL is one byte on both sides (sizeof(bool)
// is 1 on every platform ORT ships for), FP16/BF16 are raw 16-bit patterns on both, and
// BYTES is ONNX's string tensor, converted element by element.
constexpr std::array<TypePair, 14> kTypes = {{
    {DataType::kBool, ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL},
    {DataType::kUint8, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8},
    {DataType::kUint16, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16},
    {DataType::kUint32, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32},
    {DataType::kUint64, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64},
    {DataType::kInt8, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8},
    {DataType::kInt16, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16},
    {DataType::kInt32, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32},
    {DataType::kInt64, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64},
    {DataType::kFp16, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16},
    {DataType::kFp32, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT},
    {DataType::kFp64, ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE},
    {DataType::kBytes, ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING},
    {DataType::kBf16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16},
}};

}  // namespace

std::optional<ONNXTensorElementDataType> OnnxElementType(DataType type) {
  for (const auto& pair : kTypes) {
    if (pair.fastpath == type) return pair.onnx;
  }
  return std::nullopt;
}

std::optional<DataType> FastpathDataType(ONNXTensorElementDataType type) {
  for (const auto& pair : kTypes) {
    if (pair.onnx == type) return pair.fastpath;
  }
  return std::nullopt;
}

std::string OnnxElementTypeName(ONNXTensorElementDataType type) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX64:
      return "tensor(complex64)";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX128:
      return "tensor(complex128)";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FN:
      return "tensor(float8e4m3fn)";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FNUZ:
      return "tensor(float8e4m3fnuz)";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2:
      return "tensor(float8e5m2)";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2FNUZ:
      return "tensor(float8e5m2fnuz)";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT4:
      return "tensor(uint4)";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT4:
      return "tensor(int4)";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED:
      return "tensor(undefined)";
    default:
      break;
  }
  if (auto fastpath = FastpathDataType(type)) {
    return "tensor(" + std::string(DataTypeName(*fastpath)) + ")";
  }
  return "ONNX element type " + std::to_string(static_cast<int>(type));
}

bool IsOutOfMemoryMessage(std::string_view message) {
  // ORT has no out-of-memory code (onnxruntime#26648); these are the texts it, CUDA and
  // the CUDA libraries put in the message, whatever the code.
  static constexpr std::string_view kForms[] = {
      "Failed to allocate memory for requested buffer of size",  // BFCArena
      "is smaller than requested bytes of",  // the arena's gpu_mem_limit / max_mem reached
      "out of memory",                       // CUDA failure 2 (cudaErrorMemoryAllocation)
      "cudaErrorMemoryAllocation",
      "CUDA_ERROR_OUT_OF_MEMORY",            // the driver API's name
      "CUBLAS_STATUS_ALLOC_FAILED",
      "CUDNN_STATUS_ALLOC_FAILED",
      "std::bad_alloc",
  };
  for (std::string_view form : kForms) {
    if (message.find(form) != std::string_view::npos) return true;
  }
  return false;
}

Status StatusFromOrtError(OrtErrorCode code, const std::string& context,
                          const std::string& message) {
  // ORT's messages often end with a newline; fastpath's sentences go on after them.
  const size_t end = message.find_last_not_of(" \t\r\n");
  std::string text = context + ": " + message.substr(0, end == std::string::npos ? 0 : end + 1);
  if (code != ORT_OK && IsOutOfMemoryMessage(message)) {
    return ResourceExhausted("out of memory: " + std::move(text));
  }
  // ORT's thread pools throw this when the process is at its thread limit (EAGAIN): not the
  // model's fault, and it may load once other threads end. ORT's source line and thread
  // class say nothing to the reader; the caller names the model.
  if (message.find("pthread_create failed") != std::string::npos &&
      message.find("Resource temporarily unavailable") != std::string::npos) {
    return ThreadLimitReached("ONNX Runtime's threads", "Resource temporarily unavailable");
  }
  switch (code) {
    case ORT_OK:
      // ORT threw without an error code; still an error, and a surprising one.
      return Internal(std::move(text));
    case ORT_INVALID_ARGUMENT:
    case ORT_INVALID_PROTOBUF:
    case ORT_INVALID_GRAPH:
      return InvalidArgument(std::move(text));
    case ORT_NO_SUCHFILE:
    case ORT_NOT_FOUND:
      return NotFound(std::move(text));
    case ORT_NOT_IMPLEMENTED:
      return Unimplemented(std::move(text));
    case ORT_MODEL_LOAD_CANCELED:
      return Cancelled(std::move(text));
    default:
      // ORT_FAIL, ORT_RUNTIME_EXCEPTION, ORT_ENGINE_ERROR, ORT_EP_FAIL, ...: the runtime
      // failed, not the request.
      return Internal(std::move(text));
  }
}

Status StatusFromOrtException(const Ort::Exception& e, const std::string& context) {
  return StatusFromOrtError(e.GetOrtErrorCode(), context, e.what());
}

BridgeOptionArrays::BridgeOptionArrays(const char* provider,
                                       const std::map<std::string, std::string>& options) {
  for (const auto& [key, value] : options) {
    keys.push_back(key.c_str());
    values.push_back(value.c_str());
  }
  const auto device = options.find("device_id");
  context = std::string("appending the ") + provider +
            " execution provider (provider bridge) for GPU " +
            (device != options.end() ? device->second : std::string("0"));
}

Status StatusFromOrtStatus(OrtStatus* raw, const std::string& context) {
  Ort::Status status(raw);  // takes ownership and releases it
  if (status.IsOK()) return Status::Ok();
  return StatusFromOrtError(status.GetErrorCode(), context, status.GetErrorMessage());
}

}  // namespace fastpath::onnxruntime
