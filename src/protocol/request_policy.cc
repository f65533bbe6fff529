#include "fastpath/protocol/request_policy.h"

#include <array>
#include <string>
#include <string_view>

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

}  // namespace

Status CheckRequestParameters(const Parameters& parameters) {
  if (const std::string* key = FindAny(parameters, kSequence)) {
    return Unimplemented("request parameter '" + *key +
                         "' asks for sequence batching, which fastpath does not support");
  }
  return Status::Ok();
}

Status CheckInputParameters(const std::string& input, const Parameters& parameters) {
  return CheckTensorParameters("input", input, parameters);
}

Status CheckOutputParameters(const std::string& output, const Parameters& parameters) {
  return CheckTensorParameters("output", output, parameters);
}

Status CheckLoadParameters(const Parameters& parameters) {
  for (const auto& [key, value] : parameters) {
    if (key == "config" || key.rfind("file:", 0) == 0) {
      return Unimplemented("load parameter '" + key +
                           "' is not supported: fastpath loads models from the repository only");
    }
    return InvalidArgument("unknown load parameter '" + key +
                           "'; fastpath's model load takes none");
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

}  // namespace fastpath::protocol
