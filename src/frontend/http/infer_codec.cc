#include "infer_codec.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <rapidjson/document.h>
#include <simdjson.h>

#include "fastpath/protocol/request_policy.h"
#include "json_reader.h"
#include "json_writer.h"

namespace fastpath::frontend::http {
namespace {

using rapidjson::Value;

std::string_view StringOf(const Value& v) { return {v.GetString(), v.GetStringLength()}; }

const char* JsonTypeName(const Value& v) {
  if (v.IsNull()) return "null";
  if (v.IsBool()) return "a boolean";
  if (v.IsNumber()) return "a number";
  if (v.IsString()) return "a string";
  if (v.IsArray()) return "an array";
  return "an object";
}

// Calls `fn` on every non-array value of a possibly nested array, depth first, which
// is the row-major order of the tensor. Triton accepts nested and flat data alike.
template <typename Fn>
Status ForEachLeaf(const Value& v, int depth_left, const std::string& what, Fn&& fn) {
  if (!v.IsArray()) return fn(v);
  if (depth_left <= 0) return InvalidArgument(what + ": 'data' is nested too deeply");
  for (const Value& e : v.GetArray()) {
    FASTPATH_RETURN_IF_ERROR(ForEachLeaf(e, depth_left - 1, what, fn));
  }
  return Status::Ok();
}

// The least double that rounds to infinity as an FP32: FLT_MAX plus half its last place.
// What lies below rounds to a finite float, such as 3.4028235e38, FLT_MAX as numpy, Rust
// and std::to_chars write it.
constexpr double kFloatOverflow = 0x1.ffffffp+127;

Status ElementError(const std::string& what, int64_t index, const Value& v, const char* expected) {
  return InvalidArgument(what + ": 'data' element " + std::to_string(index) + " is " + JsonTypeName(v) +
                         ", expected " + expected);
}

template <typename T>
Status DecodeIntegers(const Value& data, int64_t count, int depth, const std::string& what,
                      DataType dtype, std::string* out) {
  out->resize(static_cast<size_t>(count) * sizeof(T));
  char* dst = out->data();
  int64_t i = 0;
  return ForEachLeaf(data, depth, what, [&](const Value& v) -> Status {
    T x{};
    bool in_range = false;
    // An integer beyond 64 bits reaches here as a double: an integer, just out of range (a
    // double this large has no fraction; 3.0 is still no integer, nor 1e19 a UINT64). The
    // double cannot tell -2^63 - 1 from -2^63.0, INT64's least written as a float: both are
    // out of range here.
    const double d = v.IsDouble() ? v.GetDouble() : 0;
    const bool huge_integer =
        std::isfinite(d) && (d >= 0x1p64 || d <= -0x1p63 || (std::is_signed_v<T> && d >= 0x1p63));
    if constexpr (std::is_signed_v<T>) {
      if (v.IsInt64()) {
        const int64_t n = v.GetInt64();
        in_range = n >= std::numeric_limits<T>::min() && n <= std::numeric_limits<T>::max();
        x = static_cast<T>(n);
      } else if (!v.IsUint64() && !huge_integer) {  // a uint64 beyond int64: out of range
        return ElementError(what, i, v, "an integer");
      }
    } else {
      if (v.IsUint64()) {
        const uint64_t n = v.GetUint64();
        in_range = n <= std::numeric_limits<T>::max();
        x = static_cast<T>(n);
      } else if (!v.IsInt64() && !huge_integer) {  // a negative integer: out of range
        return ElementError(what, i, v, "a non-negative integer");
      }
    }
    if (!in_range) {
      return InvalidArgument(what + ": 'data' element " + std::to_string(i) + " is out of range for " +
                             std::string(DataTypeName(dtype)));
    }
    std::memcpy(dst + static_cast<size_t>(i) * sizeof(T), &x, sizeof(T));
    ++i;
    return Status::Ok();
  });
}

template <typename T>
Status DecodeFloats(const Value& data, int64_t count, int depth, const std::string& what, DataType dtype,
                    std::string* out) {
  out->resize(static_cast<size_t>(count) * sizeof(T));
  char* dst = out->data();
  int64_t i = 0;
  return ForEachLeaf(data, depth, what, [&](const Value& v) -> Status {
    if (!v.IsNumber()) return ElementError(what, i, v, "a number");
    const double d = v.GetDouble();
    if constexpr (std::is_same_v<T, float>) {
      // A finite double beyond FP32's range would silently become infinity.
      if (std::isfinite(d) && std::fabs(d) >= kFloatOverflow) {
        return InvalidArgument(what + ": 'data' element " + std::to_string(i) + " is out of range for " +
                               std::string(DataTypeName(dtype)));
      }
    }
    const T x = static_cast<T>(d);
    std::memcpy(dst + static_cast<size_t>(i) * sizeof(T), &x, sizeof(T));
    ++i;
    return Status::Ok();
  });
}

Status DecodeBools(const Value& data, int64_t count, int depth, const std::string& what, std::string* out) {
  out->resize(static_cast<size_t>(count));
  int64_t i = 0;
  return ForEachLeaf(data, depth, what, [&](const Value& v) -> Status {
    if (!v.IsBool()) return ElementError(what, i, v, "true or false");
    (*out)[static_cast<size_t>(i++)] = v.GetBool() ? 1 : 0;
    return Status::Ok();
  });
}

// Counts the leaves of "data" (and, for BYTES, the bytes they will take) before
// anything is allocated: the tensor is sized from the shape only once the data agrees.
// Leaves past `limit` are counted but not inspected.
Status CountLeaves(const Value& data, int depth, const std::string& what, bool bytes, int64_t limit,
                   int64_t* count, size_t* byte_size) {
  *count = 0;
  *byte_size = 0;
  return ForEachLeaf(data, depth, what, [&](const Value& v) -> Status {
    if (++*count > limit) return Status::Ok();
    if (bytes) {
      if (!v.IsString()) return ElementError(what, *count - 1, v, "a string");
      *byte_size += 4 + v.GetStringLength();
    }
    return Status::Ok();
  });
}

Status DecodeJsonData(const Value& data, const std::vector<int64_t>& shape, int64_t count,
                      const InferCodecLimits& limits, const std::string& what, Tensor* tensor) {
  const DataType dtype = tensor->dtype;
  if (dtype == DataType::kFp16 || dtype == DataType::kBf16) {
    return InvalidArgument(what + ": " + std::string(DataTypeName(dtype)) +
                           " data cannot be sent as JSON; use the binary data extension "
                           "(parameters.binary_data_size)");
  }
  if (!data.IsArray()) {
    return InvalidArgument(what + ": 'data' must be an array, got " + JsonTypeName(data));
  }
  const int depth = limits.max_data_depth;
  int64_t found = 0;
  size_t bytes_size = 0;
  FASTPATH_RETURN_IF_ERROR(
      CountLeaves(data, depth, what, dtype == DataType::kBytes, count, &found, &bytes_size));
  if (found != count) {
    return InvalidArgument(what + ": 'data' has " + (found > count ? "more than " : "") +
                           std::to_string(found > count ? count : found) + " elements but shape " +
                           ShapeToString(shape) + " needs " + std::to_string(count));
  }
  std::string* out = &tensor->data;
  switch (dtype) {
    case DataType::kBool: return DecodeBools(data, count, depth, what, out);
    case DataType::kUint8: return DecodeIntegers<uint8_t>(data, count, depth, what, dtype, out);
    case DataType::kUint16: return DecodeIntegers<uint16_t>(data, count, depth, what, dtype, out);
    case DataType::kUint32: return DecodeIntegers<uint32_t>(data, count, depth, what, dtype, out);
    case DataType::kUint64: return DecodeIntegers<uint64_t>(data, count, depth, what, dtype, out);
    case DataType::kInt8: return DecodeIntegers<int8_t>(data, count, depth, what, dtype, out);
    case DataType::kInt16: return DecodeIntegers<int16_t>(data, count, depth, what, dtype, out);
    case DataType::kInt32: return DecodeIntegers<int32_t>(data, count, depth, what, dtype, out);
    case DataType::kInt64: return DecodeIntegers<int64_t>(data, count, depth, what, dtype, out);
    case DataType::kFp32: return DecodeFloats<float>(data, count, depth, what, dtype, out);
    case DataType::kFp64: return DecodeFloats<double>(data, count, depth, what, dtype, out);
    case DataType::kBytes: {
      out->reserve(bytes_size);
      return ForEachLeaf(data, depth, what, [&](const Value& v) -> Status {
        AppendBytesElement(out, StringOf(v));  // every leaf was checked to be a string
        return Status::Ok();
      });
    }
    default: break;
  }
  return InvalidArgument(what + ": datatype " + std::string(DataTypeName(dtype)) + " cannot be decoded");
}

Status DecodeShape(const Value& input, const std::string& what, std::vector<int64_t>* shape) {
  auto it = input.FindMember("shape");
  if (it == input.MemberEnd()) return InvalidArgument(what + ": missing 'shape'");
  if (!it->value.IsArray()) return InvalidArgument(what + ": 'shape' must be an array of integers");
  for (const Value& d : it->value.GetArray()) {
    if (!d.IsInt64()) {
      return InvalidArgument(what + ": 'shape' must be an array of integers, found " + JsonTypeName(d) +
                             (d.IsUint64() ? " out of range" : ""));
    }
    shape->push_back(d.GetInt64());
  }
  return Status::Ok();
}

// Decodes one entry of "inputs". `binary` is the part of the body after the JSON;
// `binary_offset` advances over the bytes this input consumes. Its parameters but
// binary_data_size (HTTP's own) are judged by protocol/request_policy.h.
Status DecodeInput(const Value& input, size_t index, std::string_view binary,
                   bool has_header_length, size_t* binary_offset, const InferCodecLimits& limits,
                   Tensor* tensor) {
  std::string what = "input " + std::to_string(index);
  if (!input.IsObject()) return InvalidArgument(what + " must be an object, got " + JsonTypeName(input));
  FASTPATH_RETURN_IF_ERROR(CheckMembersUnique(input, what));

  auto name_it = input.FindMember("name");
  if (name_it == input.MemberEnd()) return InvalidArgument(what + ": missing 'name'");
  if (!name_it->value.IsString()) return InvalidArgument(what + ": 'name' must be a string");
  tensor->name = std::string(StringOf(name_it->value));
  what = "input '" + tensor->name + "'";

  auto dtype_it = input.FindMember("datatype");
  if (dtype_it == input.MemberEnd()) return InvalidArgument(what + ": missing 'datatype'");
  if (!dtype_it->value.IsString()) return InvalidArgument(what + ": 'datatype' must be a string");
  const std::string_view dtype_name = StringOf(dtype_it->value);
  const auto dtype = ParseDataType(dtype_name);
  if (!dtype || *dtype == DataType::kInvalid) {
    return InvalidArgument(what + ": unknown 'datatype' '" + std::string(dtype_name) + "'");
  }
  tensor->dtype = *dtype;

  FASTPATH_RETURN_IF_ERROR(DecodeShape(input, what, &tensor->shape));
  // The one place a request's size claim meets the limit, before any allocation.
  auto counted = DeclaredElementCount(tensor->shape, limits.max_elements,
                                      "a request body within the server's limit");
  if (!counted.ok()) return counted.status().WithContext(what);
  const int64_t count = *counted;

  std::optional<uint64_t> binary_size;
  auto params_it = input.FindMember("parameters");
  if (params_it != input.MemberEnd()) {
    const Value& params = params_it->value;
    if (!params.IsObject()) return InvalidArgument(what + ": 'parameters' must be an object");
    Parameters parameters;
    FASTPATH_RETURN_IF_ERROR(DecodeParameters(params, what + ": 'parameters'", &parameters));
    parameters.erase("binary_data_size");
    // Before the data: a shared-memory input has none, and is refused for what it is.
    FASTPATH_RETURN_IF_ERROR(protocol::CheckInputParameters(tensor->name, parameters));
    auto size_it = params.FindMember("binary_data_size");
    if (size_it != params.MemberEnd()) {
      if (!size_it->value.IsUint64()) {
        return InvalidArgument(what + ": 'binary_data_size' must be a non-negative integer");
      }
      binary_size = size_it->value.GetUint64();
    }
  }
  auto data_it = input.FindMember("data");
  const bool has_data = data_it != input.MemberEnd();
  if (has_data == binary_size.has_value()) {
    return InvalidArgument(what + (has_data ? ": sets both 'data' and 'parameters.binary_data_size'"
                                            : ": needs 'data' or 'parameters.binary_data_size'"));
  }
  if (has_data) return DecodeJsonData(data_it->value, tensor->shape, count, limits, what, tensor);

  // Binary data: exactly binary_data_size bytes, next in the body.
  if (!has_header_length && *binary_size > 0) {
    return InvalidArgument(what + ": 'binary_data_size' is set but the request has no "
                                  "Inference-Header-Content-Length header");
  }
  const size_t remaining = binary.size() - *binary_offset;
  if (*binary_size > remaining) {
    return InvalidArgument(what + ": 'binary_data_size' is " + std::to_string(*binary_size) + " but only " +
                           std::to_string(remaining) + " bytes of binary data remain in the body");
  }
  const std::string_view bytes = binary.substr(*binary_offset, *binary_size);
  *binary_offset += *binary_size;
  if (tensor->dtype == DataType::kBytes) {
    auto elements = SplitBytesElements(bytes, count, tensor->name);
    if (!elements.ok()) return elements.status();
  } else {
    const uint64_t expected = static_cast<uint64_t>(count) * ElementSize(tensor->dtype);
    if (bytes.size() != expected) {
      return InvalidArgument(what + ": 'binary_data_size' is " + std::to_string(bytes.size()) +
                             " but shape " + ShapeToString(tensor->shape) + " of " +
                             std::string(DataTypeName(tensor->dtype)) + " needs " + std::to_string(expected) +
                             " bytes");
    }
  }
  tensor->data.assign(bytes.data(), bytes.size());
  return Status::Ok();
}

Status DecodeOutputs(const Value& outputs, DecodedInferRequest* decoded) {
  if (!outputs.IsArray()) return InvalidArgument("'outputs' must be an array, got " + std::string(JsonTypeName(outputs)));
  std::set<std::string> seen;
  size_t index = 0;
  for (const Value& output : outputs.GetArray()) {
    std::string what = "output " + std::to_string(index++);
    if (!output.IsObject()) return InvalidArgument(what + " must be an object, got " + JsonTypeName(output));
    FASTPATH_RETURN_IF_ERROR(CheckMembersUnique(output, what));
    auto name_it = output.FindMember("name");
    if (name_it == output.MemberEnd()) return InvalidArgument(what + ": missing 'name'");
    if (!name_it->value.IsString()) return InvalidArgument(what + ": 'name' must be a string");
    RequestedOutput requested;
    requested.name = std::string(StringOf(name_it->value));
    what = "output '" + requested.name + "'";
    if (!seen.insert(requested.name).second) return InvalidArgument(what + " is requested more than once");
    auto params_it = output.FindMember("parameters");
    if (params_it != output.MemberEnd()) {
      const Value& params = params_it->value;
      if (!params.IsObject()) return InvalidArgument(what + ": 'parameters' must be an object");
      auto binary_it = params.FindMember("binary_data");
      if (binary_it != params.MemberEnd()) {
        if (!binary_it->value.IsBool()) return InvalidArgument(what + ": 'binary_data' must be true or false");
        decoded->encoding.binary[requested.name] = binary_it->value.GetBool();
      }
      FASTPATH_RETURN_IF_ERROR(DecodeParameters(params, what + ": 'parameters'", &requested.parameters));
      FASTPATH_RETURN_IF_ERROR(
          protocol::CheckOutputParameters(requested.name, requested.parameters));
    }
    decoded->request.outputs.push_back(std::move(requested));
  }
  return Status::Ok();
}

// --- The simdjson fast path ---
//
// RapidJSON's path builds a Document, then walks it with a lookup per field, a message
// context per tensor and a map per "parameters"; on JSON tensors its parse spends most of
// the time on the numbers of "data" (a scan, from_chars on each number's text, then two
// walks of the tree). The fast path reads the JSON once with simdjson On-Demand, straight
// into the DecodedInferRequest: each input's "data" into the tensor's bytes. It decodes
// only requests that it reads exactly as the RapidJSON path would and that the decoding
// accepts: the members that the decoding reads, each once ("data" after the "datatype"
// and "shape" it needs), parameters of scalar values. On anything else, errors included,
// it gives up and RapidJSON parses the body again, so every refusal is RapidJSON's and
// worded by the decoding above. Where the two parsers differ:
// - simdjson refuses what RapidJSON takes here (invalid UTF-8, lone surrogate escapes, NaN
//   and Infinity, numbers beyond double's range): given up, RapidJSON decides. Both refuse
//   unescaped control characters (simdjson in its first stage, keys included).
// - On-Demand checks only what is read, and neither what follows the root nor its depth:
//   every value is read (an unknown member gives up rather than being skipped), content
//   after the root gives up, and only "data" nests, to a depth counted here.
// - RapidJSON refuses as "too big" some numbers simdjson reads ("0e400", an integer part of
//   400 digits), and types numbers its own way (Int64, Uint64, Double): numbers outside
//   "data", and the rare hard ones in it, are read by ParseJsonNumber, RapidJSON's own.

// The per-thread parser keeps its buffers (about 6 bytes per byte of JSON) between
// requests; a larger body gets a parser of its own, freed with it.
constexpr size_t kRetainedParserBytes = size_t{1} << 20;

using simdjson::ondemand::json_type;
using OnDemandValue = simdjson::ondemand::value;

// A scalar's text: simdjson's token includes the whitespace after it.
std::string_view WithoutTrailingWhitespace(std::string_view token) {
  const size_t end = token.find_last_not_of(" \t\n\r");
  return end == std::string_view::npos ? std::string_view() : token.substr(0, end + 1);
}

// Whether simdjson 3.0.1's get_double reads `token` (whitespace after it included) as
// from_chars does, correctly rounded. It misreads "0." followed by 20 significant digits
// or more, whose value overflows its 64-bit accumulator unnoticed (simdjson issue 2093,
// fixed in 3.6.3): more than 21 characters after the sign. Other long mantissas it
// notices and reads exactly; a mantissa of at most 19 digits never overflows. Python's
// repr of a double has at most 17.
bool SimdjsonReadsExactly(std::string_view token) {
  const size_t sign = !token.empty() && token.front() == '-' ? 1 : 0;
  if (token.size() - sign <= 21) return true;
  int digits = 0;
  for (char c : token) {
    if (c == 'e' || c == 'E') break;
    digits += c >= '0' && c <= '9';
  }
  return digits <= 19;
}

// The double that the RapidJSON path's GetDouble() gives for a "data" number.
bool ReadDouble(OnDemandValue& leaf, double* d) {
  const std::string_view token = leaf.raw_json_token();
  if (leaf.get_double().get(*d)) return false;  // not a number, or beyond double's range
  // A normal double read exactly is the correctly rounded value, as RapidJSON's path has
  // it (an integer's too: its Int64 converts to the same double). Its text is not one
  // that RapidJSON refuses as too big: a non-zero number refused for its exponent is
  // beyond double's range, and its integer part has fewer than 309 digits.
  if (std::isnormal(*d) && SimdjsonReadsExactly(token)) return true;
  const std::string_view text = WithoutTrailingWhitespace(token);
  // A long mantissa's wrapped accumulator can read as 0 too ("0.018446744073709551616" is
  // 2^64 after the point, found by the fuzz target): a zero is taken only from a text
  // simdjson reads exactly.
  if (*d == 0 && SimdjsonReadsExactly(token)) {
    // A zero without exponent, common in tensors, has "0" for integer part, which
    // RapidJSON never refuses. Without a fraction it is the integer 0 on RapidJSON's path
    // ("-0" too), so +0.0; with one ("-0.0", or too small for a double) it is ±0 by its
    // sign there, as simdjson reads it.
    const size_t mark = text.find_first_of(".eE");
    if (mark == std::string_view::npos) {
      *d = 0.0;
      return true;
    }
    if (text.find_first_of("eE", mark) == std::string_view::npos) return true;
  }
  // Rare: a subnormal, a zero with an exponent, a long mantissa.
  Value n;
  if (!ParseJsonNumber(text, &n)) return false;
  *d = n.GetDouble();
  return true;
}

template <typename T>
bool ReadFloat(OnDemandValue& leaf, T* x) {
  double d = 0;
  if (!ReadDouble(leaf, &d)) return false;
  if constexpr (std::is_same_v<T, float>) {
    if (std::isfinite(d) && std::fabs(d) >= kFloatOverflow)
      return false;  // DecodeFloats refuses it
  }
  *x = static_cast<T>(d);
  return true;
}

// get_int64 (get_uint64) takes exactly the integer texts that the RapidJSON path makes an
// Int64 (a non-negative Uint64) of; out of T's range, DecodeIntegers refuses them.
template <typename T>
bool ReadInteger(OnDemandValue& leaf, T* x) {
  if constexpr (std::is_signed_v<T>) {
    int64_t n = 0;
    if (leaf.get_int64().get(n) || n < std::numeric_limits<T>::min() ||
        n > std::numeric_limits<T>::max()) {
      return false;
    }
    *x = static_cast<T>(n);
  } else {
    uint64_t n = 0;
    if (leaf.get_uint64().get(n) || n > std::numeric_limits<T>::max()) return false;
    *x = static_cast<T>(n);
  }
  return true;
}

bool ReadBool(OnDemandValue& leaf, uint8_t* x) {
  bool b = false;
  if (leaf.get_bool().get(b)) return false;
  *x = b ? 1 : 0;
  return true;
}

// ForEachLeaf on simdjson's values: `fn` on every non-array value, depth first. False
// where `fn` is, and where ForEachLeaf refuses the nesting or `v` is not an array.
template <typename Fn>
bool ForEachFastLeaf(OnDemandValue& v, int depth_left, Fn& fn) {
  simdjson::ondemand::array array;
  if (depth_left <= 0 || v.get_array().get(array)) return false;
  for (auto element : array) {
    OnDemandValue e;
    json_type type;
    if (std::move(element).get(e) || e.type().get(type)) return false;
    if (!(type == json_type::array ? ForEachFastLeaf(e, depth_left - 1, fn) : fn(e))) return false;
  }
  return true;
}

// Reads one body's JSON straight into a DecodedInferRequest (see above). Every method
// returns false to give up.
class FastRequestReader {
 public:
  // `binary` is the body after the JSON; `has_header_length` whether the request has an
  // Inference-Header-Content-Length.
  FastRequestReader(size_t json_size, std::string_view binary, bool has_header_length,
                    const InferCodecLimits& limits, DecodedInferRequest* out)
      : json_size_(json_size),
        binary_(binary),
        has_header_length_(has_header_length),
        limits_(limits),
        out_(*out) {}

