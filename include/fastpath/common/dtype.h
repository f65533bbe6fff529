// The KServe v2 tensor datatypes and their names in the three vocabularies that
// meet in fastpath: the protocol ("FP32"), Triton's config ("TYPE_FP32"), and the
// element size used to check payload lengths before anything is allocated.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace fastpath {

enum class DataType {
  kInvalid = 0,
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kFp32,
  kFp64,
  kBytes,  // variable-length strings; on the wire each element is a u32 LE length + bytes
  kBf16,
};

// "BOOL", "UINT8", ..., "FP32", "BYTES", "BF16"; "INVALID" for kInvalid.
std::string_view DataTypeName(DataType type);
// Parses a protocol name; nullopt when unknown.
std::optional<DataType> ParseDataType(std::string_view name);
// "TYPE_FP32", ..., "TYPE_STRING" for kBytes (Triton's config vocabulary).
std::string_view ConfigDataTypeName(DataType type);
std::optional<DataType> ParseConfigDataType(std::string_view name);
// Bytes per element; 0 for kBytes and kInvalid (variable size).
size_t ElementSize(DataType type);

}  // namespace fastpath
