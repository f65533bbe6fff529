#include "command_line.h"

#include <charconv>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <utility>

#include "cli.h"

namespace fastpath::cli {
namespace {

constexpr size_t kHelpWidth = 100;    // .clang-format's column limit, for the same eyes
constexpr size_t kOptionColumn = 32;  // where descriptions start

// Breaks `text` into lines of at most `width` characters at spaces; CLI11 indents every line
// after the first to the description column.
std::string Wrap(const std::string& text, size_t width) {
  std::string out;
  size_t line_start = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t word_end = text.find_first_of(" \n", i);
    if (word_end == std::string::npos) word_end = text.size();
    const size_t line_length = out.size() - line_start;
    const size_t word_length = word_end - i;
    if (line_length > 0 && line_length + 1 + word_length > width) {
      out += '\n';
      line_start = out.size();
    } else if (line_length > 0) {
      out += ' ';
    }
    out.append(text, i, word_length);
    if (word_end < text.size() && text[word_end] == '\n') {
      out += '\n';
      line_start = out.size();
    }
    i = word_end + 1;
  }
  return out;
}

std::string Names(const std::set<CLI::Option*>& options) {
  std::string out;
  for (const CLI::Option* option : options) out += (out.empty() ? "" : ", ") + option->get_name();
  return out;
}

// The usage line first, then the description; each option with its value name (N, DIR,
// none|explicit|poll), and after its description what is required, the default, and what it
// needs or excludes.
class HelpLayout final : public CLI::Formatter {
 public:
  explicit HelpLayout(std::string usage) : usage_(std::move(usage)) { column_width(kOptionColumn); }

  std::string make_description(const CLI::App*) const override { return ""; }

  std::string make_usage(const CLI::App* app, std::string) const override {
    std::string out = usage_;
    if (!out.empty() && out.back() != '\n') out += '\n';
    if (!app->get_description().empty()) {
      out += "\n" + Wrap(app->get_description(), kHelpWidth) + "\n";
    }
    return out + "\n";
  }

  // One blank line between groups (CLI11 puts one before each group and one between them).
  std::string make_group(std::string group, bool is_positional,
                         std::vector<const CLI::Option*> options) const override {
    std::string out = group + ":\n";
    for (const CLI::Option* option : options) out += make_option(option, is_positional);
    return out;
  }

  std::string make_positionals(const CLI::App* app) const override {
    const std::string positionals = CLI::Formatter::make_positionals(app);
    return positionals.empty() ? "" : positionals + "\n";
  }

  std::string make_subcommand(const CLI::App* command) const override {
    std::stringstream out;
    CLI::detail::format_help(out, command->get_display_name(),
                             Wrap(command->get_description(), kHelpWidth - kOptionColumn),
                             kOptionColumn);
    return out.str();
  }

  std::string make_option_opts(const CLI::Option* option) const override {
    if (option->get_type_size() == 0) return "";
    // A positional's name already says what it is (REPORT.json).
    std::string out = option->get_positional() ? "" : " " + option->get_type_name();
    if (option->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
    return out;
  }

  std::string make_option_desc(const CLI::Option* option) const override {
    std::string notes;
    auto note = [&notes](const std::string& text) { notes += (notes.empty() ? "" : "; ") + text; };
    if (option->get_required()) note("required");
    if (!option->get_default_str().empty()) note("default " + option->get_default_str());
    if (const std::set<CLI::Option*> needs = option->get_needs(); !needs.empty()) {
      note("needs " + Names(needs));
    }
    if (const std::set<CLI::Option*> excludes = option->get_excludes(); !excludes.empty()) {
      note("not with " + Names(excludes));
    }
    std::string text = option->get_description();
    if (!notes.empty()) text += (text.empty() ? "(" : " (") + notes + ")";
    return Wrap(text, kHelpWidth - kOptionColumn);
  }

 private:
  std::string usage_;
};

// CLI11's own single-value policy is to refuse a repeat; the hand-written parsers kept the
// last value, and so does this (a later option overrides an earlier one).
CLI::Option* LastWins(CLI::Option* option) {
  return option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

}  // namespace

CLI::Option* OnlyOnce(CLI::Option* option) {
  return option->multi_option_policy(CLI::MultiOptionPolicy::Throw);
}

namespace {

// How a message names the option: its first long name ("-p,--measurement-interval-ms" is
// --measurement-interval-ms).
std::string MessageName(const std::string& names) {
  std::string first;
  size_t start = 0;
  while (start <= names.size()) {
    size_t end = names.find(',', start);
    if (end == std::string::npos) end = names.size();
    const std::string name = names.substr(start, end - start);
    if (name.rfind("--", 0) == 0) return name;
    if (first.empty()) first = name;
    start = end + 1;
  }
  return first;
}

void ThrowIfError(const Status& status) {
  // The one-argument ValidationError keeps the message as it is (it names the option).
  if (!status.ok()) throw CLI::ValidationError(status.message());
}

}  // namespace

void UseHelpLayout(CLI::App& app, std::string usage) {
  app.formatter(std::make_shared<HelpLayout>(std::move(usage)));
  // Unknown options are collected and reported as before ("unknown flag --x"), not as
  // CLI11's "The following argument was not expected".
  app.allow_extras();
}

std::optional<int> ParseCommandLine(CLI::App& app, const std::vector<std::string>& args,
                                    std::string_view stray_word_error) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // what CLI11 parses
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();  // the help of the (sub)command that was asked
    return kExitOk;
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << "\n";
    return kExitOk;
  } catch (const CLI::ArgumentMismatch& e) {
    // An OnlyOnce option given again: CLI11 says "--x: At Most 1 required but received 2".
    const std::string what = e.what();
    if (const size_t at = what.find(": At Most 1 required but received ");
        at != std::string::npos) {
      return UsageError(app,
                        what.substr(0, at) + " is given " +
                            what.substr(at + std::strlen(": At Most 1 required but received ")) +
                            " times; " + app.get_name() + " takes it once");
    }
    return UsageError(app, what);
  } catch (const CLI::ParseError& e) {
    return UsageError(app, e.what());
  }
  // Not recursive: the top level's commands are prefix commands, whose words are theirs.
  const std::vector<std::string> extra = app.remaining(/*recurse=*/false);
  if (!extra.empty()) {
    const std::string& first = extra.front();
    if (first.size() > 1 && first[0] == '-') {
      return UsageError(app, "unknown flag " + first.substr(0, first.find('=')));
    }
    return UsageError(app, std::string(stray_word_error) + " '" + first + "'");
  }
  return std::nullopt;
}

