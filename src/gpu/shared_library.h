// A dlopen handle that closes itself. Private to the gpu module. Libraries are opened
// RTLD_NODELETE (see shared_library.cc): closing releases the handle, never the mapping.
#pragma once

#include <string>
#include <vector>

namespace fastpath::gpu {

class SharedLibrary {
 public:
  SharedLibrary() = default;
  ~SharedLibrary();
  SharedLibrary(SharedLibrary&& other) noexcept;
  SharedLibrary& operator=(SharedLibrary&& other) noexcept;
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  // Tries each candidate (a soname searched on the library path, or a path) in order and
  // keeps the first that loads. On failure loaded() is false and error() holds the
  // loader's message for every candidate.
  static SharedLibrary OpenFirst(const std::vector<std::string>& candidates);

  bool loaded() const { return handle_ != nullptr; }
  const std::string& candidate() const { return candidate_; }  // the one that loaded
  const std::string& path() const { return path_; }            // where it was found
  const std::string& error() const { return error_; }

  // The symbol cast to the function pointer type F, or nullptr when absent.
  template <typename F>
  F Function(const char* name) const {
    return reinterpret_cast<F>(Symbol(name));
  }
  void* Symbol(const char* name) const;

 private:
  void* handle_ = nullptr;
  std::string candidate_;
  std::string path_;
  std::string error_;
};

}  // namespace fastpath::gpu
