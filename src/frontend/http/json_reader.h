// The one JSON parser configuration of the HTTP front end, for every body it reads.
//
// Numbers are converted by std::from_chars, not by RapidJSON: from_chars is correctly
// rounded (outputs must equal what the client sent, bit for bit), and RapidJSON 1.1.0's
// own full-precision path reads out of bounds on inputs such as "0.000…0" with a few
// hundred zeros (found by the codec's fuzz target). RapidJSON still checks the grammar.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

namespace fastpath::frontend::http {

struct JsonParseError {
  rapidjson::ParseErrorCode code = rapidjson::kParseErrorNone;
  size_t offset = 0;
};

// Parses text[0, size) in place into `doc` (strings point into `text`, which must outlive
// `doc`). text[size] must be writable: it is borrowed as the terminator and restored.
// Iterative, so nesting depth costs heap, not stack. Accepts NaN / Infinity / -Infinity;
// refuses text that is not UTF-8 (kParseErrorStringInvalidEncoding, at the first bad byte).
std::optional<JsonParseError> ParseJsonInPlace(char* text, size_t size, rapidjson::Document* doc);

// What ParseJsonInPlace makes of `text`, one JSON number without whitespace around it, as a
// document of its own: true with the number in `out` (Int64, Uint64 or Double, typed and
// rounded as in any document), false where ParseJsonInPlace refuses it. For a reader with
// a grammar of its own (the simdjson fast path of infer_codec.cc) that must read numbers
// exactly as this one does: RapidJSON refuses as "too big" some numbers that fit a double.
bool ParseJsonNumber(std::string_view text, rapidjson::Value* out);

// "malformed JSON in <where> at offset N: <reason>"
std::string DescribeJsonError(const JsonParseError& error, std::string_view where);

}  // namespace fastpath::frontend::http
