// Everything DecodeInferRequest returns, as one text, so that two decodes of a body can be
// compared whole (the codec's differential tests and its fuzz target): the status, or the
// id, parameters, inputs (bytes in hex), outputs and encodings. Doubles are written as
// their bits, so NaN compares equal to itself and -0.0 differs from 0.0.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <variant>

#include "infer_codec.h"

namespace fastpath::frontend::http {

inline std::string DescribeParameters(const Parameters& parameters) {
  std::string out = "{";
  for (const auto& [key, value] : parameters) {
    out += key + "=";
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, bool>) {
            out += v ? "bool:true" : "bool:false";
          } else if constexpr (std::is_same_v<V, int64_t>) {
            out += "int:" + std::to_string(v);
          } else if constexpr (std::is_same_v<V, double>) {
            uint64_t bits = 0;
            std::memcpy(&bits, &v, sizeof bits);
            out += "double-bits:" + std::to_string(bits);
          } else {
            out += "string:" + v;
          }
        },
        value);
    out += ";";
  }
  return out + "}";
}

inline std::string DescribeDecodeOutcome(const StatusOr<DecodedInferRequest>& decoded) {
  if (!decoded.ok()) return "error " + decoded.status().ToString();
  const InferRequest& r = decoded->request;
  std::string out = "id=" + r.id + " parameters=" + DescribeParameters(r.parameters) + "\n";
  for (const Tensor& t : r.inputs) {
    out += "input " + t.name + " " + std::string(DataTypeName(t.dtype)) + " " + ShapeToString(t.shape) + " ";
    for (unsigned char c : t.data) {
      out += "0123456789abcdef"[c >> 4];
      out += "0123456789abcdef"[c & 15];
    }
    out += "\n";
  }
  for (const RequestedOutput& o : r.outputs) out += "output " + o.name + " " + DescribeParameters(o.parameters) + "\n";
  out += std::string("binary_by_default=") + (decoded->encoding.binary_by_default ? "1" : "0");
  for (const auto& [name, binary] : decoded->encoding.binary) out += " " + name + (binary ? "=1" : "=0");
  return out;
}

}  // namespace fastpath::frontend::http
