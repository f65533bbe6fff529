#include "fastpath/protocol/request_policy.h"

#include <array>
#include <string_view>

namespace fastpath::protocol {
namespace {

constexpr std::array<std::string_view, 3> kSharedMemory = {
    "shared_memory_region", "shared_memory_byte_size", "shared_memory_offset"};
constexpr std::array<std::string_view, 3> kSequence = {"sequence_id", "sequence_start",
                                                       "sequence_end"};

Status CheckTensorParameters(const std::string& what, const Parameters& parameters, bool output) {
  for (std::string_view key : kSharedMemory) {
    if (parameters.contains(std::string(key))) {
      return Unimplemented(what + ": shared memory ('" + std::string(key) +
                           "') is not supported; send the tensor in the request");
    }
  }
  if (output && parameters.contains("classification")) {
    return Unimplemented(what +
                         ": the classification extension is not supported; request the "
                         "raw output and take its top k");
  }
  return Status::Ok();
}

}  // namespace

Status CheckRequestParameters(const Parameters& parameters) {
  for (std::string_view key : kSequence) {
    if (parameters.contains(std::string(key))) {
      return Unimplemented("request parameter '" + std::string(key) +
                           "' asks for sequence batching, which fastpath does not support");
    }
  }
  return Status::Ok();
}

Status CheckInputParameters(const std::string& input, const Parameters& parameters) {
  return CheckTensorParameters("input '" + input + "'", parameters, /*output=*/false);
}

Status CheckOutputParameters(const std::string& output, const Parameters& parameters) {
  return CheckTensorParameters("output '" + output + "'", parameters, /*output=*/true);
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

Status CheckUnloadParameters(const Parameters& parameters) {
  for (const auto& [key, value] : parameters) {
    if (key != "unload_dependents") {
      return InvalidArgument("unknown unload parameter '" + key +
                             "'; fastpath's model unload takes only 'unload_dependents'");
    }
    if (!std::holds_alternative<bool>(value)) {
      return InvalidArgument("unload parameter 'unload_dependents' must be true or false");
    }
  }
  return Status::Ok();
}

}  // namespace fastpath::protocol
