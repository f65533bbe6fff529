// A backend that delegates to another (ORT, in the tests) and lets a test stand its own
// instance in front of the real one for the models it picks by file: an instance whose runs
// wait on a gate, one that reports a growing arena, one that says its nodes are on the GPU.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "fastpath/backend/backend.h"

namespace fastpath::testing {

class WrappingBackend final : public backend::Backend {
 public:
  // The instance to serve the model in `file` with, given the real one (returned as it is
  // for the models the test leaves alone).
  using Wrap = std::function<std::unique_ptr<backend::ModelInstance>(
      const std::filesystem::path& file, std::unique_ptr<backend::ModelInstance> real)>;

  // With `cpu_only`, the real instance runs on the CPU whatever the config asks for (a
  // KIND_GPU model on a machine without one).
  WrappingBackend(std::unique_ptr<backend::Backend> inner, Wrap wrap, bool cpu_only = false)
      : inner_(std::move(inner)), wrap_(std::move(wrap)), cpu_only_(cpu_only) {}

  std::string Name() const override { return inner_->Name(); }
  StatusOr<backend::ModelSignature> Inspect(const std::filesystem::path& file) override {
    return inner_->Inspect(file);
  }
  StatusOr<std::unique_ptr<backend::ModelInstance>> CreateInstance(
      const std::filesystem::path& file, const backend::InstanceOptions& options) override {
    backend::InstanceOptions real_options = options;
    if (cpu_only_) {
      real_options.providers = {backend::ExecutionProvider::kCpu};
      real_options.provider_options.clear();
    }
    FASTPATH_ASSIGN_OR_RETURN(auto real, inner_->CreateInstance(file, real_options));
    return wrap_(file, std::move(real));
  }

 private:
  std::unique_ptr<backend::Backend> inner_;
  Wrap wrap_;
  bool cpu_only_;
};

}  // namespace fastpath::testing
