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

// Parses an inference request body. `body` is parsed in situ (its JSON part is
// overwritten); `json_length` is the parsed Inference-Header-Content-Length, nullopt
// when the header is absent. Every error is InvalidArgument (or PayloadTooLarge for a
// shape over the limit, Unimplemented for shared memory and classification) with a
// message that names the offending field or tensor.
[[nodiscard]] StatusOr<DecodedInferRequest> DecodeInferRequest(std::string& body,
                                                               std::optional<size_t> json_length,
                                                               const InferCodecLimits& limits);

struct EncodedInferResponse {
  std::string body;        // the JSON, then the binary outputs in output order
  size_t json_length = 0;  // bytes of JSON at the start of `body`
  bool has_binary = false; // true when any byte follows the JSON
};

// Renders a response as Triton does: {"id"?, "model_name", "model_version",
// "parameters"?, "outputs": [{"name", "datatype", "shape", "data" | "parameters":
// {"binary_data_size": N}}]}. Numbers are exact: integers as integers, floating point
// in a form that parses back to the same bits. Fails (naming the output) when an
// output's bytes do not match its shape, or when FP16/BF16 is asked for as JSON.
// A KServe "parameters" object: bool, integer, number and string values; anything else is
// InvalidArgument naming `where` and the key.
[[nodiscard]] Status DecodeParameters(const rapidjson::Value& v, const std::string& where,
                                      Parameters* out);

[[nodiscard]] StatusOr<EncodedInferResponse> EncodeInferResponse(const InferResponse& response,
                                                                 const OutputEncoding& encoding);

}  // namespace fastpath::frontend::http
