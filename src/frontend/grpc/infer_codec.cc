#include "infer_codec.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "fastpath/protocol/request_policy.h"

namespace fastpath::frontend::grpc_internal {
namespace {

using inference::InferParameter;
using inference::InferTensorContents;

std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

// ---- Parameters ----

StatusOr<ParameterValue> FromProto(const std::string& key, const InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case InferParameter::kBoolParam:
      return ParameterValue(p.bool_param());
    case InferParameter::kInt64Param:
      return ParameterValue(static_cast<int64_t>(p.int64_param()));
    case InferParameter::kStringParam:
      return ParameterValue(p.string_param());
    case InferParameter::kDoubleParam:
      return ParameterValue(p.double_param());
    case InferParameter::kUint64Param:
      // Our parameter vocabulary has no unsigned type; a value that does not fit int64 is
      // refused rather than wrapped into a negative number.
      if (p.uint64_param() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return InvalidArgument("parameter " + Quote(key) + " has uint64 value " +
                               std::to_string(p.uint64_param()) + ", larger than int64 holds");
      }
      return ParameterValue(static_cast<int64_t>(p.uint64_param()));
    case InferParameter::PARAMETER_CHOICE_NOT_SET:
      break;
  }
  return InvalidArgument("parameter " + Quote(key) + " has no value");
}

template <typename Map>
StatusOr<Parameters> ParametersFromProto(const Map& map, std::string_view where) {
  Parameters out;
  for (const auto& [key, value] : map) {
    auto converted = FromProto(key, value);
    if (!converted.ok()) return converted.status().WithContext(std::string(where));
    out.emplace(key, std::move(converted).value());
  }
  return out;
}

template <typename Map>
void ParametersToProto(const Parameters& params, Map* out) {
  for (const auto& [key, value] : params) {
    InferParameter& p = (*out)[key];
    std::visit(
        [&p](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, bool>) {
            p.set_bool_param(v);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            p.set_int64_param(v);
          } else if constexpr (std::is_same_v<T, double>) {
            p.set_double_param(v);
          } else {
            p.set_string_param(v);
          }
        },
        value);
  }
}

// ---- Typed contents ----

// The InferTensorContents field that carries each datatype, by its field name.
const char* TypedFieldFor(DataType dtype) {
  switch (dtype) {
    case DataType::kBool: return "bool_contents";
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32: return "int_contents";
    case DataType::kInt64: return "int64_contents";
    case DataType::kUint8:
    case DataType::kUint16:
    case DataType::kUint32: return "uint_contents";
    case DataType::kUint64: return "uint64_contents";
    case DataType::kFp32: return "fp32_contents";
    case DataType::kFp64: return "fp64_contents";
    case DataType::kBytes: return "bytes_contents";
    default: return nullptr;  // FP16, BF16: raw only
  }
}

// Appends `values` as little-endian elements of type Out, refusing any value that Out
// cannot hold (Triton truncates silently; a wrapped INT8 is a wrong answer, not a
// degraded one, so fastpath says so instead).
template <typename Out, typename Values>
Status AppendNarrowed(const Values& values, const std::string& tensor, std::string* out) {
  out->resize(static_cast<size_t>(values.size()) * sizeof(Out));
  char* dst = out->data();
  int64_t index = 0;
  for (const auto v : values) {
    if (!std::in_range<Out>(v)) {
      return InvalidArgument("input " + Quote(tensor) + " element " + std::to_string(index) +
                             " has value " + std::to_string(v) + ", out of range for its datatype");
    }
    const Out narrowed = static_cast<Out>(v);
    std::memcpy(dst, &narrowed, sizeof(Out));
    dst += sizeof(Out);
    ++index;
  }
  return Status::Ok();
}

// Same-width element types: the repeated field's storage is already the tensor layout
// on a little-endian host.
template <typename Values>
void AppendVerbatim(const Values& values, std::string* out) {
  using T = typename Values::value_type;
  out->assign(reinterpret_cast<const char*>(values.data()),
              static_cast<size_t>(values.size()) * sizeof(T));
}

// Number of entries in each typed field, in field-number order.
struct TypedCounts {
  int64_t by_field[8];
};

TypedCounts CountTyped(const InferTensorContents& c) {
  return {{c.bool_contents_size(), c.int_contents_size(), c.int64_contents_size(),
           c.uint_contents_size(), c.uint64_contents_size(), c.fp32_contents_size(),
           c.fp64_contents_size(), c.bytes_contents_size()}};
}

constexpr const char* kTypedFieldNames[8] = {"bool_contents",  "int_contents",  "int64_contents",
                                             "uint_contents",  "uint64_contents", "fp32_contents",
                                             "fp64_contents",  "bytes_contents"};

