// Durations as people write them on a command line: an integer and a unit.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "fastpath/common/status.h"

namespace fastpath {

// "500ms", "90s", "30m", "2h", from `lo` to `hi`; InvalidArgument naming `flag` and the
// text otherwise.
StatusOr<std::chrono::milliseconds> ParseDuration(std::string_view flag, std::string_view text,
                                                  std::chrono::milliseconds lo,
                                                  std::chrono::milliseconds hi);

// The largest unit that divides `d` exactly: "30m", "90s", "1500ms".
std::string FormatDuration(std::chrono::milliseconds d);

}  // namespace fastpath