  bool Read(simdjson::ondemand::document& json) {
    simdjson::ondemand::object root;
    if (json.get_object().get(root)) return false;
    InferRequest& request = out_.request;
    bool has_id = false;
    bool has_parameters = false;
    bool has_inputs = false;
    bool has_outputs = false;
    size_t binary_offset = 0;
    const bool read = ForEachMember(root, [&](std::string_view key, OnDemandValue& v) {
      if (key == "id" && !std::exchange(has_id, true)) return ReadString(v, &request.id);
      if (key == "parameters" && !std::exchange(has_parameters, true)) {
        return ReadParameters(v, &request.parameters);
      }
      if (key == "inputs" && !std::exchange(has_inputs, true)) {
        return ForEachElement(v, [&](simdjson::ondemand::object& input) {
          return ReadInput(input, &binary_offset, &request.inputs.emplace_back());
        });
      }
      if (key == "outputs" && !std::exchange(has_outputs, true)) {
        return ForEachElement(
            v, [&](simdjson::ondemand::object& output) { return ReadOutput(output); });
      }
      return false;  // a key repeated, or one the decoding does not read
    });
    // On-Demand stops at the root's end; RapidJSON refuses anything after it.
    if (!read || json.current_location().error() != simdjson::OUT_OF_BOUNDS) return false;
    if (!has_inputs || binary_offset != binary_.size()) return false;
    if (!protocol::CheckRequestParameters(request.parameters).ok()) return false;
    auto binary_output = request.parameters.find("binary_data_output");
    if (binary_output != request.parameters.end()) {
      const bool* on = std::get_if<bool>(&binary_output->second);
      if (on == nullptr) return false;
      out_.encoding.binary_by_default = *on;
    }
    return !NamesRepeat(request.inputs) && !NamesRepeat(request.outputs);
  }