Status TypedContentsToBytes(const InferTensorContents& c, DataType dtype, int64_t count,
                            const std::string& name, std::string* out) {
  const char* expected = TypedFieldFor(dtype);
  const TypedCounts counts = CountTyped(c);
  int64_t received = 0;
  for (int i = 0; i < 8; ++i) {
    if (counts.by_field[i] == 0) continue;
    if (expected == nullptr) {
      return InvalidArgument("input " + Quote(name) + " of datatype " +
                             std::string(DataTypeName(dtype)) +
                             " has no typed representation; send it in raw_input_contents");
    }
    if (std::strcmp(kTypedFieldNames[i], expected) != 0) {
      return InvalidArgument("input " + Quote(name) + " of datatype " +
                             std::string(DataTypeName(dtype)) + " carries data in contents." +
                             kTypedFieldNames[i] + "; expected contents." + expected);
    }
    received = counts.by_field[i];
  }
  if (received != count) {
    return InvalidArgument("input " + Quote(name) + " has " + std::to_string(received) +
                           " elements in contents" + (expected ? std::string(".") + expected : "") +
                           " but its shape needs " + std::to_string(count));
  }
  if (count == 0) return Status::Ok();

  switch (dtype) {
    case DataType::kBool: {
      out->resize(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) (*out)[i] = c.bool_contents(static_cast<int>(i)) ? 1 : 0;
      return Status::Ok();
    }
    case DataType::kInt8: return AppendNarrowed<int8_t>(c.int_contents(), name, out);
    case DataType::kInt16: return AppendNarrowed<int16_t>(c.int_contents(), name, out);
    case DataType::kInt32: AppendVerbatim(c.int_contents(), out); return Status::Ok();
    case DataType::kInt64: AppendVerbatim(c.int64_contents(), out); return Status::Ok();
    case DataType::kUint8: return AppendNarrowed<uint8_t>(c.uint_contents(), name, out);
    case DataType::kUint16: return AppendNarrowed<uint16_t>(c.uint_contents(), name, out);
    case DataType::kUint32: AppendVerbatim(c.uint_contents(), out); return Status::Ok();
    case DataType::kUint64: AppendVerbatim(c.uint64_contents(), out); return Status::Ok();
    case DataType::kFp32: AppendVerbatim(c.fp32_contents(), out); return Status::Ok();
    case DataType::kFp64: AppendVerbatim(c.fp64_contents(), out); return Status::Ok();
    case DataType::kBytes: {
      size_t total = 0;
      for (const auto& e : c.bytes_contents()) total += 4 + e.size();
      out->reserve(total);
      for (const auto& e : c.bytes_contents()) AppendBytesElement(out, e);
      return Status::Ok();
    }
    default:
      break;
  }
  return Internal("typed contents of datatype " + std::string(DataTypeName(dtype)) +
                  " are not handled");
}

// ---- One input ----

Status ParseInput(inference::ModelInferRequest& request, int index, bool use_raw,
                  int64_t max_message_bytes, Tensor* tensor) {
  const auto& io = request.inputs(index);
  if (io.name().empty()) {
    return InvalidArgument("inputs[" + std::to_string(index) + "] has no name");
  }
  tensor->name = io.name();
  const auto dtype = ParseDataType(io.datatype());
  if (!dtype) {
    return InvalidArgument("input " + Quote(io.name()) + " has unknown datatype " +
                           Quote(io.datatype()));
  }
  tensor->dtype = *dtype;
  tensor->shape.assign(io.shape().begin(), io.shape().end());

  // No tensor in a message of max_message_bytes can hold more elements than this: a
  // fixed-size element takes its size, a BYTES element at least its 4-byte prefix (raw)
  // or a tag and a length byte (typed). Checked before anything is sized by the shape.
  const size_t elem = ElementSize(*dtype);
  const int64_t max_elements = max_message_bytes / static_cast<int64_t>(elem == 0 ? 2 : elem);
  auto count =
      DeclaredElementCount(tensor->shape, max_elements,
                           "a message of at most " + std::to_string(max_message_bytes) + " bytes");
  if (!count.ok()) return count.status().WithContext("input " + Quote(io.name()));

  if (use_raw) {
    if (io.has_contents()) {
      return InvalidArgument("contents field must not be specified when using "
                             "raw_input_contents for " + Quote(io.name()));
    }
    std::string& raw = *request.mutable_raw_input_contents(index);
    if (*dtype == DataType::kBytes) {
      auto split = SplitBytesElements(raw, *count, io.name());
      if (!split.ok()) return split.status();
    } else if (raw.size() != static_cast<size_t>(*count) * elem) {
      return InvalidArgument("input " + Quote(io.name()) + " of shape " +
                             ShapeToString(tensor->shape) + " and datatype " + io.datatype() +
                             " needs " + std::to_string(static_cast<size_t>(*count) * elem) +
                             " bytes but raw_input_contents[" + std::to_string(index) + "] has " +
                             std::to_string(raw.size()));
    }
    tensor->data = std::move(raw);
    return Status::Ok();
  }
  if (!io.has_contents() && *count != 0) {
    return InvalidArgument("input " + Quote(io.name()) +
                           " has no data: set its contents or send raw_input_contents");
  }
  return TypedContentsToBytes(io.contents(), *dtype, *count, io.name(), &tensor->data);
}

}  // namespace

