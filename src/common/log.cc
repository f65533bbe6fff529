#include "fastpath/common/log.h"

#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>

#include "fastpath/common/utf8.h"

namespace fastpath::log {
namespace {

constexpr std::array<std::string_view, 5> kLevelNames = {"trace", "debug", "info", "warn", "error"};

spdlog::level::level_enum ToSpdlog(Level level) {
  switch (level) {
    case Level::kTrace:
      return spdlog::level::trace;
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kError:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}

// spdlog's own names say "warning" and "critical"; the lines say what --log-level takes.
std::string_view SpdlogLevelName(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
      return "trace";
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::info:
      return "info";
    case spdlog::level::warn:
      return "warn";
    default:
      return "error";
  }
}

// The pattern flag %* : the level name, padded to five columns in text lines.
class LevelFlag final : public spdlog::custom_flag_formatter {
 public:
  explicit LevelFlag(bool pad) : pad_(pad) {}

  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string_view name = SpdlogLevelName(msg.level);
    dest.append(name.data(), name.data() + name.size());
    for (size_t i = name.size(); pad_ && i < 5; ++i) dest.push_back(' ');
  }

  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<LevelFlag>(pad_);
  }

 private:
  bool pad_;
};

// Writes each formatted line with one fwrite on stderr (unbuffered, so lines from threads do
// not interleave and nothing waits in a buffer at exit), or into a test's stream.
class StderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void SetOutput(std::ostream* out) {
    std::lock_guard<std::mutex> lock(mutex_);
    out_ = out;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    if (out_ != nullptr) {
      out_->write(line.data(), static_cast<std::streamsize>(line.size()));
      out_->flush();
    } else {
      std::fwrite(line.data(), 1, line.size(), stderr);
    }
  }

  void flush_() override {
    if (out_ != nullptr) {
      out_->flush();
    } else {
      std::fflush(stderr);
    }
  }

 private:
  std::ostream* out_ = nullptr;
};

std::unique_ptr<spdlog::formatter> MakeFormatter(const Options& options) {
  std::string pattern;
  if (options.format == Format::kJson) {
    // %v is the message and fields, already JSON (BuildPayload).
    pattern = R"({"ts":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%*",%v})";
  } else {
    std::string name;
    for (char c : options.name) {
      name += c;
      if (c == '%') name += '%';  // a literal % in a pattern
    }
    pattern = "%Y-%m-%dT%H:%M:%S.%eZ %* " + name + (name.empty() ? "" : ": ") + "%v";
  }
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  formatter->add_flag<LevelFlag>('*', options.format == Format::kText).set_pattern(pattern);
  return formatter;
}

// The process logger. Never destroyed: threads (ONNX Runtime's among them) may log while
// static destructors run.
struct Logger {
  Logger() : sink(std::make_shared<StderrSink>()), logger("fastpath", sink) {
    logger.set_level(ToSpdlog(options.level));
    sink->set_formatter(MakeFormatter(options));
  }

  std::shared_ptr<StderrSink> sink;
  spdlog::logger logger;
  std::mutex mu;    // guards options; held while a line is written
  Options options;  // what Configure last set
};

Logger& GetLogger() {
  static Logger* const logger = new Logger();
  return *logger;
}

void AppendUtf8Escaped(std::string_view text, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = bytes[i];
    if (c < 0x80) {
      switch (c) {
        case '"':
          *out += "\\\"";
          break;
        case '\\':
          *out += "\\\\";
          break;
        case '\b':
          *out += "\\b";
          break;
        case '\f':
          *out += "\\f";
          break;
        case '\n':
          *out += "\\n";
          break;
        case '\r':
          *out += "\\r";
          break;
        case '\t':
          *out += "\\t";
          break;
        default:
          if (c < 0x20) {
            *out += "\\u00";
            *out += kHex[c >> 4];
            *out += kHex[c & 0xf];
          } else {
            *out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    // A multi-byte sequence is copied only when it is well-formed UTF-8 (no overlong form,
    // no surrogate, nothing above U+10FFFF); anything else becomes U+FFFD, one per byte.
    if (const size_t len = Utf8SequenceLength(text, i); len > 0) {
      out->append(text.data() + i, len);
      i += len;
    } else {
      *out += "\\ufffd";
      ++i;
    }
  }
}

void AppendJsonString(std::string_view text, std::string* out) {
  *out += '"';
  AppendUtf8Escaped(text, out);
  *out += '"';
}

template <typename T>
void AppendNumber(T value, std::string* out) {
  char buffer[32];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out->append(buffer, ec == std::errc() ? end : buffer);
}

// A text value goes in quotes (JSON-escaped) only when it could not be read back otherwise,
// or is not UTF-8 (the escaping replaces its bad bytes).
bool NeedsQuotes(std::string_view text) {
  if (text.empty()) return true;
  for (unsigned char c : text) {
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f) return true;
  }
  return !IsValidUtf8(text);
}

void AppendValue(const FieldValue& field, Format format, std::string* out) {
  std::visit(
      [&](const auto& value) {
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::string_view>) {
          if (format == Format::kJson || NeedsQuotes(value)) {
            AppendJsonString(value, out);
          } else {
            out->append(value);
          }
        } else if constexpr (std::is_same_v<T, bool>) {
          *out += value ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          if (std::isfinite(value)) {
            AppendNumber(value, out);
          } else if (format == Format::kJson) {
            *out += "null";  // JSON has no NaN or infinity
          } else {
            *out += std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");
          }
        } else {
          AppendNumber(value, out);
        }
      },
      field.value());
}