 private:
  // Whether two of `items` share a name. Sorted, not compared pairwise: the count is the
  // client's, up to the body limit.
  template <typename T>
  static bool NamesRepeat(const std::vector<T>& items) {
    if (items.size() < 2) return false;
    std::vector<std::string_view> names;
    names.reserve(items.size());
    for (const T& item : items) names.emplace_back(item.name);
    std::sort(names.begin(), names.end());
    return std::adjacent_find(names.begin(), names.end()) != names.end();
  }

  // read(key, value) on each of an object's members, in order.
  template <typename Fn>
  static bool ForEachMember(simdjson::ondemand::object& object, Fn&& read) {
    for (auto member : object) {
      simdjson::ondemand::field field;
      std::string_view key;
      if (std::move(member).get(field) || field.unescaped_key().get(key)) return false;
      if (!read(key, field.value())) return false;
    }
    return true;
  }

  // read(object) on each element of an array of objects.
  template <typename Fn>
  static bool ForEachElement(OnDemandValue& v, Fn&& read) {
    simdjson::ondemand::array array;
    if (v.get_array().get(array)) return false;
    for (auto element : array) {
      simdjson::ondemand::object object;
      if (std::move(element).get_object().get(object) || !read(object)) return false;
    }
    return true;
  }

  static bool ReadString(OnDemandValue& v, std::string* out) {
    std::string_view s;
    if (v.get_string().get(s)) return false;
    out->assign(s.data(), s.size());
    return true;
  }

