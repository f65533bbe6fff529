// UTF-8 as JSON, Prometheus and protobuf's string fields require it. A client, a URL or a
// directory name can hold any bytes; what fastpath writes out as text must not.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fastpath {

// The length of the well-formed UTF-8 sequence that starts at text[at] (1 to 4), or 0 when
// none does there: a stray continuation byte, an overlong form, a surrogate, a code point
// above U+10FFFF, or a sequence cut short.
size_t Utf8SequenceLength(std::string_view text, size_t at);

// The length of the longest prefix of `text` that is well-formed UTF-8: text.size() when all
// of it is, else the offset of the first byte that starts no well-formed sequence.
size_t Utf8ValidPrefix(std::string_view text);

// Whether all of `text` is well-formed UTF-8.
inline bool IsValidUtf8(std::string_view text) { return Utf8ValidPrefix(text) == text.size(); }

// `text` with each byte that starts no well-formed sequence replaced by U+FFFD, as a
// browser decodes it; well-formed text comes back unchanged.
std::string ToValidUtf8(std::string_view text);

}  // namespace fastpath