std::string_view FieldKey(std::string_view key, std::string* storage) {
  if (key == "ts" || key == "level" || key == "msg") {
    *storage = "field_" + std::string(key);
    return *storage;
  }
  return key;
}

// What the pattern's %v stands for: the message and the fields, in the line's format.
std::string BuildPayload(Format format, std::string_view message,
                         std::initializer_list<Field> fields) {
  std::string out;
  out.reserve(message.size() + 16 + 32 * fields.size());
  std::string renamed;
  if (format == Format::kJson) {
    out += "\"msg\":";
    AppendJsonString(message, &out);
    for (const Field& field : fields) {
      out += ',';
      AppendJsonString(FieldKey(field.key, &renamed), &out);
      out += ':';
      AppendValue(field.value, format, &out);
    }
  } else {
    // A log reader (a collector, a terminal) takes lines as UTF-8: a message quoting a
    // client's or a folder's bytes has each bad byte replaced, as in JSON.
    if (IsValidUtf8(message)) {
      out.append(message);
    } else {
      out.append(ToValidUtf8(message));
    }
    for (const Field& field : fields) {
      out += ' ';
      out.append(FieldKey(field.key, &renamed));
      out += '=';
      AppendValue(field.value, format, &out);
    }
  }
  return out;
}

}  // namespace

std::string_view LevelName(Level level) { return kLevelNames[static_cast<size_t>(level)]; }

StatusOr<Level> ParseLevel(std::string_view text) {
  for (size_t i = 0; i < kLevelNames.size(); ++i) {
    if (text == kLevelNames[i]) return static_cast<Level>(i);
  }
  return InvalidArgument("--log-level must be trace, debug, info, warn or error, not '" +
                         std::string(text) + "'");
}

std::string_view FormatName(Format format) { return format == Format::kJson ? "json" : "text"; }

StatusOr<Format> ParseFormat(std::string_view text) {
  if (text == "text") return Format::kText;
  if (text == "json") return Format::kJson;
  return InvalidArgument("--log-format must be text or json, not '" + std::string(text) + "'");
}

void Configure(const Options& options) {
  Logger& logger = GetLogger();
  std::lock_guard<std::mutex> lock(logger.mu);
  logger.options = options;
  logger.sink->set_formatter(MakeFormatter(options));
  logger.logger.set_level(ToSpdlog(options.level));
}

Options CurrentOptions() {
  Logger& logger = GetLogger();
  std::lock_guard<std::mutex> lock(logger.mu);
  return logger.options;
}

bool Enabled(Level level) { return GetLogger().logger.should_log(ToSpdlog(level)); }

void Write(Level level, std::string_view message, std::initializer_list<Field> fields) {
  Logger& logger = GetLogger();
  const spdlog::level::level_enum spd_level = ToSpdlog(level);
  if (!logger.logger.should_log(spd_level)) return;
  // Held while the line is written, so that the payload and the pattern agree on the format
  // even when Configure runs meanwhile (the sink serializes lines anyway).
  std::lock_guard<std::mutex> lock(logger.mu);
  const std::string payload = BuildPayload(logger.options.format, message, fields);
  logger.logger.log(spd_level, spdlog::string_view_t(payload.data(), payload.size()));
}

void SetOutputForTesting(std::ostream* out) { GetLogger().sink->SetOutput(out); }

}  // namespace fastpath::log
