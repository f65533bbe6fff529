#include "fastpath/common/allocator.h"

#include <dlfcn.h>
#include <gnu/libc-version.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace fastpath {
namespace {

using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);

// jemalloc's mallctl, found by name, so that nothing but the fastpath executable links it.
Mallctl FindMallctl() { return reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl")); }

}  // namespace

ProcessAllocator FindProcessAllocator() {
  ProcessAllocator out;
  // The first definition in the global scope is the one every library's malloc calls bind
  // to; the address of `malloc` taken here could be this executable's own PLT entry.
  void* malloc_symbol = dlsym(RTLD_DEFAULT, "malloc");
  Dl_info info{};
  if (malloc_symbol == nullptr || dladdr(malloc_symbol, &info) == 0 || info.dli_fname == nullptr) {
    out.name = "unknown";
    return out;
  }
  const std::string_view path = info.dli_fname;
  const size_t slash = path.rfind('/');
  out.library = std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
  const std::string_view file = out.library;
  if (file.starts_with("libjemalloc")) {
    out.name = "jemalloc";
    const Mallctl mallctl = FindMallctl();
    const char* version = nullptr;
    size_t size = sizeof(version);
    if (mallctl != nullptr && mallctl("version", &version, &size, nullptr, 0) == 0 &&
        version != nullptr) {
      // "5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c": the release, then its commit.
      out.version = std::string(version).substr(0, std::string_view(version).find('-'));
    }
  } else if (file.starts_with("libc.so")) {
    out.name = "glibc";
    out.version = gnu_get_libc_version();
  } else if (file.starts_with("libtcmalloc")) {
    out.name = "tcmalloc";
  } else {
    // A sanitizer's malloc: GCC's runtimes are libraries, clang's are linked into the
    // executable, this code's own object.
    Dl_info self{};
    const bool executable = dladdr(reinterpret_cast<void*>(&FindProcessAllocator), &self) != 0 &&
                            self.dli_fbase == info.dli_fbase;
    const bool sanitizer = file.starts_with("libasan") || file.starts_with("libtsan");
    out.name = executable || sanitizer ? "sanitizer" : out.library;
  }
  return out;
}

std::string DescribeProcessAllocator() {
  const ProcessAllocator a = FindProcessAllocator();
  std::string out = a.name;
  if (!a.version.empty()) out += " " + a.version;
  if (!a.library.empty() && a.library != a.name) out += " (" + a.library + ")";
  return out;
}

std::optional<HeapStatistics> ReadHeapStatistics() {
  // Once: which malloc the loader bound does not change while the process runs.
  static const Mallctl kMallctl =
      FindProcessAllocator().name == "jemalloc" ? FindMallctl() : nullptr;
  const Mallctl mallctl = kMallctl;
  if (mallctl == nullptr) return std::nullopt;
  uint64_t epoch = 1;
  size_t epoch_size = sizeof(epoch);
  if (mallctl("epoch", &epoch, &epoch_size, &epoch, sizeof(epoch)) != 0) return std::nullopt;
  HeapStatistics out;
  const std::pair<const char*, uint64_t*> fields[] = {{"stats.allocated", &out.allocated},
                                                      {"stats.active", &out.active},
                                                      {"stats.resident", &out.resident},
                                                      {"stats.retained", &out.retained}};
  for (const auto& [name, field] : fields) {
    size_t value = 0;
    size_t size = sizeof(value);
    if (mallctl(name, &value, &size, nullptr, 0) != 0) return std::nullopt;  // no stats built in
    *field = value;
  }
  return out;
}

}  // namespace fastpath
