// A number as people write one in a flag or a config parameter: digits, at most one '.',
// an optional leading '-'. strtod alone also takes "0x10" (16), "1e1", " 1.5", "inf" and
// "nan", none of which a setting means.
#pragma once

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

namespace fastpath {

inline std::optional<double> ParseDecimal(const std::string& text) {
  size_t i = !text.empty() && text[0] == '-' ? 1 : 0;
  bool digits = false, point = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c >= '0' && c <= '9') {
      digits = true;
    } else if (c == '.' && !point) {
      point = true;
    } else {
      return std::nullopt;
    }
  }
  if (!digits) return std::nullopt;
  const double value = std::strtod(text.c_str(), nullptr);
  if (!std::isfinite(value)) return std::nullopt;
  return value;
}

}  // namespace fastpath
