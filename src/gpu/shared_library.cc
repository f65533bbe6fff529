#include "shared_library.h"

#include <dlfcn.h>
#include <link.h>

#include <utility>

namespace fastpath::gpu {

SharedLibrary::~SharedLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

SharedLibrary::SharedLibrary(SharedLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      candidate_(std::move(other.candidate_)),
      path_(std::move(other.path_)),
      error_(std::move(other.error_)) {}

SharedLibrary& SharedLibrary::operator=(SharedLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    candidate_ = std::move(other.candidate_);
    path_ = std::move(other.path_);
    error_ = std::move(other.error_);
  }
  return *this;
}

SharedLibrary SharedLibrary::OpenFirst(const std::vector<std::string>& candidates) {
  SharedLibrary lib;
  for (const std::string& candidate : candidates) {
    // RTLD_LOCAL: the probed symbols must not satisfy anything else in the process.
    // RTLD_NODELETE: dlclose drops our reference but never unmaps an NVIDIA library.
    // Unloading them is unsafe: libcuda keeps threads running after cuInit, and cuBLAS
    // and cuDNN carry a static libstdc++ whose exception pool would become an unreachable
    // (leaked) block once unmapped. ORT's CUDA EP loads the same libraries anyway.
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (handle == nullptr) {
      const char* message = dlerror();
      if (!lib.error_.empty()) lib.error_ += "; ";
      lib.error_ += message != nullptr ? message : candidate + ": cannot be loaded";
      continue;
    }
    lib.handle_ = handle;
    lib.candidate_ = candidate;
    lib.path_ = candidate;
    link_map* map = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
        map->l_name[0] != '\0') {
      lib.path_ = map->l_name;
    }
    lib.error_.clear();
    return lib;
  }
  if (candidates.empty()) lib.error_ = "no candidates to load";
  return lib;
}

void* SharedLibrary::Symbol(const char* name) const {
  if (handle_ == nullptr) return nullptr;
  return dlsym(handle_, name);
}

}  // namespace fastpath::gpu
