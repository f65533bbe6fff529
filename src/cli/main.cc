#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli.h"
#include "command_line.h"

namespace fastpath::cli {

Status WriteFileAtomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  std::error_code ec;
  {
    // Checked after the close: a short file stays in the stream's buffer until then, and
    // a full disk shows only there (it replaced a good file with an empty one).
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    if (out.fail()) {
      const std::string why = std::strerror(errno);
      std::filesystem::remove(tmp, ec);
      return Internal("cannot write " + tmp + ": " + why);
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);  // never left beside a path it could not replace
    return Internal("cannot write " + path + ": " + ec.message());
  }
  return Status::Ok();
}

}  // namespace fastpath::cli

namespace {

struct Command {
  const char* name;
  const char* description;
  int (*run)(const std::vector<std::string>& args);
};

constexpr Command kCommands[] = {
    {"serve", "serve a model repository over KServe v2 HTTP and gRPC", fastpath::cli::Serve},
    {"doctor", "print this machine's GPU capability snapshot (driver, NVML, CUDA libraries)",
     fastpath::cli::Doctor},
    {"bench",
     "measure a served model: latency percentiles, throughput, batching (perf_analyzer-like)",
     fastpath::cli::Bench},
    {"build-engines", "prebuild a repository's TensorRT engines into the keyed engine cache",
     fastpath::cli::BuildEngines},
    {"budget", "measure every model's memory budget against its cap and the device, without serving",
     fastpath::cli::Budget},
    {"preflight",
     "check the production checklist on this node against a repository: PASS, FAIL or NOT "
     "CHECKED per item",
     fastpath::cli::Preflight},
    {"gate",
     "compare a candidate server's model with a baseline's before a rollout: p95, throughput, "
     "outputs, snapshots",
     fastpath::cli::Gate},
};

// What a command wrote to its standard output, checked once it is done: `fastpath budget
// --json > budget.json` on a full disk must not exit 0 with the JSON lost.
int FlushStandardOutput(int exit_code) {
  std::cout.flush();
  if (std::cout.fail() || std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "fastpath: write error on standard output: %s\n", std::strerror(errno));
    return exit_code == fastpath::cli::kExitOk ? fastpath::cli::kExitRuntime : exit_code;
  }
  return exit_code;
}

int Run(int argc, char** argv) {
  // ONNX Runtime 1.29's Linux build sends telemetry to Microsoft over HTTPS unless this is
  // set before its environment starts. A server on a production node sends nothing nobody
  // asked for; an operator who wants it sets ORT_DISABLE_TELEMETRY=0 (not overwritten).
  // Set here, while the process has one thread, because setenv races getenv.
  setenv("ORT_DISABLE_TELEMETRY", "1", /*overwrite=*/0);
  // CUDA numbers GPUs fastest first unless told otherwise; NVML numbers them by PCI bus. On a
  // node with GPUs of more than one kind the two orders differ, and a config's `gpus: [1]` (a
  // CUDA ordinal), CUDA_VISIBLE_DEVICES' indices (CUDA reads them in its order, the telemetry
  // in NVML's), engines built per ordinal and the telemetry's GPU 1 would be different
  // boards. PCI order for every command, unless the user chose (serve warns of another).
  setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", /*overwrite=*/0);

  CLI::App app{"", "fastpath"};
  fastpath::cli::UseHelpLayout(app, "usage: fastpath <command> [options]");
  app.footer("Run `fastpath <command> --help` for a command's options.");
  app.set_version_flag("--version", std::string("fastpath ") + FASTPATH_VERSION);
  // At most one command: a later word that names one ("bench --label serve") is the first
  // command's, not a second command.
  app.require_subcommand(0, 1);
  std::vector<std::pair<CLI::App*, const Command*>> commands;
  for (const Command& command : kCommands) {
    CLI::App* sub = app.add_subcommand(command.name, command.description);
    // The command's own parser reads every word after its name, --help included.
    sub->prefix_command()->group("Commands")->set_help_flag();
    commands.emplace_back(sub, &command);
  }
  CLI::App* version = app.add_subcommand("version", "print the version")->group("Commands");
  CLI::App* help = app.add_subcommand("help", "")->group("")->prefix_command();  // not listed
  help->set_help_flag();

  const std::vector<std::string> args(argv + 1, argv + argc);
  if (auto exit_code = fastpath::cli::ParseCommandLine(app, args, "unknown command"))
    return *exit_code;
  for (const auto& [sub, command] : commands) {
    if (sub->parsed()) return command->run(sub->remaining());
  }
  // The top level's help; app.help() would give the parsed `help` command's.
  const auto top_help = [&app] {
    return app.get_formatter()->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal);
  };
  if (version->parsed()) {
    if (const auto extra = version->remaining(); !extra.empty()) {
      std::cerr << "fastpath version: unexpected argument '" << extra[0] << "'\n";
      return fastpath::cli::kExitUsage;
    }
    std::cout << "fastpath " << FASTPATH_VERSION << "\n";
    return fastpath::cli::kExitOk;
  }
  if (help->parsed()) {  // `fastpath help serve` is `fastpath serve --help`
    const std::vector<std::string> topic = help->remaining();
    if (topic.empty()) {
      std::cout << top_help();
      return fastpath::cli::kExitOk;
    }
    for (const auto& [sub, command] : commands) {
      if (topic[0] == command->name) return command->run({"--help"});
    }
    std::cerr << "fastpath help: unknown command '" << topic[0] << "'\n" << top_help();
    return fastpath::cli::kExitUsage;
  }
  std::cout << top_help();  // no command
  return fastpath::cli::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) { return FlushStandardOutput(Run(argc, argv)); }