  // A "parameters" object as DecodeParameters decodes it; a repeated key gives up.
  static bool ReadParameters(OnDemandValue& v, Parameters* out) {
    simdjson::ondemand::object object;
    if (v.get_object().get(object)) return false;
    return ForEachMember(object, [&](std::string_view key, OnDemandValue& value) {
      json_type type;
      if (value.type().get(type)) return false;
      ParameterValue parameter;
      switch (type) {
        case json_type::boolean: {
          bool b = false;
          if (value.get_bool().get(b)) return false;
          parameter = b;
          break;
        }
        case json_type::number: {
          // simdjson checks the grammar; the value and its type are RapidJSON's.
          const std::string_view text = WithoutTrailingWhitespace(value.raw_json_token());
          double checked = 0;
          Value n;
          if (value.get_double().get(checked) || !ParseJsonNumber(text, &n)) return false;
          if (n.IsInt64()) {
            parameter = n.GetInt64();
          } else {
            parameter = n.GetDouble();
          }
          break;
        }
        case json_type::string: {
          std::string s;
          if (!ReadString(value, &s)) return false;
          parameter = std::move(s);
          break;
        }
        default:
          return false;  // refused by DecodeParameters
      }
      return out->emplace(std::string(key), std::move(parameter)).second;
    });
  }

