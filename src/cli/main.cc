#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli.h"

namespace fastpath::cli {

Status WriteFileAtomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!(out << content)) return Internal("cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Internal("cannot rename " + tmp + " to " + path + ": " + ec.message());
  return Status::Ok();
}

}  // namespace fastpath::cli

namespace {

constexpr const char* kUsage = R"(usage: fastpath <command> [options]

commands:
  serve     serve a model repository over KServe v2 HTTP and gRPC
  doctor    print this machine's GPU capability snapshot (driver, NVML, CUDA libraries)
  bench     measure a served model: latency percentiles, throughput, batching (perf_analyzer-like)
  build-engines  prebuild a repository's TensorRT engines into the keyed engine cache
  version   print the version

Run `fastpath <command> --help` for a command's options.
)";

}  // namespace

int main(int argc, char** argv) {
  // ONNX Runtime 1.29's Linux build sends telemetry to Microsoft over HTTPS unless this is
  // set before its environment starts. A server on a production node sends nothing nobody
  // asked for; an operator who wants it sets ORT_DISABLE_TELEMETRY=0 (not overwritten).
  // Set here, while the process has one thread, because setenv races getenv.
  setenv("ORT_DISABLE_TELEMETRY", "1", /*overwrite=*/0);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kUsage;
    return args.empty() ? fastpath::cli::kExitUsage : 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  if (command == "serve") return fastpath::cli::Serve(args);
  if (command == "doctor") return fastpath::cli::Doctor(args);
  if (command == "bench") return fastpath::cli::Bench(args);
  if (command == "build-engines") return fastpath::cli::BuildEngines(args);
  if (command == "version" || command == "--version") {
    std::cout << "fastpath " << FASTPATH_VERSION << "\n";
    return 0;
  }
  std::cerr << "fastpath: unknown command '" << command << "'\n\n" << kUsage;
  return fastpath::cli::kExitUsage;
}
