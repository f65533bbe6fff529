// The command line of the built binary, black-box: every command's --help, the usage errors
// (exit 2, the option named on stderr), and the logging options on a real `serve`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <sys/wait.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "fakes/run_command.h"

namespace fastpath::integration {
namespace {

using testing::CommandRun;
using ::testing::HasSubstr;
using ::testing::StartsWith;

CommandRun Fastpath(std::vector<std::string> args) {
  args.insert(args.begin(), FASTPATH_BINARY);
  return testing::RunCommand(args);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The help line of `option` (the line that starts with it, two spaces in; a long one has its
// description on the next line).
std::string HelpLine(const std::string& help, const std::string& option) {
  for (const std::string& line : Lines(help)) {
    if (line == "  " + option || line.rfind("  " + option + " ", 0) == 0) return line;
  }
  return "";
}

TEST(CommandLine, EveryCommandHasHelp) {
  for (const std::vector<std::string>& command : std::vector<std::vector<std::string>>{
           {"serve"}, {"doctor"}, {"bench"}, {"bench", "plot"}, {"build-engines"}, {"budget"},
           {"preflight"}, {"gate"}}) {
    std::vector<std::string> args = command;
    args.push_back("--help");
    const CommandRun run = Fastpath(args);
    std::string name = "fastpath";
    for (const std::string& word : command) name += " " + word;
    EXPECT_EQ(run.exit_code, 0) << name << ": " << run.err;
    EXPECT_THAT(run.out, StartsWith("usage: " + name)) << run.out;
    EXPECT_THAT(run.out, HasSubstr("  -h,--help")) << name;
    EXPECT_EQ(run.err, "") << name;
  }
}

TEST(CommandLine, ServeHelpShowsEveryDefault) {
  const CommandRun run = Fastpath({"serve", "--help"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"--model-repository DIR", "(required)"},
      {"--profile production|dev", "default dev"},
      {"--http-port N", "default 8000"},
      {"--grpc-port N", "default 8001"},
      {"--metrics-port N", "default 8002"},
      {"--allow-metrics true|false", "default true"},
      {"--host ADDR", "default 0.0.0.0"},
      {"--model-control-mode none|explicit|poll", "default none"},
      {"--repository-poll-secs N", "default 15"},
      {"--strict-readiness true|false", "default true"},
      {"--http-threads N", "default 2"},
      {"--max-queue-size N", "default 1024"},
      {"--grace-period-secs N", "default 30"},
      {"--log-level trace|debug|info|warn|error", "default info"},
      {"--log-format text|json", "default text"},
  };
  for (const auto& [option, note] : expected) {
    const std::string line = HelpLine(run.out, option);
    ASSERT_NE(line, "") << option << " is not in:\n" << run.out;
    // The note may be wrapped onto the next line of the help.
    const size_t at = run.out.find(line);
    EXPECT_THAT(run.out.substr(at, 400), HasSubstr(note)) << option;
  }
  EXPECT_THAT(run.out, HasSubstr("--load-model NAME ..."));
  EXPECT_THAT(run.out, HasSubstr("67108864 for HTTP, 1073741824 for gRPC"));
}

TEST(CommandLine, TopLevel) {
  CommandRun run = Fastpath({"--help"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.out, StartsWith("usage: fastpath <command> [options]"));
  for (const char* command : {"serve", "doctor", "bench", "build-engines", "version"}) {
    EXPECT_THAT(run.out, HasSubstr("\n  " + std::string(command) + " ")) << command;
  }
  run = Fastpath({});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.out, StartsWith("usage: fastpath <command>"));
  run = Fastpath({"bogus"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("fastpath: unknown command 'bogus'"));
  for (const char* version : {"version", "--version"}) {
    run = Fastpath({version});
    EXPECT_EQ(run.exit_code, 0) << version;
    EXPECT_THAT(run.out, StartsWith("fastpath 0.")) << version;
  }
  run = Fastpath({"help", "doctor"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.out, StartsWith("usage: fastpath doctor"));
  // `help` alone is the top level's help (it printed an empty usage), an unknown topic a
  // usage error, and so is a word after `version`.
  run = Fastpath({"help"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.out, HasSubstr("\n  serve "));
  run = Fastpath({"help", "nosuch"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("fastpath help: unknown command 'nosuch'"));
  run = Fastpath({"version", "--bogus"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("fastpath version: unexpected argument '--bogus'"));
}

// What a command writes to a standard output that cannot take it (a full disk) is an
// error: `fastpath budget --json > budget.json` exited 0 with the JSON lost.
TEST(CommandLine, AWriteErrorOnStandardOutputIsAFailure) {
  const int status =
      std::system((std::string(FASTPATH_BINARY) + " version > /dev/full 2>/dev/null").c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
}

TEST(CommandLine, BadCommandLinesExitTwoNamingTheOption) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"serve", "--model-repository", "/tmp", "--http-port", "70000"},
       "fastpath serve: --http-port must be an integer in [0, 65535], not '70000'"},
      {{"serve", "--model-repository", "/tmp", "--grace-period-secs", "0x10"},
       "--grace-period-secs must be an integer in [0, 3600], not '0x10'"},
      {{"serve", "--model-repository", "/tmp", "--allow-metrics", "yes"},
       "--allow-metrics must be true or false, not 'yes'"},
      {{"serve", "--model-repository", "/tmp", "--model-control-mode", "sometimes"},
       "--model-control-mode must be none, explicit or poll, not 'sometimes'"},
      {{"serve", "--model-repository", "/tmp", "--log-level", "loud"},
       "--log-level must be trace, debug, info, warn or error, not 'loud'"},
      {{"serve", "--model-repository", "/tmp", "--log-format", "xml"},
       "--log-format must be text or json, not 'xml'"},
      {{"serve", "--model-repository", "/tmp", "--port-file", "/nonexistent/ports"},
       "--port-file: the folder /nonexistent does not exist"},
      {{"serve", "--model-repository", "/tmp", "--port-file", "/tmp"},
       "--port-file: /tmp is a folder"},
      {{"serve", "--model-repository", ""}, "--model-repository needs a value"},
      {{"serve", "--model-repository", "/tmp", "--http-port", "9000", "--grpc-port", "9000"},
       "--http-port and --grpc-port are both 9000"},
      {{"serve", "--model-repository", "/tmp", "--gpu-ignored-xids", "13,a"},
       "--gpu-ignored-xids: 'a' is not an XID"},
      {{"serve", "--model-repository", "/tmp", "--host", "localhost"},
       "--host must be an IP address (0.0.0.0 or :: for every interface, 127.0.0.1 or ::1 for "
       "this host only), not 'localhost'"},
      {{"serve", "--model-repository", "/tmp", "--load-model", "a"},
       "--load-model needs --model-control-mode explicit"},
      {{"serve", "--model-repository", "/tmp", "--model-control-mode", "explicit", "--load-model",
        "fastpath-no-such-model"},
       "--load-model 'fastpath-no-such-model': no model folder 'fastpath-no-such-model' in /tmp"},
      {{"serve", "--model-repository", "/tmp", "--model-control-mode", "explicit", "--load-model",
        "../tmp"},
       "--load-model '../tmp' is not a model name"},
      {{"serve", "--model-repository", "/tmp", "--allow-cpu-fallback=false"}, "allow-cpu-fallback"},
      {{"serve", "--model-repository", "/tmp", "--no-such-option", "1"},
       "fastpath serve: unknown flag --no-such-option"},
      {{"serve", "--http-port", "0"}, "fastpath serve: --model-repository is required"},
      {{"serve", "--model-repository", "/tmp", "--model-repository", "/tmp/"},
       "--model-repository /tmp/ is given twice (as /tmp)"},
      // One sample per part of the leak window (or none) and the detector never judges.
      {{"serve", "--model-repository", "/tmp", "--memory-leak-window-secs", "60"},
       "--memory-sample-interval-ms 10000 is too long for --memory-leak-window-secs 60: each of "
       "the window's 6 parts needs two samples, so sample every 5000 ms or less, or widen the "
       "window to 120 s or more"},
      {{"serve", "--model-repository", "/tmp", "--max-request-bytes", "100000",
        "--max-request-bytes-in-flight", "50000"},
       "--max-request-bytes-in-flight 50000 is below --max-request-bytes 100000"},
      {{"serve", "--model-repository", "/tmp", "--model-repository", "/var", "--model-control-mode",
        "explicit", "--load-model", "fastpath-no-such-model"},
       "--load-model 'fastpath-no-such-model': no model folder 'fastpath-no-such-model' in /tmp, "
       "/var"},
      {{"preflight", "--model-repository", "/tmp", "--model-repository", "/var"},
       "--model-repository is given 2 times; fastpath preflight takes it once"},
      {{"budget", "--model-repository", "/tmp", "--model-repository", "/var"},
       "--model-repository is given 2 times; fastpath budget takes it once"},
      {{"serve", "--model-repository"}, "--model-repository"},
      {{"doctor", "--diff", "a.json"}, "--diff"},
      {{"doctor", "stray"}, "fastpath doctor: unexpected argument 'stray'"},
      // Combinations that were accepted, one of the two silently ignored.
      {{"doctor", "--diff", "a.json", "b.json", "--lock", "l.json"}, "--lock excludes --diff"},
      {{"doctor", "--diff", "a.json", "b.json", "--require-gpu"}, "excludes"},
      {{"doctor", "--lock", ""}, "--lock needs a value"},
      // Empty reads as not given: no record written, the server's own choice of model.
      {{"gate", "-m", "", "--baseline", "http://127.0.0.1:1", "--candidate", "http://127.0.0.1:2"},
       "--model needs a value"},
      {{"bench", "-m", "m", "--json", ""}, "--json needs a value"},
      {{"gate", "-m", "m", "--baseline", "ftp://127.0.0.1:1", "--candidate", "http://127.0.0.1:2"},
       "--baseline 'ftp://127.0.0.1:1': 'ftp://' is not spoken here"},
      {{"gate", "-m", "m", "--baseline", "http://127.0.0.1:1/v2", "--candidate",
        "http://127.0.0.1:2"},
       "--baseline 'http://127.0.0.1:1/v2': a server's address has no path ('/v2')"},
      {{"bench", "-m", "m", "--no-server"}, "--no-server requires --in-process"},
      {{"bench", "-m", "m", "--concurrency", "1", "--request-rate", "10"},
       "--concurrency excludes --request-rate"},
      {{"bench", "-m", "m", "--append"}, "--append needs --json or --csv"},
      {{"bench", "-m", "a/b"}, "--model 'a/b' is not a model name"},
      {{"bench", "-m", "m", "--concurrency", "1:9223372036854775807:2x"},
       "--concurrency: 131072 is more than 65536"},
      // What only a mode reads is refused without it, rather than ignored.
      {{"bench", "-m", "m", "--max-threads", "4"}, "--max-threads requires --request-rate"},
      {{"bench", "-m", "m", "--batch-sizes", "1,2"}, "--batch-sizes requires --in-process"},
      {{"bench", "-m", "m", "--skip-baseline"}, "--skip-baseline requires --calibrate-batching"},
      {{"bench", "-m", "m", "--model-repository", "/tmp"},
       "--model-repository is read by --in-process and --calibrate-batching only"},
      {{"bench", "-m", "m", "-i", "grpc", "--encoding", "json"},
       "--encoding json is HTTP's: gRPC carries tensors as raw bytes"},
      {{"bench", "-m", "m", "--shape", "x:1", "--shape", "x:2"},
       "--shape given twice for input 'x'"},
      {{"bench", "plot", "a.json"}, "fastpath bench plot: --svg is required"},
      {{"build-engines", "--model-repository", "/tmp", "--model", ""}, "--model needs a value"},
      // Numbers as written: no hex, exponents or spaces (strtod took "0x10" as 16).
      {{"gate", "-m", "m", "--baseline", "http://127.0.0.1:1", "--candidate", "http://127.0.0.1:2",
        "--rounds", "0x10"},
       "--rounds must be a whole number from 5 to 1000, not '0x10'"},
      {{"serve", "--model-repository", "/tmp", "--drift-threshold", " 0.2"},
       "--drift-threshold must be a number from 0.01 to 10, not ' 0.2'"},
  };
  for (const auto& [args, message] : cases) {
    const CommandRun run = Fastpath(args);
    std::string shown;
    for (const std::string& a : args) shown += " " + a;
    EXPECT_EQ(run.exit_code, 2) << shown << "\n" << run.err;
    EXPECT_THAT(run.err, HasSubstr(message)) << shown;
    EXPECT_THAT(run.err, HasSubstr("--help` lists the options")) << shown;
    EXPECT_EQ(run.out, "") << shown;
  }
}

// A folder given where a file is read is said to be one (it read as an empty file: "not valid
// JSON: The document is empty").
TEST(CommandLine, AFolderWhereAFileIsReadIsNamedAsOne) {
  const std::string folder = std::filesystem::temp_directory_path().string();
  const CommandRun run = Fastpath({"doctor", "--diff", folder, folder});
  EXPECT_EQ(run.exit_code, 21) << run.err;
  EXPECT_THAT(run.err, HasSubstr(folder + " is a folder, not a file"));
}

// A serve that cannot start: every stderr line is a JSON object with ts, level and msg, and
// the error names the repository.
TEST(CommandLine, ServeLogsJsonLines) {
  const CommandRun run =
      Fastpath({"serve", "--model-repository", "/nonexistent/fastpath-log-test", "--http-port", "0",
                "--grpc-port", "0", "--allow-metrics", "false", "--log-format", "json"});
  EXPECT_EQ(run.exit_code, 1) << run.err;
  const std::vector<std::string> lines = Lines(run.err);
  ASSERT_FALSE(lines.empty());
  bool named = false;
  bool info = false;
  for (const std::string& line : lines) {
    rapidjson::Document doc;
    doc.Parse(line.c_str(), line.size());
    ASSERT_FALSE(doc.HasParseError()) << "not JSON: " << line;
    ASSERT_TRUE(doc.IsObject()) << line;
    ASSERT_TRUE(doc.HasMember("ts") && doc["ts"].IsString()) << line;
    ASSERT_TRUE(doc.HasMember("level") && doc["level"].IsString()) << line;
    ASSERT_TRUE(doc.HasMember("msg") && doc["msg"].IsString()) << line;
    const std::string level = doc["level"].GetString();
    const std::string msg = doc["msg"].GetString();
    info = info || level == "info";
    if (level == "error" && msg.find("/nonexistent/fastpath-log-test") != std::string::npos) {
      named = true;
    }
  }
  EXPECT_TRUE(named) << run.err;
  EXPECT_TRUE(info) << run.err;  // "profile dev: ..."

  // --log-level error: only the error is left.
  const CommandRun quiet =
      Fastpath({"serve", "--model-repository", "/nonexistent/fastpath-log-test", "--http-port", "0",
                "--grpc-port", "0", "--log-level", "error"});
  EXPECT_EQ(quiet.exit_code, 1);
  for (const std::string& line : Lines(quiet.err)) {
    if (line.find("Z ") == std::string::npos) continue;  // a continuation of a message
    EXPECT_THAT(line, HasSubstr("Z error fastpath serve: ")) << quiet.err;
  }
  EXPECT_THAT(quiet.err, HasSubstr("/nonexistent/fastpath-log-test"));
}

}  // namespace
}  // namespace fastpath::integration