  // A "shape" that DecodeShape accepts: get_int64 takes exactly the integer texts that the
  // RapidJSON path makes an Int64 of.
  static bool ReadShape(OnDemandValue& v, std::vector<int64_t>* shape) {
    simdjson::ondemand::array array;
    if (v.get_array().get(array)) return false;
    for (auto element : array) {
      int64_t d = 0;
      if (std::move(element).get_int64().get(d)) return false;
      shape->push_back(d);
    }
    return true;
  }

  // One entry of "inputs", as DecodeInput decodes it. "data" is read only after the
  // "datatype" and "shape" that give its type and element count.
  bool ReadInput(simdjson::ondemand::object& input, size_t* binary_offset, Tensor* tensor) {
    bool has_name = false;
    bool has_dtype = false;
    bool has_shape = false;
    bool has_parameters = false;
    bool has_data = false;
    int64_t count = -1;  // once the datatype and shape are read
    Parameters parameters;
    const bool read = ForEachMember(input, [&](std::string_view key, OnDemandValue& v) {
      if (key == "name" && !std::exchange(has_name, true)) return ReadString(v, &tensor->name);
      if (key == "datatype" && !std::exchange(has_dtype, true)) {
        std::string_view name;
        if (v.get_string().get(name)) return false;
        const auto dtype = ParseDataType(name);
        if (!dtype || *dtype == DataType::kInvalid) return false;
        tensor->dtype = *dtype;
      } else if (key == "shape" && !std::exchange(has_shape, true)) {
        if (!ReadShape(v, &tensor->shape)) return false;
      } else if (key == "parameters" && !std::exchange(has_parameters, true)) {
        return ReadParameters(v, &parameters);
      } else if (key == "data" && !std::exchange(has_data, true)) {
        return count >= 0 && ReadData(v, tensor->dtype, count, &tensor->data);
      } else {
        return false;
      }
      if (has_dtype && has_shape) {
        const auto counted = ElementCount(tensor->shape, limits_.max_elements);
        if (!counted.ok()) return false;
        count = *counted;
      }
      return true;
    });
    if (!read || !has_name || count < 0) return false;
    std::optional<uint64_t> binary_size;
    auto size_it = parameters.find("binary_data_size");
    if (size_it != parameters.end()) {
      const int64_t* size = std::get_if<int64_t>(&size_it->second);
      if (size == nullptr || *size < 0) return false;
      binary_size = static_cast<uint64_t>(*size);
      parameters.erase(size_it);
    }
    if (!protocol::CheckInputParameters(tensor->name, parameters).ok()) return false;
    if (has_data) return !binary_size;
    if (!binary_size || (!has_header_length_ && *binary_size > 0)) return false;
    if (*binary_size > binary_.size() - *binary_offset) return false;
    const std::string_view bytes = binary_.substr(*binary_offset, *binary_size);
    *binary_offset += *binary_size;
    if (tensor->dtype == DataType::kBytes) {
      if (!SplitBytesElements(bytes, count, tensor->name).ok()) return false;
    } else if (bytes.size() != static_cast<uint64_t>(count) * ElementSize(tensor->dtype)) {
      return false;
    }
    tensor->data.assign(bytes.data(), bytes.size());
    return true;
  }

