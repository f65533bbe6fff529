#include "fastpath/common/dtype.h"

#include <array>

namespace fastpath {
namespace {

struct Entry {
  DataType type;
  std::string_view name;
  std::string_view config_name;
  size_t size;
};

constexpr std::array<Entry, 15> kTable = {{
    {DataType::kInvalid, "INVALID", "TYPE_INVALID", 0},
    {DataType::kBool, "BOOL", "TYPE_BOOL", 1},
    {DataType::kUint8, "UINT8", "TYPE_UINT8", 1},
    {DataType::kUint16, "UINT16", "TYPE_UINT16", 2},
    {DataType::kUint32, "UINT32", "TYPE_UINT32", 4},
    {DataType::kUint64, "UINT64", "TYPE_UINT64", 8},
    {DataType::kInt8, "INT8", "TYPE_INT8", 1},
    {DataType::kInt16, "INT16", "TYPE_INT16", 2},
    {DataType::kInt32, "INT32", "TYPE_INT32", 4},
    {DataType::kInt64, "INT64", "TYPE_INT64", 8},
    {DataType::kFp16, "FP16", "TYPE_FP16", 2},
    {DataType::kFp32, "FP32", "TYPE_FP32", 4},
    {DataType::kFp64, "FP64", "TYPE_FP64", 8},
    {DataType::kBytes, "BYTES", "TYPE_STRING", 0},
    {DataType::kBf16, "BF16", "TYPE_BF16", 2},
}};

const Entry& Find(DataType type) {
  for (const auto& e : kTable) {
    if (e.type == type) return e;
  }
  return kTable[0];
}

}  // namespace

std::string_view DataTypeName(DataType type) { return Find(type).name; }
std::string_view ConfigDataTypeName(DataType type) { return Find(type).config_name; }
size_t ElementSize(DataType type) { return Find(type).size; }

std::optional<DataType> ParseDataType(std::string_view name) {
  for (const auto& e : kTable) {
    if (e.type != DataType::kInvalid && e.name == name) return e.type;
  }
  return std::nullopt;
}

std::optional<DataType> ParseConfigDataType(std::string_view name) {
  for (const auto& e : kTable) {
    if (e.type != DataType::kInvalid && e.config_name == name) return e.type;
  }
  return std::nullopt;
}

}  // namespace fastpath
