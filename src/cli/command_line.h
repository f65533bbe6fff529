// What the subcommands' command lines share, on CLI11: one help layout (a usage line, then
// each option with its value, its description and its default), one way to report a bad
// command line (exit kExitUsage, the message on stderr), the option kinds, and the logging
// options.
//
// Option values are read by fastpath's own parsers, not by CLI11's conversions: CLI11 2.1
// reads integers with base detection ("010" is 8, "0x10" is 16) and booleans loosely ("yes",
// "on"), which would change what existing command lines mean. Every message names the
// option, e.g. "--http-port must be an integer in [0, 65535], not 'eighty'". A single-valued
// option given twice keeps its last value.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fastpath/common/log.h"
#include "fastpath/common/status.h"

namespace fastpath::cli {

// Gives `app` (made with the command's description and its name, "fastpath serve") the
// help layout: `usage` (one or more "usage: ..." lines), the description, the options.
void UseHelpLayout(CLI::App& app, std::string usage);

// Parses the words after the command. Returns the exit code when the command must not run:
// kExitOk after --help (the help on stdout), kExitUsage after a bad command line; nullopt when
// it should run. An unknown option is reported as "unknown flag --x", a word that is no
// option's value as "<stray_word_error> 'word'".
std::optional<int> ParseCommandLine(CLI::App& app, const std::vector<std::string>& args,
                                    std::string_view stray_word_error = "unexpected argument");

// A bad command line found after parsing (what depends on values, which CLI11's needs and
// excludes cannot say): "fastpath serve: <message>" and where the help is, on stderr.
// Returns kExitUsage.
int UsageError(const CLI::App& app, std::string_view message);

// A value that `apply` checks and stores; its error (which names the option) is the usage
// error. `default_text` is shown in the help; empty shows none.
CLI::Option* AddValue(CLI::App& app, const std::string& names, const std::string& value_name,
                      const std::string& help, const std::string& default_text,
                      std::function<Status(const std::string&)> apply);
// An option whose repeat is refused (a usage error) rather than the last one kept: for a
// --model-repository that `serve` takes several of, where another command keeping only
// the last would drop the others' models without a word.
CLI::Option* OnlyOnce(CLI::Option* option);
// The same for a repeatable option: `apply` runs once per occurrence, in order.
CLI::Option* AddRepeatedValue(CLI::App& app, const std::string& names,
                              const std::string& value_name, const std::string& help,
                              std::function<Status(const std::string&)> apply);
// Text as given, never empty (exit 2 naming the option); its current value is the default
// shown.
CLI::Option* AddText(CLI::App& app, const std::string& names, const std::string& value_name,
                     std::string* target, const std::string& help);
// A decimal integer in [lo, hi], given to `set`; `default_value` is shown.
CLI::Option* AddInt(CLI::App& app, const std::string& names, const std::string& value_name,
                    int64_t lo, int64_t hi, int64_t default_value, std::function<void(int64_t)> set,
                    const std::string& help);
template <typename T>
CLI::Option* AddInt(CLI::App& app, const std::string& names, const std::string& value_name,
                    T* target, int64_t lo, int64_t hi, const std::string& help) {
  return AddInt(
      app, names, value_name, lo, hi, static_cast<int64_t>(*target),
      [target](int64_t value) { *target = static_cast<T>(value); }, help);
}
// true | false | 1 | 0, as a value ("--allow-metrics false").
CLI::Option* AddBool(CLI::App& app, const std::string& names, bool* target,
                     const std::string& help);
// A switch: present or not ("--in-process"); "--in-process=false" is refused.
CLI::Option* AddSwitch(CLI::App& app, const std::string& names, bool* target,
                       const std::string& help);

// A decimal integer in [lo, hi]: the parser behind AddInt.
[[nodiscard]] StatusOr<int64_t> ParseInt(std::string_view option, std::string_view text, int64_t lo,
                                         int64_t hi);

// --log-level and --log-format, into `options` (log.h; the command sets its name).
void AddLogOptions(CLI::App& app, log::Options* options);

}  // namespace fastpath::cli