  // One entry of "outputs", as DecodeOutputs decodes it.
  bool ReadOutput(simdjson::ondemand::object& output) {
    RequestedOutput requested;
    bool has_name = false;
    bool has_parameters = false;
    const bool read = ForEachMember(output, [&](std::string_view key, OnDemandValue& v) {
      if (key == "name" && !std::exchange(has_name, true)) return ReadString(v, &requested.name);
      if (key == "parameters" && !std::exchange(has_parameters, true)) {
        return ReadParameters(v, &requested.parameters);
      }
      return false;
    });
    if (!read || !has_name) return false;
    auto binary_it = requested.parameters.find("binary_data");
    if (binary_it != requested.parameters.end()) {
      const bool* binary = std::get_if<bool>(&binary_it->second);
      if (binary == nullptr) return false;
      out_.encoding.binary[requested.name] = *binary;
    }
    if (!protocol::CheckOutputParameters(requested.name, requested.parameters).ok()) return false;
    out_.request.outputs.push_back(std::move(requested));
    return true;
  }

  // "data" into `out` exactly as DecodeJsonData would decode it: numbers and booleans
  // (BYTES are strings, FP16 and BF16 are refused by DecodeJsonData).
  bool ReadData(OnDemandValue& data, DataType dtype, int64_t count, std::string* out) const {
    // Every element takes a byte of JSON at least. DecodeJsonData refuses a larger count
    // without allocating it, so it is not allocated here either.
    if (static_cast<uint64_t>(count) > json_size_) return false;
    switch (dtype) {
      case DataType::kBool: return ReadElements<uint8_t>(data, count, out, ReadBool);
      case DataType::kUint8: return ReadElements<uint8_t>(data, count, out, ReadInteger<uint8_t>);
      case DataType::kUint16: return ReadElements<uint16_t>(data, count, out, ReadInteger<uint16_t>);
      case DataType::kUint32: return ReadElements<uint32_t>(data, count, out, ReadInteger<uint32_t>);
      case DataType::kUint64: return ReadElements<uint64_t>(data, count, out, ReadInteger<uint64_t>);
      case DataType::kInt8: return ReadElements<int8_t>(data, count, out, ReadInteger<int8_t>);
      case DataType::kInt16: return ReadElements<int16_t>(data, count, out, ReadInteger<int16_t>);
      case DataType::kInt32: return ReadElements<int32_t>(data, count, out, ReadInteger<int32_t>);
      case DataType::kInt64: return ReadElements<int64_t>(data, count, out, ReadInteger<int64_t>);
      case DataType::kFp32: return ReadElements<float>(data, count, out, ReadFloat<float>);
      case DataType::kFp64: return ReadElements<double>(data, count, out, ReadFloat<double>);
      default: return false;
    }
  }

  // Exactly `count` leaves, each read by read(leaf, &element).
  template <typename T, typename ReadFn>
  bool ReadElements(OnDemandValue& data, int64_t count, std::string* out, ReadFn read) const {
    out->resize(static_cast<size_t>(count) * sizeof(T));
    int64_t i = 0;
    auto element = [&](OnDemandValue& leaf) {
      T x{};
      if (i == count || !read(leaf, &x)) return false;
      std::memcpy(out->data() + static_cast<size_t>(i++) * sizeof(T), &x, sizeof(T));
      return true;
    };
    return ForEachFastLeaf(data, limits_.max_data_depth, element) && i == count;
  }