StatusOr<InferRequest> ParseModelInferRequest(inference::ModelInferRequest& request,
                                              int64_t max_message_bytes) {
  InferRequest out;
  out.model_name = request.model_name();
  out.model_version = request.model_version();
  out.id = request.id();
  if (out.model_name.empty()) return InvalidArgument("model_name is empty");
  FASTPATH_ASSIGN_OR_RETURN(out.parameters, ParametersFromProto(request.parameters(), "request"));
  FASTPATH_RETURN_IF_ERROR(protocol::CheckRequestParameters(out.parameters));
  // Input parameters before any contents: a shared-memory input has none, and is refused
  // for what it is (protocol/request_policy.h, as over HTTP).
  for (const auto& io : request.inputs()) {
    if (io.parameters().empty()) continue;
    FASTPATH_ASSIGN_OR_RETURN(Parameters params,
                              ParametersFromProto(io.parameters(), "input " + Quote(io.name())));
    FASTPATH_RETURN_IF_ERROR(protocol::CheckInputParameters(io.name(), params));
  }

  // Either every input is raw or none is (Triton's rule): with raw contents present, each
  // input takes the entry at its own index.
  const bool use_raw = request.raw_input_contents_size() > 0;
  if (use_raw && request.raw_input_contents_size() != request.inputs_size()) {
    // Triton's message for a typed input next to raw ones, so check that first.
    for (const auto& io : request.inputs()) {
      if (io.has_contents()) {
        return InvalidArgument("contents field must not be specified when using "
                               "raw_input_contents for " + Quote(io.name()));
      }
    }
    return InvalidArgument("expected " + std::to_string(request.inputs_size()) +
                           " raw_input_contents entries (one per input) but got " +
                           std::to_string(request.raw_input_contents_size()));
  }

  out.inputs.resize(static_cast<size_t>(request.inputs_size()));
  for (int i = 0; i < request.inputs_size(); ++i) {
    FASTPATH_RETURN_IF_ERROR(
        ParseInput(request, i, use_raw, max_message_bytes, &out.inputs[static_cast<size_t>(i)]));
  }

  out.outputs.reserve(static_cast<size_t>(request.outputs_size()));
  for (int i = 0; i < request.outputs_size(); ++i) {
    const auto& o = request.outputs(i);
    if (o.name().empty()) {
      return InvalidArgument("outputs[" + std::to_string(i) + "] has no name");
    }
    FASTPATH_ASSIGN_OR_RETURN(Parameters params,
                              ParametersFromProto(o.parameters(), "output " + Quote(o.name())));
    FASTPATH_RETURN_IF_ERROR(protocol::CheckOutputParameters(o.name(), params));
    out.outputs.push_back({o.name(), std::move(params)});
  }
  return out;
}

Status FillModelInferResponse(InferResponse&& response, const RequestEcho& echo,
                              inference::ModelInferResponse* out) {
  out->set_model_name(response.model_name.empty() ? echo.model_name
                                                  : std::move(response.model_name));
  out->set_model_version(response.model_version.empty() ? echo.model_version
                                                        : std::move(response.model_version));
  out->set_id(response.id.empty() ? echo.id : std::move(response.id));
  ParametersToProto(response.parameters, out->mutable_parameters());
  out->mutable_outputs()->Reserve(static_cast<int>(response.outputs.size()));
  out->mutable_raw_output_contents()->Reserve(static_cast<int>(response.outputs.size()));
  for (Tensor& t : response.outputs) {
    if (t.dtype == DataType::kInvalid) {
      return Internal("output " + Quote(t.name) + " came back without a datatype");
    }
    auto* o = out->add_outputs();
    o->set_name(std::move(t.name));
    o->set_datatype(std::string(DataTypeName(t.dtype)));
    o->mutable_shape()->Add(t.shape.begin(), t.shape.end());
    // Moved, not copied: outputs can be as large as the message limit.
    out->mutable_raw_output_contents()->Add(std::move(t.data));
  }
  return Status::Ok();
}

void FillErrorEcho(const RequestEcho& echo, inference::ModelInferResponse* out) {
  out->set_model_name(echo.model_name);
  out->set_model_version(echo.model_version);
  out->set_id(echo.id);
}

}  // namespace fastpath::frontend::grpc_internal
