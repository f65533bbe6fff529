// A number as people write one in a flag or a config parameter: an optional leading '-',
// digits with at most one '.', and an optional exponent ("1e-5"). strtod alone also takes
// "0x10" (16), " 1.5", "inf" and "nan", none of which a setting means.
#pragma once

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

namespace fastpath {

inline std::optional<double> ParseDecimal(const std::string& text) {
  size_t i = !text.empty() && text[0] == '-' ? 1 : 0;
  bool digits = false, point = false;
  for (; i < text.size() && text[i] != 'e' && text[i] != 'E'; ++i) {
    if (text[i] >= '0' && text[i] <= '9') {
      digits = true;
    } else if (text[i] == '.' && !point) {
      point = true;
    } else {
      return std::nullopt;
    }
  }
  if (!digits) return std::nullopt;
  if (i < text.size()) {  // the exponent: e, a sign, digits
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (i == text.size()) return std::nullopt;
    for (; i < text.size(); ++i) {
      if (text[i] < '0' || text[i] > '9') return std::nullopt;
    }
  }
  const double value = std::strtod(text.c_str(), nullptr);
  if (!std::isfinite(value)) return std::nullopt;
  return value;
}

}  // namespace fastpath
