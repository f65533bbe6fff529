#include "fastpath/protocol/request_policy.h"

#include <absl/strings/escaping.h>

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <variant>

#include "fastpath/common/utf8.h"

namespace fastpath::protocol {
namespace {

constexpr std::array<std::string_view, 3> kSharedMemory = {
    "shared_memory_region", "shared_memory_byte_size", "shared_memory_offset"};
constexpr std::array<std::string_view, 3> kSequence = {"sequence_id", "sequence_start",
                                                       "sequence_end"};

// The first of `keys`, in their order, that `parameters` has, if any. Compares in place,
// the parameters being few (usually none), and builds no string: this runs for every
// tensor of every request.
template <size_t N>
const std::string* FindAny(const Parameters& parameters,
                           const std::array<std::string_view, N>& keys) {
  for (std::string_view k : keys) {
    for (const auto& [key, value] : parameters) {
      if (key == k) return &key;
    }
  }
  return nullptr;
}

// `kind` is "input" or "output"; the error names the tensor.
Status CheckTensorParameters(std::string_view kind, const std::string& name,
                             const Parameters& parameters) {
  if (parameters.empty()) return Status::Ok();
  const auto what = [&] { return std::string(kind) + " '" + name + "'"; };
  if (const std::string* key = FindAny(parameters, kSharedMemory)) {
    return Unimplemented(what() + ": shared memory ('" + *key +
                         "') is not supported; send the tensor in the request");
  }
  if (kind == "output" && parameters.contains("classification")) {
    return Unimplemented(what() +
                         ": the classification extension is not supported; request the "
                         "raw output and take its top k");
  }
  return Status::Ok();
}

constexpr std::string_view kFilePrefix = "file:";
// What Linux file systems take for one name (NAME_MAX), and a bound on a whole path that
// leaves room for the folder the server writes it into (PATH_MAX is 4096).
constexpr size_t kMaxFileNameBytes = 255;
constexpr size_t kMaxFilePathBytes = 1024;

// A load's file path: relative, within the model's folder, one file. `key` is the
// parameter, for the message.
Status CheckFilePath(const std::string& key, std::string_view path) {
  const auto refuse = [&](const std::string& why) {
    return InvalidArgument("load parameter '" + ToValidUtf8(key) + "': " + why);
  };
  if (path.empty()) return refuse("names no file (give e.g. 'file:1/model.onnx')");
  if (!IsValidUtf8(path)) return refuse("the path is not UTF-8 text");
  if (path.find('\0') != std::string_view::npos) return refuse("the path holds a NUL byte");
  if (path.size() > kMaxFilePathBytes) {
    return refuse("the path is " + std::to_string(path.size()) + " bytes, more than " +
                  std::to_string(kMaxFilePathBytes));
  }
  if (path.front() == '/') return refuse("the path must be relative to the model's folder");
  size_t begin = 0;
  while (begin <= path.size()) {
    const size_t end = std::min(path.find('/', begin), path.size());
    const std::string_view part = path.substr(begin, end - begin);
    if (part.empty() || part == "." || part == "..") {
      return refuse("'" + std::string(part) +
                    "' is not a folder or file name: the path must stay within the model's "
                    "folder, with no empty, '.' or '..' part");
    }
    if (part.size() > kMaxFileNameBytes) {
      return refuse("a name in the path is " + std::to_string(part.size()) +
                    " bytes, more than a file system takes (" + std::to_string(kMaxFileNameBytes) +
                    ")");
    }
    begin = end + 1;
  }
  if (path == "config.pbtxt") {
    return refuse("give the configuration as the 'config' parameter (JSON), not as a file");
  }
  return Status::Ok();
}

}  // namespace

Status CheckRequestParameters(const Parameters& parameters) {
  if (FindAny(parameters, kSequence) == nullptr) return Status::Ok();
  for (std::string_view key : kSequence) {
    const auto it = parameters.find(std::string(key));
    if (it == parameters.end()) continue;
    // Triton's "not in a sequence": sequence_id 0 or "", sequence_start/end false.
    const ParameterValue& value = it->second;
    bool in_sequence = false;
    if (key == "sequence_id") {
      if (const auto* id = std::get_if<int64_t>(&value)) {
        in_sequence = *id != 0;
      } else if (const auto* text = std::get_if<std::string>(&value)) {
        in_sequence = !text->empty();
      } else {
        return InvalidArgument("request parameter 'sequence_id' must be an integer or a string");
      }
    } else if (const auto* flag = std::get_if<bool>(&value)) {
      in_sequence = *flag;
    } else {
      return InvalidArgument("request parameter '" + std::string(key) + "' must be a boolean");
    }
    if (in_sequence) {
      return Unimplemented("request parameter '" + std::string(key) +
                           "' asks for sequence batching, which fastpath does not support");
    }
  }
  return Status::Ok();
}

Status CheckInputParameters(const std::string& input, const Parameters& parameters) {
  return CheckTensorParameters("input", input, parameters);
}

Status CheckOutputParameters(const std::string& output, const Parameters& parameters) {
  return CheckTensorParameters("output", output, parameters);
}

Status CheckLoadParameters(const Parameters& parameters, FileEncoding encoding,
                           LoadOverride* load) {
  *load = LoadOverride();
  for (const auto& [key, value] : parameters) {
    const bool is_file = key.rfind(kFilePrefix, 0) == 0;
    if (key != "config" && !is_file) {
      return InvalidArgument("unknown load parameter '" + key +
                             "'; a model load takes 'config' and 'file:<path>'");
    }
    const std::string* text = std::get_if<std::string>(&value);
    if (text == nullptr) {
      return InvalidArgument(
          "load parameter '" + key + "' must be a string" +
          (is_file && encoding == FileEncoding::kBase64 ? " (the file's contents in base64)" : ""));
    }
    if (!is_file) {
      if (text->empty()) return InvalidArgument("load parameter 'config' is empty");
      load->config_json = *text;
      continue;
    }
    const std::string path = key.substr(kFilePrefix.size());
    FASTPATH_RETURN_IF_ERROR(CheckFilePath(key, path));
    std::string& contents = load->files[path];
    if (encoding == FileEncoding::kRaw) {
      contents = *text;
    } else if (!absl::Base64Unescape(*text, &contents)) {
      return InvalidArgument("load parameter '" + key + "' is not base64");
    }
  }
  // A file where another one needs a folder ("1/model.onnx" and "1/model.onnx/x").
  for (const auto& [path, contents] : load->files) {
    const std::string folder = path + "/";
    auto inside = load->files.lower_bound(folder);
    if (inside != load->files.end() && inside->first.compare(0, folder.size(), folder) == 0) {
      return InvalidArgument("load parameters 'file:" + path + "' and 'file:" + inside->first +
                             "' contradict each other: the first is a file, the second needs a "
                             "folder there");
    }
  }
  if (!load->files.empty() && load->config_json.empty()) {
    return InvalidArgument("load parameter 'file:" + load->files.begin()->first +
                           "' needs the 'config' parameter too: the files replace the model's "
                           "folder, config.pbtxt included");
  }
  return Status::Ok();
}

Status CheckUnloadParameters(const Parameters& parameters, bool* unload_dependents) {
  *unload_dependents = false;
  for (const auto& [key, value] : parameters) {
    if (key != "unload_dependents") {
      return InvalidArgument("unknown unload parameter '" + key +
                             "'; fastpath's model unload takes only 'unload_dependents'");
    }
    if (!std::holds_alternative<bool>(value)) {
      return InvalidArgument("unload parameter 'unload_dependents' must be true or false");
    }
    *unload_dependents = std::get<bool>(value);
  }
  return Status::Ok();
}

namespace {

std::string_view Name(SharedMemory kind) {
  return kind == SharedMemory::kSystem ? "system" : "CUDA";
}

}  // namespace

Status SharedMemoryRegionNotFound(SharedMemory kind, std::string_view region) {
  return NotFound("no " + std::string(Name(kind)) + " shared memory region '" +
                  std::string(region) + "' is registered");
}

Status SharedMemoryRegisterRefused(SharedMemory kind) {
  return Unimplemented("the " + std::string(Name(kind)) +
                       " shared memory extension is not supported: send tensors in the request");
}

Status SettingsRefused(Settings which) {
  return Unimplemented(std::string("the ") + (which == Settings::kTrace ? "trace" : "logging") +
                       " extension is not supported: fastpath logs with --log-level and "
                       "--log-format");
}

}  // namespace fastpath::protocol