  const size_t json_size_;
  const std::string_view binary_;
  const bool has_header_length_;
  const InferCodecLimits& limits_;
  DecodedInferRequest& out_;
};

// The fast path over body[0, json_size), the binary part after it; false when it gave up
// (what it left in `out` is then to be discarded), or when the parser's buffers could not
// be had (`*no_memory` then says so).
bool ReadFast(std::string& body, size_t json_size, bool has_header_length,
              const InferCodecLimits& limits, DecodedInferRequest* out, bool* no_memory) {
  static_assert(kInferBodyPadding >= simdjson::SIMDJSON_PADDING);
  // simdjson reads past the JSON; whatever is there (the binary part, say) is only read.
  if (body.capacity() - json_size < simdjson::SIMDJSON_PADDING) {
    body.reserve(json_size + kInferBodyPadding);
  }
  thread_local simdjson::ondemand::parser retained;
  std::optional<simdjson::ondemand::parser> own;
  simdjson::ondemand::parser& parser = json_size <= kRetainedParserBytes ? retained : own.emplace();
  // The parser's buffers, allocated here so that a failure is answered (iterate() would
  // allocate them and go on). simdjson 3.0 reports only its larger buffer's failure: when
  // its string buffer alone cannot be had, it goes on with a null one and crashes. Both
  // failing together, the usual case when memory runs out (under `ulimit -v`), is caught.
  if (parser.capacity() < json_size && parser.allocate(json_size) != simdjson::SUCCESS) {
    *no_memory = true;
    return false;
  }
  simdjson::ondemand::document json;
  if (parser.iterate(body.data(), json_size, body.capacity()).get(json)) return false;
  const std::string_view binary = std::string_view(body).substr(json_size);
  return FastRequestReader(json_size, binary, has_header_length, limits, out).Read(json);
}

// Writes the elements of a fixed-size tensor as a flat JSON array.
template <typename T, typename WriteFn>
void WriteElements(JsonWriter& w, const std::string& data, WriteFn write) {
  const size_t n = data.size() / sizeof(T);
  for (size_t i = 0; i < n; ++i) {
    T x;
    std::memcpy(&x, data.data() + i * sizeof(T), sizeof(T));
    write(x);
  }
}

Status WriteJsonData(JsonWriter& w, const Tensor& t, int64_t count) {
  switch (t.dtype) {
    case DataType::kBool: WriteElements<uint8_t>(w, t.data, [&](uint8_t x) { w.Bool(x != 0); }); break;
    case DataType::kUint8: WriteElements<uint8_t>(w, t.data, [&](uint8_t x) { w.Uint(x); }); break;
    case DataType::kUint16: WriteElements<uint16_t>(w, t.data, [&](uint16_t x) { w.Uint(x); }); break;
    case DataType::kUint32: WriteElements<uint32_t>(w, t.data, [&](uint32_t x) { w.Uint(x); }); break;
    case DataType::kUint64: WriteElements<uint64_t>(w, t.data, [&](uint64_t x) { w.Uint64(x); }); break;
    case DataType::kInt8: WriteElements<int8_t>(w, t.data, [&](int8_t x) { w.Int(x); }); break;
    case DataType::kInt16: WriteElements<int16_t>(w, t.data, [&](int16_t x) { w.Int(x); }); break;
    case DataType::kInt32: WriteElements<int32_t>(w, t.data, [&](int32_t x) { w.Int(x); }); break;
    case DataType::kInt64: WriteElements<int64_t>(w, t.data, [&](int64_t x) { w.Int64(x); }); break;
    // float -> double is exact, and the shortest double that round-trips reads back as
    // the same double, hence the same float.
    case DataType::kFp32: WriteElements<float>(w, t.data, [&](float x) { w.Double(static_cast<double>(x)); }); break;
    case DataType::kFp64: WriteElements<double>(w, t.data, [&](double x) { w.Double(x); }); break;
    case DataType::kBytes: {
      auto elements = SplitBytesElements(t.data, count, t.name);
      if (!elements.ok()) return Internal("output '" + t.name + "': " + elements.status().message());
      // JSON carries text: an element that is not UTF-8 (an image's bytes) would reach the
      // client changed, each stray byte as U+FFFD. Triton writes the bytes as they are, in a
      // body no JSON reader accepts; here the client is told how to get them.
      for (size_t i = 0; i < elements->size(); ++i) {
        if (!IsValidUtf8((*elements)[i])) {
          return InvalidArgument("output '" + t.name + "' element " + std::to_string(i) +
                                 " is not UTF-8 text, which JSON cannot carry; request it with "
                                 "parameters {\"binary_data\": true}");
        }
      }
      for (std::string_view e : *elements) {
        w.String(e.data(), static_cast<rapidjson::SizeType>(e.size()));
      }
      break;
    }
    default:
      return InvalidArgument("output '" + t.name + "' is " + std::string(DataTypeName(t.dtype)) +
                             ", which cannot be returned as JSON; request it with "
                             "parameters {\"binary_data\": true}");
  }
  return Status::Ok();
}

// Whether the body is a JSON value with more after it (`error` being how the whole body
// failed to parse): binary tensor data sent without the Inference-Header-Content-Length
// header that says where the JSON ends. Tensor bytes are seldom UTF-8 throughout, and the
// whole body's first stray byte is found before its JSON is read: the JSON before it is.
bool JsonThenMore(std::string& body, const JsonParseError& error) {
  if (error.code == rapidjson::kParseErrorDocumentRootNotSingular) return true;
  if (error.code != rapidjson::kParseErrorStringInvalidEncoding || error.offset == 0) return false;
  rapidjson::Document before;
  const auto parsed = ParseJsonInPlace(body.data(), error.offset, &before);
  return !parsed || parsed->code == rapidjson::kParseErrorDocumentRootNotSingular;
}

void WriteParameters(JsonWriter& w, const Parameters& params) {
  w.StartObject();
  for (const auto& [key, value] : params) {
    WriteKey(w, key);
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, bool>) w.Bool(v);
          else if constexpr (std::is_same_v<V, int64_t>) w.Int64(v);
          else if constexpr (std::is_same_v<V, double>) w.Double(v);
          else WriteString(w, v);
        },
        value);
  }
  w.EndObject();
}

}  // namespace

Status CheckMembersUnique(const Value& object, const std::string& where) {
  if (!object.IsObject() || object.MemberCount() < 2) return Status::Ok();
  std::vector<std::string_view> names;
  names.reserve(object.MemberCount());
  for (const auto& m : object.GetObject()) names.push_back(StringOf(m.name));
  std::sort(names.begin(), names.end());
  if (auto twice = std::adjacent_find(names.begin(), names.end()); twice != names.end()) {
    return InvalidArgument(where + ": '" + std::string(*twice) + "' is given twice");
  }
  return Status::Ok();
}

Status DecodeParameters(const Value& v, const std::string& where, Parameters* out) {
  if (!v.IsObject()) return InvalidArgument(where + " must be an object, got " + JsonTypeName(v));
  for (const auto& m : v.GetObject()) {
    std::string key(StringOf(m.name));
    const Value& p = m.value;
    // Which of two would count is a guess (a later one, for most JSON readers): refused.
    if (out->contains(key)) return InvalidArgument(where + ": '" + key + "' is given twice");
    if (p.IsBool()) {
      (*out)[key] = p.GetBool();
    } else if (p.IsInt64()) {
      (*out)[key] = p.GetInt64();
    } else if (p.IsNumber()) {
      (*out)[key] = p.GetDouble();
    } else if (p.IsString()) {
      (*out)[key] = std::string(StringOf(p));
    } else {
      return InvalidArgument(where + ": '" + key + "' must be a boolean, number or string, got " +
                             JsonTypeName(p));
    }
  }
  return Status::Ok();
}


StatusOr<DecodedInferRequest> DecodeInferRequest(std::string& body, std::optional<size_t> json_length,
                                                 const InferCodecLimits& limits) {
  return internal::DecodeInferRequest(body, json_length, limits, internal::JsonPath::kFastWithFallback);
}

