// The fastpath executable's subcommands. Exit codes are part of the interface
// (documented in README.md): orchestrators act on them.
#pragma once

#include <string>
#include <vector>

#include "fastpath/common/status.h"

namespace fastpath::cli {

constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;  // could not start or serve (repository, ports, runtime)
constexpr int kExitUsage = 2;    // bad command line

int Serve(const std::vector<std::string>& args);

// Writes via a temporary file and rename, so a reader never sees half a file.
Status WriteFileAtomically(const std::string& path, const std::string& content);

}  // namespace fastpath::cli
