#include "fastpath/common/tensor.h"

#include <cstring>
#include <limits>

namespace fastpath {

StatusOr<int64_t> ElementCount(const std::vector<int64_t>& shape, int64_t max_elements) {
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t dim = shape[i];
    if (dim < 0) {
      return InvalidArgument("shape " + ShapeToString(shape) + " has negative dimension " +
                             std::to_string(dim) + " at index " + std::to_string(i));
    }
    if (dim != 0 && count > max_elements / dim) {
      return PayloadTooLarge("shape " + ShapeToString(shape) + " has more than " +
                             std::to_string(max_elements) + " elements");
    }
    count *= dim;
  }
  if (count > max_elements) {
    return PayloadTooLarge("shape " + ShapeToString(shape) + " has more than " +
                           std::to_string(max_elements) + " elements");
  }
  return count;
}

StatusOr<int64_t> DeclaredElementCount(const std::vector<int64_t>& shape, int64_t max_elements,
                                       const std::string& limit) {
  auto count = ElementCount(shape, max_elements);
  if (count.status().code() != StatusCode::kPayloadTooLarge) return count;
  return InvalidArgument("shape " + ShapeToString(shape) + " has more elements than " + limit +
                         " can hold (" + std::to_string(max_elements) + ")");
}

std::string ShapeToString(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

StatusOr<std::vector<std::string_view>> SplitBytesElements(std::string_view data,
                                                           int64_t expected_count,
                                                           std::string_view tensor_name) {
  std::vector<std::string_view> elements;
  // Each element needs at least its 4-byte prefix: bound the reservation by the data.
  const auto max_possible = static_cast<int64_t>(data.size() / 4);
  if (expected_count > max_possible) {
    return InvalidArgument("BYTES tensor '" + std::string(tensor_name) + "' has " +
                           std::to_string(data.size()) + " bytes, too few for " +
                           std::to_string(expected_count) + " length-prefixed elements");
  }
  elements.reserve(static_cast<size_t>(expected_count));
  size_t pos = 0;
  while (pos < data.size()) {
    if (data.size() - pos < 4) {
      return InvalidArgument("BYTES tensor '" + std::string(tensor_name) +
                             "' has a truncated length prefix at byte " + std::to_string(pos));
    }
    uint32_t len = 0;
    std::memcpy(&len, data.data() + pos, 4);  // little-endian hosts only (x86-64, aarch64)
    pos += 4;
    if (len > data.size() - pos) {
      return InvalidArgument("BYTES tensor '" + std::string(tensor_name) + "' element " +
                             std::to_string(elements.size()) + " declares " + std::to_string(len) +
                             " bytes but only " + std::to_string(data.size() - pos) + " remain");
    }
    if (static_cast<int64_t>(elements.size()) == expected_count) {
      return InvalidArgument("BYTES tensor '" + std::string(tensor_name) +
                             "' has more elements than its shape holds (" +
                             std::to_string(expected_count) + ")");
    }
    elements.emplace_back(data.data() + pos, len);
    pos += len;
  }
  if (static_cast<int64_t>(elements.size()) != expected_count) {
    return InvalidArgument("BYTES tensor '" + std::string(tensor_name) + "' has " +
                           std::to_string(elements.size()) + " elements but its shape needs " +
                           std::to_string(expected_count));
  }
  return elements;
}

void AppendBytesElement(std::string* out, std::string_view element) {
  const auto len = static_cast<uint32_t>(element.size());
  char prefix[4];
  std::memcpy(prefix, &len, 4);
  out->append(prefix, 4);
  out->append(element.data(), element.size());
}

Status ValidateTensorData(const Tensor& tensor) {
  if (tensor.dtype == DataType::kInvalid) {
    return InvalidArgument("tensor '" + tensor.name + "' has no valid datatype");
  }
  FASTPATH_ASSIGN_OR_RETURN(const int64_t count, ElementCount(tensor.shape));
  if (tensor.dtype == DataType::kBytes) {
    auto split = SplitBytesElements(tensor.data, count, tensor.name);
    return split.ok() ? Status::Ok() : split.status();
  }
  const size_t elem = ElementSize(tensor.dtype);
  if (static_cast<uint64_t>(count) > std::numeric_limits<size_t>::max() / elem ||
      tensor.data.size() != static_cast<size_t>(count) * elem) {
    return InvalidArgument("tensor '" + tensor.name + "' of shape " + ShapeToString(tensor.shape) +
                           " and datatype " + std::string(DataTypeName(tensor.dtype)) + " needs " +
                           std::to_string(static_cast<uint64_t>(count) * elem) + " bytes but has " +
                           std::to_string(tensor.data.size()));
  }
  if (tensor.dtype == DataType::kBool) {
    // Any byte other than 0 or 1 is not a valid C++ bool, and ONNX Runtime's kernels read
    // BOOL tensors as bool. Checked on each request's own tensor, before it joins a batch;
    // one OR over the bytes (which vectorizes), and the index looked for only on failure.
    unsigned char any = 0;
    for (const char c : tensor.data) any |= static_cast<unsigned char>(c);
    for (size_t i = 0; (any & 0xFE) != 0 && i < tensor.data.size(); ++i) {
      const auto byte = static_cast<unsigned char>(tensor.data[i]);
      if (byte > 1) {
        return InvalidArgument("BOOL tensor '" + tensor.name + "' element " + std::to_string(i) +
                               " is " + std::to_string(byte) + "; BOOL elements must be 0 or 1");
      }
    }
  }
  return Status::Ok();
}

}  // namespace fastpath
