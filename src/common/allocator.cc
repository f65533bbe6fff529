#include "fastpath/common/allocator.h"

#include <dlfcn.h>
#include <gnu/libc-version.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace fastpath {

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
    using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);
    auto mallctl = reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl"));
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

}  // namespace fastpath
