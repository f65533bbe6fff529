// A model's external data (tensors whose bytes live in files beside model.onnx), read into
// memory for ONNX Runtime. Left to itself ORT maps those files, and its CPU tensors keep
// pointing into the mapping: a weights file rewritten in place under a served model (cp,
// rsync) changed its answers without a reload, and one truncated killed the whole server
// with SIGBUS at the next request. Given the files' bytes instead
// (AddExternalInitializersFromFilesInMemory), ORT copies them when the session is created,
// and what happens to the files afterwards no longer reaches it.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "fastpath/common/status.h"

namespace fastpath::onnxruntime {

// The files a serialized ModelProto's tensors name as their external data ("location"), each
// once, in the order first met: initializers, sparse initializers, and tensors in node
// attributes, in subgraphs, functions and training graphs. InvalidArgument when the bytes
// are not a well-formed protobuf.
[[nodiscard]] StatusOr<std::vector<std::string>> ExternalDataLocations(std::string_view model);

struct ExternalDataFiles {
  std::vector<std::string> locations;  // as the model names them
  std::vector<std::string> contents;    // each file's bytes
};

// The external data of `model_file`, read: empty when the model names none (the common case,
// found without reading the model when its folder holds nothing else). A location outside the
// model's folder, or a file that cannot be read, fails, naming the file.
[[nodiscard]] StatusOr<ExternalDataFiles> ReadExternalData(const std::filesystem::path& model_file);

}  // namespace fastpath::onnxruntime
