#include "fastpath/common/duration.h"

#include <charconv>
#include <cstdint>

namespace fastpath {
namespace {

constexpr int64_t kMsPerUnit[] = {3600 * 1000, 60 * 1000, 1000, 1};
constexpr const char* kUnits[] = {"h", "m", "s", "ms"};

}  // namespace

StatusOr<std::chrono::milliseconds> ParseDuration(std::string_view flag, std::string_view text,
                                                  std::chrono::milliseconds lo,
                                                  std::chrono::milliseconds hi) {
  int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string_view unit(ptr, static_cast<size_t>(text.data() + text.size() - ptr));
  int64_t ms_per_unit = 0;
  for (size_t i = 0; i < std::size(kUnits); ++i) {
    if (unit == kUnits[i]) ms_per_unit = kMsPerUnit[i];
  }
  // value <= hi (in ms) keeps the product from overflowing.
  if (ec == std::errc() && ptr != text.data() && ms_per_unit != 0 && value >= 0 &&
      value <= hi.count()) {
    const std::chrono::milliseconds d(value * ms_per_unit);
    if (d >= lo && d <= hi) return d;
  }
  return InvalidArgument(std::string(flag) + " must be a duration such as 500ms, 90s, 30m or 2h, from " +
                         FormatDuration(lo) + " to " + FormatDuration(hi) + ", not '" +
                         std::string(text) + "'");
}

std::string FormatDuration(std::chrono::milliseconds d) {
  if (d.count() == 0) return "0s";
  for (size_t i = 0; i < std::size(kUnits); ++i) {
    if (d.count() % kMsPerUnit[i] == 0) return std::to_string(d.count() / kMsPerUnit[i]) + kUnits[i];
  }
  return std::to_string(d.count()) + "ms";
}

}  // namespace fastpath