int UsageError(const CLI::App& app, std::string_view message) {
  std::cerr << app.get_name() << ": " << message << "\n(`" << app.get_name()
            << " --help` lists the options)\n";
  return kExitUsage;
}

CLI::Option* AddValue(CLI::App& app, const std::string& names, const std::string& value_name,
                      const std::string& help, const std::string& default_text,
                      std::function<Status(const std::string&)> apply) {
  CLI::Option* option = app.add_option_function<std::string>(
      names, [apply = std::move(apply)](const std::string& value) { ThrowIfError(apply(value)); },
      help);
  option->type_name(value_name)->default_str(default_text);
  return LastWins(option);
}

CLI::Option* AddRepeatedValue(CLI::App& app, const std::string& names,
                              const std::string& value_name, const std::string& help,
                              std::function<Status(const std::string&)> apply) {
  CLI::Option* option = app.add_option_function<std::vector<std::string>>(
      names,
      [apply = std::move(apply)](const std::vector<std::string>& values) {
        for (const std::string& value : values) ThrowIfError(apply(value));
      },
      help);
  // One value per occurrence ("--load-model a b" is not two models), every occurrence kept.
  option->type_name(value_name)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  return option;
}

CLI::Option* AddText(CLI::App& app, const std::string& names, const std::string& value_name,
                     std::string* target, const std::string& help) {
  // Empty reads as "not given" to every caller (no report written, the server's default
  // version), so an empty value, a shell variable that was not set, is refused.
  const std::string flag = names.substr(names.rfind(',') + 1);
  return AddValue(app, names, value_name, help, *target,
                  [target, flag](const std::string& value) -> Status {
                    if (value.empty()) return InvalidArgument(flag + " needs a value");
                    *target = value;
                    return Status::Ok();
                  });
}

StatusOr<int64_t> ParseInt(std::string_view option, std::string_view text, int64_t lo, int64_t hi) {
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || value < lo ||
      value > hi) {
    return InvalidArgument(std::string(option) + " must be an integer in [" + std::to_string(lo) +
                           ", " + std::to_string(hi) + "], not '" + std::string(text) + "'");
  }
  return value;
}

CLI::Option* AddInt(CLI::App& app, const std::string& names, const std::string& value_name,
                    int64_t lo, int64_t hi, int64_t default_value, std::function<void(int64_t)> set,
                    const std::string& help) {
  return AddValue(app, names, value_name, help, std::to_string(default_value),
                  [name = MessageName(names), lo, hi,
                   set = std::move(set)](const std::string& value) -> Status {
                    FASTPATH_ASSIGN_OR_RETURN(const int64_t n, ParseInt(name, value, lo, hi));
                    set(n);
                    return Status::Ok();
                  });
}

CLI::Option* AddBool(CLI::App& app, const std::string& names, bool* target,
                     const std::string& help) {
  return AddValue(app, names, "true|false", help, *target ? "true" : "false",
                  [target, name = MessageName(names)](const std::string& value) -> Status {
                    if (value == "true" || value == "1") {
                      *target = true;
                    } else if (value == "false" || value == "0") {
                      *target = false;
                    } else {
                      return InvalidArgument(name + " must be true or false, not '" + value + "'");
                    }
                    return Status::Ok();
                  });
}

CLI::Option* AddSwitch(CLI::App& app, const std::string& names, bool* target,
                       const std::string& help) {
  return app.add_flag(names, *target, help)->disable_flag_override();
}

void AddLogOptions(CLI::App& app, log::Options* options) {
  AddValue(app, "--log-level", "trace|debug|info|warn|error", "the least severe log line written",
           std::string(log::LevelName(options->level)), [options](const std::string& value) {
             FASTPATH_ASSIGN_OR_RETURN(options->level, log::ParseLevel(value));
             return Status::Ok();
           });
  AddValue(app, "--log-format", "text|json",
           "log lines on stderr as text, or as one JSON object each (ts, level, msg, fields)",
           std::string(log::FormatName(options->format)), [options](const std::string& value) {
             FASTPATH_ASSIGN_OR_RETURN(options->format, log::ParseFormat(value));
             return Status::Ok();
           });
}

StatusOr<std::string> ReadTextFile(const std::filesystem::path& path) {
  // A folder opens as an empty stream: said as what it is, not as an empty file.
  if (std::error_code ec; std::filesystem::is_directory(path, ec)) {
    return InvalidArgument(path.string() + " is a folder, not a file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Internal("cannot read " + path.string() + " to its end");
  return text.str();
}

}  // namespace fastpath::cli
