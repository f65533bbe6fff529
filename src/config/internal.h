// Helpers shared by the config module's sources; not part of its interface.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fastpath/common/status.h"
#include "model_config.pb.h"

namespace fastpath::config::internal {

inline std::vector<int64_t> ToVector(const google::protobuf::RepeatedField<int64_t>& dims) {
  return {dims.begin(), dims.end()};
}

// "[1,-1,3]"
std::string DimsString(const google::protobuf::RepeatedField<int64_t>& dims);

// Product of the fixed (non -1) dims and the number of -1 dims; nullopt on int64
// overflow. Dims must already be >= -1.
struct DimsVolume {
  int64_t fixed_product = 1;
  int dynamic_count = 0;
};
std::optional<DimsVolume> Volume(const google::protobuf::RepeatedField<int64_t>& dims);

// A bare file name: non-empty, no '/', '\\', "..", or control characters. Used for
// names that end up joined to a model directory or an URL path.
bool IsPlainName(std::string_view name);

// Parses a strictly decimal positive integer in [1, max]; nullopt otherwise.
std::optional<int> ParsePositiveInt(std::string_view text, int max);

// "KIND_CPU", ... or the number when outside the enum.
std::string KindName(int kind);

}  // namespace fastpath::config::internal
