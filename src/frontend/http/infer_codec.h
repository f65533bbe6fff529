// The HTTP inference payload codec: KServe v2 JSON tensors plus Triton's binary tensor
// data extension, in both directions. It knows nothing about sockets or routing, so it
// is unit-tested and fuzzed on byte strings alone.
//
// Request body layout: a JSON header of `json_length` bytes (the value of the
// Inference-Header-Content-Length header; the whole body when that header is absent),
// then the raw bytes of every input whose parameters carry "binary_data_size", in input
// order. Responses use the same layout for outputs returned as binary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <rapidjson/document.h>

#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"

// Namespaced apart from the gRPC front end's codec: both link into one binary.
namespace fastpath::frontend::http {

struct InferCodecLimits {
  // A request tensor may not declare more elements than this (checked on the shape,
  // before anything is allocated). The HTTP server derives it from its body limit: no
  // encoding spends less than one byte per element.
  int64_t max_elements = int64_t{64} << 20;
  // Nesting of a "data" array beyond this is refused rather than recursed into.
  int max_data_depth = 32;
};

// How the client asked each output to come back: JSON "data" or binary after the JSON.
struct OutputEncoding {
  bool binary_by_default = false;           // request parameter "binary_data_output"
  std::map<std::string, bool> binary;       // per-output parameter "binary_data"

  bool IsBinary(const std::string& output_name) const {
    auto it = binary.find(output_name);
    return it == binary.end() ? binary_by_default : it->second;
  }
};

struct DecodedInferRequest {
  InferRequest request;  // model_name/model_version are left for the caller (they come from the path)
  OutputEncoding encoding;
};

// Parses an inference request body. `body` may be parsed in situ (its JSON part
// overwritten) and may be reallocated; `json_length` is the parsed
// Inference-Header-Content-Length, nullopt when the header is absent. Every error is
// InvalidArgument (a shape over the limit included; Unimplemented for shared memory and
// classification) with a message that names the offending field or tensor.
//
// The JSON is read first by a simdjson On-Demand fast path, which converts inputs' "data"
// numbers straight into the tensors; anything it does not handle exactly as the RapidJSON
// path would, errors included, is parsed again by RapidJSON, so results and messages are
// RapidJSON's either way.
[[nodiscard]] StatusOr<DecodedInferRequest> DecodeInferRequest(std::string& body,
                                                               std::optional<size_t> json_length,
                                                               const InferCodecLimits& limits);

// Spare capacity past the JSON of a body that the fast path reads (simdjson's padding).
// A body with less is copied once to make room, so the HTTP session reserves it.
inline constexpr size_t kInferBodyPadding = 64;

namespace internal {

enum class JsonPath { kFastWithFallback, kRapidJsonOnly };

// DecodeInferRequest with the path chosen, for the differential tests and the fuzz target
// that hold the fast path to the RapidJSON path's results. `*fast_path_used` (when not
// null) tells whether the fast path's parse was the one decoded.
[[nodiscard]] StatusOr<DecodedInferRequest> DecodeInferRequest(std::string& body,
                                                               std::optional<size_t> json_length,
                                                               const InferCodecLimits& limits,
                                                               JsonPath path,
                                                               bool* fast_path_used = nullptr);

}  // namespace internal

struct EncodedInferResponse {
  std::string body;        // the JSON, then the binary outputs in output order
  size_t json_length = 0;  // bytes of JSON at the start of `body`
  bool has_binary = false; // true when any byte follows the JSON
};

// InvalidArgument naming `where` and the key when `object` has a member twice: which of
// two a reader keeps is a guess (the first, for FindMember; the last, for most readers).
[[nodiscard]] Status CheckMembersUnique(const rapidjson::Value& object, const std::string& where);

// A KServe "parameters" object: bool, integer, number and string values; anything else is
// InvalidArgument naming `where` and the key.
[[nodiscard]] Status DecodeParameters(const rapidjson::Value& v, const std::string& where,
                                      Parameters* out);

// Renders a response as Triton does: {"id"?, "model_name", "model_version",
// "parameters"?, "outputs": [{"name", "datatype", "shape", "data" | "parameters":
// {"binary_data_size": N}}]}. Numbers are exact: integers as integers, floating point
// in a form that parses back to the same bits. Fails (naming the output) when an
// output's bytes do not match its shape, or when FP16/BF16 is asked for as JSON.
[[nodiscard]] StatusOr<EncodedInferResponse> EncodeInferResponse(const InferResponse& response,
                                                                 const OutputEncoding& encoding);

}  // namespace fastpath::frontend::http
