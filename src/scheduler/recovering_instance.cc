#include "fastpath/scheduler/recovering_instance.h"

#include <mutex>
#include <utility>

#include "fastpath/common/log.h"

namespace fastpath::scheduler {

RecoveringInstance::RecoveringInstance(std::unique_ptr<backend::ModelInstance> inner,
                                       std::string name, std::optional<RecoveryProbe> probe,
                                       Rebuild rebuild)
    : inner_(std::move(inner)),
      name_(std::move(name)),
      probe_(std::move(probe)),
      rebuild_(std::move(rebuild)) {
  if (const backend::PlacementAudit* audit = inner_->placement()) placement_ = *audit;
}

StatusOr<std::vector<Tensor>> RecoveringInstance::Run(const std::vector<Tensor>& inputs,
                                                      const std::vector<std::string>& output_names) {
  // The scheduler orders Run after any swap (the instance is busy across both, under its
  // lock), so reading inner_ here needs no lock.
  if (inner_ == nullptr) return Unavailable(name_ + " is out of service: " + out_of_service_);
  return inner_->Run(inputs, output_names);
}

const backend::PlacementAudit* RecoveringInstance::placement() const {
  return placement_ ? &*placement_ : nullptr;
}

std::optional<uint64_t> RecoveringInstance::staged_runs() const {
  std::shared_lock lock(mu_);
  const std::optional<uint64_t> now = inner_ ? inner_->staged_runs() : std::nullopt;
  if (!now && retired_staged_runs_ == 0) return now;
  return now.value_or(0) + retired_staged_runs_;
}

std::optional<backend::MemoryStats> RecoveringInstance::memory_stats() const {
  std::shared_lock lock(mu_);
  if (inner_ == nullptr) return std::nullopt;
  std::optional<backend::MemoryStats> stats = inner_->memory_stats();
  if (stats) {
    stats->out_of_memory_runs += retired_.out_of_memory_runs;
    stats->arena_extensions += retired_.arena_extensions;
    stats->arena_shrinkages += retired_.arena_shrinkages;
  }
  return stats;
}

void RecoveringInstance::Drop(std::string why) {
  std::unique_ptr<backend::ModelInstance> dropped;
  {
    std::unique_lock lock(mu_);
    if (const auto stats = inner_->memory_stats()) {
      retired_.out_of_memory_runs += stats->out_of_memory_runs;
      retired_.arena_extensions += stats->arena_extensions;
      retired_.arena_shrinkages += stats->arena_shrinkages;
    }
    retired_staged_runs_ += inner_->staged_runs().value_or(0);
    out_of_service_ = std::move(why);
    dropped = std::move(inner_);
  }
  // Destroyed outside the lock: tearing a session down takes a while, and the statistics'
  // readers wait on the lock.
  dropped.reset();
}

Status RecoveringInstance::RecoverFromOutOfMemory() {
  if (inner_ != nullptr) {
    if (!probe_) return Status::Ok();
    auto answer = inner_->Run(probe_->inputs, probe_->output_names);
    if (answer.ok()) {
      log::Info(name_ + " answered its check after running out of memory; it serves again");
      return Status::Ok();
    }
    const std::string failure = answer.status().message();
    if (answer.status().code() == StatusCode::kResourceExhausted) {
      // Memory is still short (other instances, other arenas): a fresh copy would need
      // more than the check did. Out of service until a later check fits.
      return Unavailable(name_ + " is out of service until memory frees: its check after "
                         "running out of memory ran out too: " + failure);
    }
    log::Warn(name_ + " failed its check after running out of memory; rebuilding it: " +
              failure);
    // The old copy goes first, so that its memory is free for the new one.
    Drop("it failed its check after running out of memory (" + failure +
         ") and is being rebuilt");
  }
  auto fresh = rebuild_();
  if (!fresh.ok()) {
    out_of_service_ = "it could not be rebuilt after running out of memory: " +
                      fresh.status().message();
    return Unavailable(name_ + " is out of service: " + out_of_service_);
  }
  {
    std::unique_lock lock(mu_);
    inner_ = std::move(fresh).value();
  }
  if (probe_) {
    auto answer = inner_->Run(probe_->inputs, probe_->output_names);
    if (!answer.ok() && answer.status().code() == StatusCode::kResourceExhausted) {
      // Memory is short even for a fresh copy: it stays out until a later try fits.
      Drop("its rebuilt copy ran out of memory too: " + answer.status().message());
      return Unavailable(name_ + " is out of service: " + out_of_service_);
    }
    if (!answer.ok()) {
      log::Warn(name_ + " was rebuilt, and its fresh copy fails the check too, so the check is "
                "not valid input for this model; it serves without one: " +
                answer.status().message());
      probe_.reset();
    }
  }
  log::Info(name_ + " was rebuilt after running out of memory; it serves again");
  return Status::Ok();
}

}  // namespace fastpath::scheduler
