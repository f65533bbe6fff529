// The one RapidJSON writer configuration of the HTTP front end.
#pragma once

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <string>
#include <string_view>

#include "fastpath/common/utf8.h"

namespace fastpath::frontend::http {

// NaN and infinities are written as NaN / Infinity / -Infinity, which Python's json
// module (tritonclient) reads back; without the flag the writer would fail mid-output.
// Doubles are written with Grisu2, which always parses back to the same bits.
using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer, rapidjson::UTF8<>, rapidjson::UTF8<>,
                                     rapidjson::CrtAllocator, rapidjson::kWriteNanAndInfFlag>;

// Strings are written as valid UTF-8, whatever their bytes: an error can quote a URL's
// model name or a directory's, and a JSON reader (Python's, tritonclient's) refuses a body
// that is not UTF-8 instead of showing the error. Each byte that starts no well-formed
// sequence becomes U+FFFD.
inline void WriteString(JsonWriter& w, std::string_view s) {
  if (!IsValidUtf8(s)) {
    const std::string valid = ToValidUtf8(s);
    w.String(valid.data(), static_cast<rapidjson::SizeType>(valid.size()), true);
    return;
  }
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}
// RapidJSON's Writer writes a key as it writes a string (its Key calls String).
inline void WriteKey(JsonWriter& w, std::string_view s) { WriteString(w, s); }

// {"error": message}: the KServe error body.
inline std::string ErrorJson(std::string_view message) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  WriteKey(w, "error");
  WriteString(w, message);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace fastpath::frontend::http
