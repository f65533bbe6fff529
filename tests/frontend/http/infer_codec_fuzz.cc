// libFuzzer target for the HTTP inference codec: request bodies and their binary framing
// are outside input. Input layout: byte 0 bit 0 says whether an
// Inference-Header-Content-Length is present, bytes 1..4 (little-endian) give it (taken
// modulo the body size + 1), the rest is the body. The body is decoded both with the
// simdjson fast path and by RapidJSON alone, which must agree in every detail (the fast
// path is only ever an optimization). A decoded request is echoed through the encoder,
// with the requested encodings, as a facade would answer it.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "decode_outcome.h"
#include "infer_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fastpath;
  using namespace fastpath::frontend::http;
  if (size < 5) return 0;
  const bool has_header = (data[0] & 1) != 0;
  uint32_t header = 0;
  std::memcpy(&header, data + 1, 4);
  std::string body(reinterpret_cast<const char*>(data + 5), size - 5);
  std::optional<size_t> json_length;
  if (has_header) json_length = header % (body.size() + 1);

  InferCodecLimits limits;
  limits.max_elements = 1 << 16;  // as the server derives it: bounded by the body limit
  std::string reference_body = body;
  auto decoded = DecodeInferRequest(body, json_length, limits);
  auto reference = internal::DecodeInferRequest(reference_body, json_length, limits,
                                                internal::JsonPath::kRapidJsonOnly);
  if (DescribeDecodeOutcome(decoded) != DescribeDecodeOutcome(reference)) __builtin_trap();
  if (!decoded.ok()) return 0;

  InferResponse response;
  response.model_name = "m";
  response.model_version = "1";
  response.id = decoded->request.id;
  response.outputs = decoded->request.inputs;
  auto encoded = EncodeInferResponse(response, decoded->encoding);
  if (encoded.ok() && encoded->json_length > encoded->body.size()) __builtin_trap();
  return 0;
}
