#include "fastpath/common/utf8.h"

#include <cstdint>

namespace fastpath {

size_t Utf8SequenceLength(std::string_view text, size_t at) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  if (at >= n) return 0;
  const unsigned char c = bytes[at];
  if (c < 0x80) return 1;
  size_t len = 0;
  uint32_t min = 0;
  uint32_t code = 0;
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2, min = 0x80, code = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3, min = 0x800, code = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4, min = 0x10000, code = c & 0x07;
  } else {
    return 0;
  }
  if (at + len > n) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((bytes[at + k] & 0xc0) != 0x80) return 0;
    code = (code << 6) | (bytes[at + k] & 0x3f);
  }
  const bool valid = code >= min && code <= 0x10ffff && (code < 0xd800 || code > 0xdfff);
  return valid ? len : 0;
}

size_t Utf8ValidPrefix(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    // ASCII, the common case, a byte at a time without the decoding.
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t len = Utf8SequenceLength(text, i);
    if (len == 0) return i;
    i += len;
  }
  return text.size();
}

std::string ToValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t len = Utf8SequenceLength(text, i);
    if (len == 0) {
      out += "\xef\xbf\xbd";  // U+FFFD
      ++i;
    } else {
      out.append(text.data() + i, len);
      i += len;
    }
  }
  return out;
}

}  // namespace fastpath
