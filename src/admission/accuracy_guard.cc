#include "fastpath/admission/accuracy_guard.h"

#include <charconv>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace fastpath::admission {
namespace {

constexpr const char* kAccuracyPrefix = "fastpath.accuracy.";

double HalfToDouble(uint16_t bits) {
  const int sign = bits >> 15;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  double value;
  if (exponent == 0) {
    value = std::ldexp(mantissa, -24);  // subnormal
  } else if (exponent == 31) {
    value = mantissa == 0 ? std::numeric_limits<double>::infinity()
                          : std::numeric_limits<double>::quiet_NaN();
  } else {
    value = std::ldexp(mantissa + 1024, exponent - 25);
  }
  return sign ? -value : value;
}

template <typename T>
T Load(const char* data, int64_t i) {
  T value;
  std::memcpy(&value, data + i * sizeof(T), sizeof(T));
  return value;
}

// Element i of a numeric tensor as a double; nullopt for a type that is not numeric.
std::optional<double> ElementAt(const Tensor& t, int64_t i) {
  const char* d = t.data.data();
  switch (t.dtype) {
    case DataType::kBool:
      return Load<uint8_t>(d, i) != 0 ? 1.0 : 0.0;
    case DataType::kUint8:
      return Load<uint8_t>(d, i);
    case DataType::kUint16:
      return Load<uint16_t>(d, i);
    case DataType::kUint32:
      return Load<uint32_t>(d, i);
    case DataType::kUint64:
      return static_cast<double>(Load<uint64_t>(d, i));
    case DataType::kInt8:
      return Load<int8_t>(d, i);
    case DataType::kInt16:
      return Load<int16_t>(d, i);
    case DataType::kInt32:
      return Load<int32_t>(d, i);
    case DataType::kInt64:
      return static_cast<double>(Load<int64_t>(d, i));
    case DataType::kFp16:
      return HalfToDouble(Load<uint16_t>(d, i));
    case DataType::kBf16: {
      const uint32_t bits = uint32_t{Load<uint16_t>(d, i)} << 16;
      float value;
      std::memcpy(&value, &bits, sizeof(value));
      return value;
    }
    case DataType::kFp32:
      return Load<float>(d, i);
    case DataType::kFp64:
      return Load<double>(d, i);
    default:
      return std::nullopt;
  }
}

StatusOr<int64_t> NumericElements(const Tensor& t, const std::string& what) {
  if (t.dtype == DataType::kBytes || t.dtype == DataType::kInvalid) {
    return InvalidArgument(what + " '" + t.name + "' has datatype " +
                           std::string(DataTypeName(t.dtype)) +
                           ", which the accuracy guard cannot compare");
  }
  const size_t size = ElementSize(t.dtype);
  if (t.data.size() % size != 0) {
    return InvalidArgument(what + " '" + t.name + "' holds " + std::to_string(t.data.size()) +
                           " bytes, not a whole number of " + std::string(DataTypeName(t.dtype)) +
                           " elements");
  }
  return static_cast<int64_t>(t.data.size() / size);
}

}  // namespace

std::string FormatNumber(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.8g", value);
  return text;
}

StatusOr<std::optional<AccuracyGuard>> ParseAccuracyGuard(const inference::ModelConfig& config) {
  const std::string* reference = nullptr;
  const std::string* tolerance = nullptr;
  for (const auto& [key, value] : config.parameters()) {
    if (key.rfind(kAccuracyPrefix, 0) != 0) continue;
    if (key == kAccuracyReferenceModel) {
      reference = &value.string_value();
    } else if (key == kAccuracyTolerance) {
      tolerance = &value.string_value();
    } else {
      return InvalidArgument("parameters: unknown key '" + key + "'; the accuracy guard reads " +
                             kAccuracyReferenceModel + " and " + kAccuracyTolerance);
    }
  }
  if (reference == nullptr && tolerance == nullptr) return std::optional<AccuracyGuard>();
  if (reference == nullptr || tolerance == nullptr) {
    return InvalidArgument(std::string("parameters: '") +
                           (reference == nullptr ? kAccuracyTolerance : kAccuracyReferenceModel) +
                           "' is set but '" +
                           (reference == nullptr ? kAccuracyReferenceModel : kAccuracyTolerance) +
                           "' is not; the accuracy guard needs both");
  }
  AccuracyGuard guard;
  guard.reference_model = *reference;
  if (guard.reference_model.empty() || guard.reference_model == "." ||
      guard.reference_model == ".." || guard.reference_model.find('/') != std::string::npos) {
    return InvalidArgument(std::string("parameters: '") + kAccuracyReferenceModel + "' is '" +
                           guard.reference_model +
                           "'; it must be the name of a file in the version folder");
  }
  const std::string& text = *tolerance;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), guard.tolerance);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() ||
      !std::isfinite(guard.tolerance) || guard.tolerance < 0) {
    return InvalidArgument(std::string("parameters: '") + kAccuracyTolerance + "' is '" + text +
                           "'; it must be a number >= 0");
  }
  return std::optional<AccuracyGuard>(guard);
}

StatusOr<OutputDeviation> WorstDeviation(const Tensor& output, const Tensor& reference,
                                         double relative_floor) {
  FASTPATH_ASSIGN_OR_RETURN(const int64_t count, NumericElements(output, "output"));
  FASTPATH_ASSIGN_OR_RETURN(const int64_t reference_count,
                            NumericElements(reference, "reference output"));
  if (count != reference_count) {
    return InvalidArgument("output '" + output.name + "' has " + std::to_string(count) +
                           " elements but the reference's has " + std::to_string(reference_count));
  }
  OutputDeviation worst;
  worst.output = output.name;
  for (int64_t i = 0; i < count; ++i) {
    const double value = *ElementAt(output, i);
    const double ref = *ElementAt(reference, i);
    double difference = std::fabs(value - ref);
    if (value == ref || (std::isnan(value) && std::isnan(ref))) difference = 0;
    if (std::isnan(difference)) difference = std::numeric_limits<double>::infinity();
    if (relative_floor > 0 && difference > 0) {
      difference /= std::max(relative_floor, std::fabs(ref));
    }
    if (worst.index < 0 || difference > worst.difference) {
      worst.index = i;
      worst.value = value;
      worst.reference = ref;
      worst.difference = difference;
    }
  }
  return worst;
}

std::string DescribeMiss(const OutputDeviation& worst, const AccuracyGuard& guard) {
  return "output '" + worst.output + "' element " + std::to_string(worst.index) + ": " +
         FormatNumber(worst.value) + " here, " + FormatNumber(worst.reference) +
         " from the FP32 reference '" + guard.reference_model + "'; |difference| " +
         FormatNumber(worst.difference) + " > tolerance " + FormatNumber(guard.tolerance);
}

}  // namespace fastpath::admission
