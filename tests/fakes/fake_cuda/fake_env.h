// Behaviour knobs of the fake NVIDIA libraries, read from the environment at call time so
// that one loaded copy serves every test case. Header-only: each fake .so has its own copy.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace fastpath::fakes {

inline long long EnvInt(const char* name, long long fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  return std::strtoll(text, nullptr, 0);  // base 0: "0x40" works for bit masks
}

inline std::string EnvString(const char* name, const char* fallback) {
  const char* text = std::getenv(name);
  return text != nullptr ? std::string(text) : std::string(fallback);
}

// The index-th item of a comma-separated list, or the last item when the list is shorter.
inline std::string ListItem(const std::string& list, int index) {
  std::string item;
  size_t start = 0;
  for (int i = 0;; ++i) {
    const size_t comma = list.find(',', start);
    item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (i == index || comma == std::string::npos) return item;
    start = comma + 1;
  }
}

// True when `name` is in the comma-separated list in the environment variable `var`.
inline bool EnvListHas(const char* var, const char* name) {
  const std::string list = EnvString(var, "");
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    if (list.compare(start, comma - start, name) == 0) return true;
    start = comma + 1;
  }
  return false;
}

inline void CopyOut(const std::string& value, char* out, size_t size) {
  if (size == 0) return;
  const size_t n = value.size() < size - 1 ? value.size() : size - 1;
  std::memcpy(out, value.data(), n);
  out[n] = '\0';
}

}  // namespace fastpath::fakes
