#include "json_reader.h"

#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <system_error>

#include "fastpath/common/utf8.h"

namespace fastpath::frontend::http {
namespace {

constexpr unsigned kFlags = rapidjson::kParseInsituFlag | rapidjson::kParseIterativeFlag |
                            rapidjson::kParseNanAndInfFlag | rapidjson::kParseNumbersAsStringsFlag;

// A value beyond double's range (from_chars refuses it; JSON allows it): overflow is
// ±infinity and underflow ±0, as strtod gives. Decided by the decimal exponent of the
// first significant digit.
double OutOfRangeValue(std::string_view t) {
  const bool negative = !t.empty() && t.front() == '-';
  if (negative) t.remove_prefix(1);
  const size_t e = t.find_first_of("eE");
  int64_t exp = 0;
  if (e != std::string_view::npos) {
    std::string_view digits = t.substr(e + 1);
    bool exp_negative = false;
    if (!digits.empty() && (digits.front() == '-' || digits.front() == '+')) {
      exp_negative = digits.front() == '-';
      digits.remove_prefix(1);
    }
    for (char c : digits) {
      if (exp < 1'000'000'000) exp = exp * 10 + (c - '0');  // saturates; only the sign matters
    }
    if (exp_negative) exp = -exp;
  }
  const std::string_view mantissa = t.substr(0, e);
  const size_t dot = mantissa.find('.');
  const std::string_view integral = mantissa.substr(0, dot);
  const std::string_view fraction = dot == std::string_view::npos ? std::string_view() : mantissa.substr(dot + 1);
  int64_t lead = 0;
  if (size_t nz = integral.find_first_not_of('0'); nz != std::string_view::npos) {
    lead = static_cast<int64_t>(integral.size() - nz) - 1;
  } else if (size_t fz = fraction.find_first_not_of('0'); fz != std::string_view::npos) {
    lead = -static_cast<int64_t>(fz) - 1;
  } else {
    return negative ? -0.0 : 0.0;
  }
  const double v = lead + exp > 0 ? HUGE_VAL : 0.0;
  return negative ? -v : v;
}

// Forwards SAX events to the document, turning each number's text into the value
// RapidJSON's own parser would have made (Int64/Uint64 when it is an integer that fits,
// Double otherwise), but correctly rounded.
class NumberConvertingHandler {
 public:
  explicit NumberConvertingHandler(rapidjson::Document& doc) : doc_(doc) {}

  bool Null() { return doc_.Null(); }
  bool Bool(bool b) { return doc_.Bool(b); }
  bool Int(int i) { return doc_.Int(i); }
  bool Uint(unsigned u) { return doc_.Uint(u); }
  bool Int64(int64_t i) { return doc_.Int64(i); }
  bool Uint64(uint64_t u) { return doc_.Uint64(u); }
  bool Double(double d) { return doc_.Double(d); }
  bool String(const char* s, rapidjson::SizeType n, bool copy) { return doc_.String(s, n, copy); }
  bool StartObject() { return doc_.StartObject(); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) { return doc_.Key(s, n, copy); }
  bool EndObject(rapidjson::SizeType members) { return doc_.EndObject(members); }
  bool StartArray() { return doc_.StartArray(); }
  bool EndArray(rapidjson::SizeType elements) { return doc_.EndArray(elements); }

  bool RawNumber(const char* s, rapidjson::SizeType n, bool /*copy*/) {
    const std::string_view t(s, n);
    const char* end = s + n;
    if (t.find('N') != std::string_view::npos) return doc_.Double(std::nan(""));  // NaN, -NaN
    if (t.find('I') != std::string_view::npos) return doc_.Double(t.front() == '-' ? -HUGE_VAL : HUGE_VAL);
    if (t.find_first_of(".eE") == std::string_view::npos) {
      if (t.front() == '-') {
        int64_t v = 0;
        auto r = std::from_chars(s, end, v);
        if (r.ec == std::errc() && r.ptr == end) return doc_.Int64(v);
      } else {
        uint64_t v = 0;
        auto r = std::from_chars(s, end, v);
        if (r.ec == std::errc() && r.ptr == end) return doc_.Uint64(v);
      }
      // An integer beyond 64 bits: a double, as RapidJSON would make it.
    }
    double d = 0;
    auto r = std::from_chars(s, end, d);
    if (r.ec == std::errc::result_out_of_range) {
      d = OutOfRangeValue(t);
    } else if (r.ec != std::errc() || r.ptr != end) {
      return false;  // cannot happen: the grammar was checked
    }
    return doc_.Double(d);
  }

 private:
  rapidjson::Document& doc_;
};

}  // namespace

std::optional<JsonParseError> ParseJsonInPlace(char* text, size_t size, rapidjson::Document* doc) {
  // JSON is UTF-8 (RFC 8259): text that is not is refused where it is, rather than passed on
  // to a tensor's name or a BYTES element and quoted back in an answer. Checked here, not by
  // RapidJSON: 1.1.0's kParseValidateEncodingFlag reads (and writes, in situ) past the end of
  // a text that ends inside a multi-byte sequence (found by the codec's fuzz target).
  if (const size_t valid = Utf8ValidPrefix(std::string_view(text, size)); valid < size) {
    return JsonParseError{rapidjson::kParseErrorStringInvalidEncoding, valid};
  }
  const char saved = text[size];
  text[size] = '\0';
  rapidjson::Reader reader;
  rapidjson::InsituStringStream stream(text);
  auto generate = [&](rapidjson::Document& d) {
    NumberConvertingHandler handler(d);
    return !reader.Parse<kFlags>(stream, handler).IsError();
  };
  doc->Populate(generate);
  text[size] = saved;
  if (reader.HasParseError()) return JsonParseError{reader.GetParseErrorCode(), reader.GetErrorOffset()};
  // RapidJSON ends the text at its first NUL, which would let whatever follows one pass
  // unread: it is text after the value like any other, unless it is NULs alone (a C client
  // that sends its string's terminator, which Triton accepts).
  const std::string_view tail(text + stream.Tell(), size - stream.Tell());
  if (tail.find_first_not_of('\0') != std::string_view::npos) {
    return JsonParseError{rapidjson::kParseErrorDocumentRootNotSingular, stream.Tell()};
  }
  return std::nullopt;
}

bool ParseJsonNumber(std::string_view text, rapidjson::Value* out) {
  // The usual case (a shape's dims, binary_data_size): an integer of at most 18 digits
  // without a leading zero, which RapidJSON never refuses and RawNumber makes an Int64 of
  // when negative ("-0" too), a Uint64 otherwise. No document for it.
  const bool negative = !text.empty() && text.front() == '-';
  const std::string_view digits = text.substr(negative ? 1 : 0);
  if (!digits.empty() && digits.size() <= 18 && (digits.size() == 1 || digits.front() != '0') &&
      digits.find_first_not_of("0123456789") == std::string_view::npos) {
    int64_t v = 0;
    std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (negative) {
      out->SetInt64(-v);
    } else {
      out->SetUint64(static_cast<uint64_t>(v));
    }
    return true;
  }
  std::string copy(text);  // parsed in place, with copy[size] as the terminator
  rapidjson::Document doc;
  if (ParseJsonInPlace(copy.data(), copy.size(), &doc) || !doc.IsNumber()) return false;
  *out = static_cast<rapidjson::Value&>(doc);  // moved: a number owns no memory of doc's
  return true;
}

std::string DescribeJsonError(const JsonParseError& error, std::string_view where) {
  return "malformed JSON in " + std::string(where) + " at offset " + std::to_string(error.offset) +
         ": " +
         (error.code == rapidjson::kParseErrorStringInvalidEncoding
              ? "not valid UTF-8 (JSON text must be UTF-8)"
              : rapidjson::GetParseError_En(error.code));
}

}  // namespace fastpath::frontend::http
