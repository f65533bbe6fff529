// ORT on the CPU whatever the config asks for (a KIND_GPU model too, whose instances say
// their nodes are on the GPU, as the quarantine and the drift watch go by), each run taking
// exactly `cost_us` of a manual clock, so that tests of what the server makes of compute
// times (drift, canaries) are deterministic. With `corrupt` set, every run's first output
// has its first byte changed, as a silently different engine would answer. Hold() makes
// every run wait until Release(), as a hung execution would. The instances created in
// [faulty_from, faulty_to) (by creation order, instances_created) misbehave beside the
// others: with faulty_fail every run fails, with faulty_cost_us > 0 each takes that long, and
// with faulty_hold each waits as under Hold() until Release().
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>

#include "fakes/manual_clock.h"
#include "fastpath/backend/backend.h"
#include "fastpath/backend/placement.h"

namespace fastpath::testing {

class TimedBackend final : public backend::Backend {
 public:
  TimedBackend(std::unique_ptr<backend::Backend> inner, ManualClock* clock)
      : inner_(std::move(inner)), clock_(clock) {}
  std::string Name() const override { return inner_->Name(); }
  StatusOr<backend::ModelSignature> Inspect(const std::filesystem::path& file) override {
    return inner_->Inspect(file);
  }
  StatusOr<std::unique_ptr<backend::ModelInstance>> CreateInstance(
      const std::filesystem::path& file, const backend::InstanceOptions& options) override {
    const bool gpu = std::any_of(options.providers.begin(), options.providers.end(),
                                 [](auto p) { return p != backend::ExecutionProvider::kCpu; });
    backend::InstanceOptions cpu = options;
    cpu.providers = {backend::ExecutionProvider::kCpu};
    cpu.provider_options.clear();
    FASTPATH_ASSIGN_OR_RETURN(auto instance, inner_->CreateInstance(file, cpu));
    return std::unique_ptr<backend::ModelInstance>(
        std::make_unique<Instance>(std::move(instance), this, instances_created++, gpu));
  }

  std::atomic<int64_t> cost_us{1000};
  std::atomic<bool> corrupt{false};
  std::atomic<int> runs_entered{0};  // runs started, held ones included
  std::atomic<int> instances_created{0};
  std::atomic<int> faulty_from{0}, faulty_to{0};
  std::atomic<bool> faulty_fail{false};
  std::atomic<int64_t> faulty_cost_us{0};
  std::atomic<bool> faulty_hold{false};

  void Hold() {
    std::lock_guard lock(hold_mu_);
    held_ = true;
  }
  void Release() {
    {
      std::lock_guard lock(hold_mu_);
      held_ = false;
      faulty_hold = false;
    }
    hold_cv_.notify_all();
  }

 private:
  class Instance final : public backend::ModelInstance {
   public:
    Instance(std::unique_ptr<backend::ModelInstance> inner, TimedBackend* backend, int serial,
             bool gpu)
        : inner_(std::move(inner)), backend_(backend), serial_(serial) {
      if (gpu && inner_->placement() != nullptr) {
        placement_ = *inner_->placement();
        for (auto& p : placement_->providers) p.provider = backend::kCudaProviderName;
      }
    }
    StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                      const std::vector<std::string>& names) override {
      ++backend_->runs_entered;
      const bool faulty = serial_ >= backend_->faulty_from && serial_ < backend_->faulty_to;
      {
        std::unique_lock lock(backend_->hold_mu_);
        backend_->hold_cv_.wait(
            lock, [&] { return !backend_->held_ && !(faulty && backend_->faulty_hold); });
      }
      if (faulty && backend_->faulty_fail) return Internal("injected failure");
      const int64_t cost = faulty && backend_->faulty_cost_us > 0 ? backend_->faulty_cost_us.load()
                                                                  : backend_->cost_us.load();
      backend_->clock_->Advance(std::chrono::microseconds(cost));
      auto outputs = inner_->Run(inputs, names);
      if (outputs.ok() && backend_->corrupt.load() && !outputs->empty() &&
          !(*outputs)[0].data.empty()) {
        (*outputs)[0].data[0] = static_cast<char>((*outputs)[0].data[0] + 1);
      }
      return outputs;
    }
    const backend::PlacementAudit* placement() const override {
      return placement_ ? &*placement_ : inner_->placement();
    }

   private:
    std::unique_ptr<backend::ModelInstance> inner_;
    std::optional<backend::PlacementAudit> placement_;  // a GPU instance's, on the GPU
    TimedBackend* backend_;
    int serial_;
  };

  std::unique_ptr<backend::Backend> inner_;
  ManualClock* clock_;
  std::mutex hold_mu_;
  std::condition_variable hold_cv_;
  bool held_ = false;  // guarded by hold_mu_
};

}  // namespace fastpath::testing
