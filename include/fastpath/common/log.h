// The process's logger: leveled lines on stderr, as text for people or as one JSON object per
// line for log collectors. Every module logs through it; none needs spdlog's headers (the
// logger behind it, in log.cc).
//
//   log::Info("model 'mlp' version 1 is READY");
//   log::Warn("instance placement fell back to the CPU", {{"model", name}, {"version", 3}});
//
// text: 2025-06-01T12:00:00.123Z info  fastpath serve: model 'mlp' version 1 is READY
// json: {"ts":"2025-06-01T12:00:00.123Z","level":"info","msg":"model 'mlp' version 1 is READY"}
//
// Times are UTC. A text line prints the message as it is (a multi-line message stays
// multi-line) and fields as ` key=value`; a JSON line escapes both, and carries numbers and
// booleans as JSON numbers and booleans.
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>
#include <variant>

#include "fastpath/common/status.h"

namespace fastpath::log {

enum class Level { kTrace, kDebug, kInfo, kWarn, kError };
enum class Format { kText, kJson };

// "trace", "debug", "info", "warn", "error" (the --log-level values).
std::string_view LevelName(Level level);
[[nodiscard]] StatusOr<Level> ParseLevel(std::string_view text);
// "text", "json" (the --log-format values).
std::string_view FormatName(Format format);
[[nodiscard]] StatusOr<Format> ParseFormat(std::string_view text);

struct Options {
  Level level = Level::kInfo;  // lines below it are dropped before they are formatted
  Format format = Format::kText;
  // Starts each text line's message, e.g. "fastpath serve"; not in JSON lines.
  std::string name = "fastpath";
};

// Sets the process logger's level, format and name (at start-up, once the command line is
// read). Thread-safe: a line is written wholly before or wholly after it.
void Configure(const Options& options);
Options CurrentOptions();

// A field's value. Strings are viewed, not copied: a field lives as long as the call it is
// passed to.
class FieldValue {
 public:
  FieldValue(std::string_view value) : value_(value) {}
  FieldValue(const char* value) : value_(std::string_view(value)) {}
  FieldValue(const std::string& value) : value_(std::string_view(value)) {}
  FieldValue(bool value) : value_(value) {}
  template <std::signed_integral T>
  FieldValue(T value) : value_(static_cast<int64_t>(value)) {}
  template <std::unsigned_integral T>
  requires(!std::same_as<T, bool>) FieldValue(T value) : value_(static_cast<uint64_t>(value)) {}
  FieldValue(double value) : value_(value) {}

  const std::variant<std::string_view, int64_t, uint64_t, double, bool>& value() const {
    return value_;
  }

 private:
  std::variant<std::string_view, int64_t, uint64_t, double, bool> value_;
};

// A key and its value on a line. The keys ts, level and msg belong to the line itself: a
// field with one of them is written as field_ts, field_level or field_msg.
struct Field {
  std::string_view key;
  FieldValue value;
};

// Whether a line at `level` would be written (to skip building an expensive message).
bool Enabled(Level level);
void Write(Level level, std::string_view message, std::initializer_list<Field> fields = {});

inline void Trace(std::string_view message, std::initializer_list<Field> fields = {}) {
  Write(Level::kTrace, message, fields);
}
inline void Debug(std::string_view message, std::initializer_list<Field> fields = {}) {
  Write(Level::kDebug, message, fields);
}
inline void Info(std::string_view message, std::initializer_list<Field> fields = {}) {
  Write(Level::kInfo, message, fields);
}
inline void Warn(std::string_view message, std::initializer_list<Field> fields = {}) {
  Write(Level::kWarn, message, fields);
}
inline void Error(std::string_view message, std::initializer_list<Field> fields = {}) {
  Write(Level::kError, message, fields);
}

// Tests: lines go to `out` instead of stderr until this is called again with nullptr. The
// stream must outlive its use.
void SetOutputForTesting(std::ostream* out);

}  // namespace fastpath::log