StatusOr<DecodedInferRequest> internal::DecodeInferRequest(std::string& body, std::optional<size_t> json_length,
                                                           const InferCodecLimits& limits, JsonPath path,
                                                           bool* fast_path_used) {
  if (json_length && *json_length > body.size()) {
    return InvalidArgument("Inference-Header-Content-Length is " + std::to_string(*json_length) +
                           " but the body has only " + std::to_string(body.size()) + " bytes");
  }
  if (json_length && *json_length == 0) {
    // Triton reads such a body as one raw input tensor; fastpath has no raw-input models.
    return InvalidArgument("Inference-Header-Content-Length is 0: raw binary requests without a JSON "
                           "header are not supported");
  }
  const size_t json_size = json_length.value_or(body.size());
  if (json_size == 0) return InvalidArgument("the request body is empty; expected a JSON inference request");

  if (path == JsonPath::kFastWithFallback) {
    DecodedInferRequest decoded;
    bool no_memory = false;
    const bool fast =
        ReadFast(body, json_size, json_length.has_value(), limits, &decoded, &no_memory);
    if (fast_path_used != nullptr) *fast_path_used = fast;
    if (fast) return decoded;
    if (no_memory) {
      return ResourceExhausted("out of memory: the server could not allocate the " +
                               std::to_string(json_size) + "-byte request JSON's parser");
    }
  }
  rapidjson::Document doc;
  if (auto error = ParseJsonInPlace(body.data(), json_size, &doc)) {
    std::string message = DescribeJsonError(*error, "the request body");
    if (!json_length && JsonThenMore(body, *error)) {
      message +=
          " (binary tensor data after the JSON needs the Inference-Header-Content-Length header)";
    }
    return InvalidArgument(message);
  }
  if (!doc.IsObject()) return InvalidArgument("the request JSON must be an object, got " + std::string(JsonTypeName(doc)));
  FASTPATH_RETURN_IF_ERROR(CheckMembersUnique(doc, "the request JSON"));

  DecodedInferRequest decoded;
  InferRequest& request = decoded.request;

  auto id_it = doc.FindMember("id");
  if (id_it != doc.MemberEnd()) {
    if (!id_it->value.IsString()) return InvalidArgument("'id' must be a string");
    request.id = std::string(StringOf(id_it->value));
  }

  auto params_it = doc.FindMember("parameters");
  if (params_it != doc.MemberEnd()) {
    FASTPATH_RETURN_IF_ERROR(DecodeParameters(params_it->value, "'parameters'", &request.parameters));
    FASTPATH_RETURN_IF_ERROR(protocol::CheckRequestParameters(request.parameters));
    auto it = request.parameters.find("binary_data_output");
    if (it != request.parameters.end()) {
      const bool* on = std::get_if<bool>(&it->second);
      if (on == nullptr) return InvalidArgument("'parameters': 'binary_data_output' must be true or false");
      decoded.encoding.binary_by_default = *on;
    }
  }

  auto inputs_it = doc.FindMember("inputs");
  if (inputs_it == doc.MemberEnd()) return InvalidArgument("missing 'inputs'");
  if (!inputs_it->value.IsArray()) {
    return InvalidArgument("'inputs' must be an array, got " + std::string(JsonTypeName(inputs_it->value)));
  }
  const std::string_view binary = std::string_view(body).substr(json_size);
  size_t binary_offset = 0;
  std::set<std::string_view> seen;
  const auto& inputs = inputs_it->value.GetArray();
  request.inputs.resize(inputs.Size());
  for (rapidjson::SizeType i = 0; i < inputs.Size(); ++i) {
    Tensor& tensor = request.inputs[i];
    FASTPATH_RETURN_IF_ERROR(DecodeInput(inputs[i], i, binary, json_length.has_value(),
                                         &binary_offset, limits, &tensor));
    if (!seen.insert(tensor.name).second) {
      return InvalidArgument("input '" + tensor.name + "' appears more than once in 'inputs'");
    }
  }
  if (binary_offset != binary.size()) {
    return InvalidArgument(std::to_string(binary.size() - binary_offset) +
                           " bytes of binary data follow the JSON header but no input's "
                           "'binary_data_size' accounts for them");
  }

  auto outputs_it = doc.FindMember("outputs");
  if (outputs_it != doc.MemberEnd()) FASTPATH_RETURN_IF_ERROR(DecodeOutputs(outputs_it->value, &decoded));
  return decoded;
}

StatusOr<EncodedInferResponse> EncodeInferResponse(const InferResponse& response,
                                                   const OutputEncoding& encoding) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  std::vector<const Tensor*> binary_outputs;
  size_t binary_size = 0;

  w.StartObject();
  if (!response.id.empty()) {
    WriteKey(w, "id");
    WriteString(w, response.id);
  }
  WriteKey(w, "model_name");
  WriteString(w, response.model_name);
  WriteKey(w, "model_version");
  WriteString(w, response.model_version);
  if (!response.parameters.empty()) {
    WriteKey(w, "parameters");
    WriteParameters(w, response.parameters);
  }
  WriteKey(w, "outputs");
  w.StartArray();
  for (const Tensor& t : response.outputs) {
    // The backend's output must match its own shape before any of it is rendered.
    Status valid = ValidateTensorData(t);
    if (!valid.ok()) return Internal("output '" + t.name + "' is inconsistent: " + valid.message());
    const int64_t count = *ElementCount(t.shape);  // validated just above
    w.StartObject();
    WriteKey(w, "name");
    WriteString(w, t.name);
    WriteKey(w, "datatype");
    WriteString(w, DataTypeName(t.dtype));
    WriteKey(w, "shape");
    w.StartArray();
    for (int64_t d : t.shape) w.Int64(d);
    w.EndArray();
    if (encoding.IsBinary(t.name)) {
      WriteKey(w, "parameters");
      w.StartObject();
      WriteKey(w, "binary_data_size");
      w.Uint64(t.data.size());
      w.EndObject();
      binary_outputs.push_back(&t);
      binary_size += t.data.size();
    } else {
      WriteKey(w, "data");
      w.StartArray();
      FASTPATH_RETURN_IF_ERROR(WriteJsonData(w, t, count));
      w.EndArray();
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();

  EncodedInferResponse encoded;
  encoded.json_length = buffer.GetSize();
  encoded.body.reserve(encoded.json_length + binary_size);
  encoded.body.append(buffer.GetString(), buffer.GetSize());
  for (const Tensor* t : binary_outputs) encoded.body.append(t->data);
  encoded.has_binary = binary_size > 0;
  return encoded;
}

}  // namespace fastpath::frontend::http
