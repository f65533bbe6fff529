// What an execution-provider library file is, and why it would not load: read before and
// after ONNX Runtime tries it. Private to the ORT backend.
//
// ORT loads GPU providers two ways, and a library supports one of them:
// - the plugin-EP API (ORT 1.22+): the library exports CreateEpFactories, and
//   OrtEnv::RegisterExecutionProviderLibrary registers it into any ORT core;
// - the provider bridge (the older way): the library exports GetProvider, and only an ORT
//   core built with that provider's bridge (Microsoft's GPU release) can load it, through
//   SessionOptionsAppendExecutionProvider_{CUDA,TensorRT}_V2.
// Telling which from the file's symbol table, without loading it, lets fastpath say that a
// build cannot run a provider instead of passing on the loader's first missing library.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "fastpath/common/status.h"

namespace fastpath::onnxruntime {

enum class EpLibraryInterface {
  kPluginEp,        // exports CreateEpFactories
  kProviderBridge,  // exports GetProvider only
  kNone,            // exports neither: not an ONNX Runtime provider library
};

const char* EpLibraryInterfaceName(EpLibraryInterface interface);

// Reads the dynamic symbol table of a 64-bit ELF shared library. Fails (InvalidArgument,
// naming the file) when it is not one; never loads it.
[[nodiscard]] StatusOr<EpLibraryInterface> ReadEpLibraryInterface(
    const std::filesystem::path& path);

// A dependency the dynamic loader could not find, read from its message ("libX.so.N:
// cannot open shared object file: ..."), with what that library is.
struct MissingDependency {
  std::string library;  // "libcuda.so.1"
  // Why it matters and where it comes from, e.g. "the NVIDIA driver's library: ...".
  std::string explanation;
};

// Empty when the message is not a missing-file error of the loader.
std::optional<MissingDependency> FindMissingDependency(std::string_view loader_message);

}  // namespace fastpath::onnxruntime
