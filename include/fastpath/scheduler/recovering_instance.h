// An instance that is checked, and rebuilt when it must be, after it runs out of memory
// (issue 13). Some users see every later run of an ORT session fail after one arena OOM;
// ORT itself tells nothing. So after an out-of-memory run, and before the instance takes
// more work (the scheduler keeps it out of rotation meanwhile, on its own thread), it
// answers one small seeded request. When it cannot, it is dropped and created afresh
// while the other instances serve.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "fastpath/backend/backend.h"
#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"

namespace fastpath::scheduler {

// The small request an instance must answer before it serves again after running out of
// memory: inputs as the instance takes them (validated, batch dim included) and the
// outputs to ask for.
struct RecoveryProbe {
  std::vector<Tensor> inputs;
  std::vector<std::string> output_names;
};

class RecoveringInstance final : public backend::ModelInstance {
 public:
  using Rebuild = std::function<StatusOr<std::unique_ptr<backend::ModelInstance>>()>;

  // Owns `inner`. `name` says which instance in messages ("instance 0 of model 'm'
  // version 1"). Without a probe (a shape nothing makes concrete, a reshape), an instance
  // is trusted after an out-of-memory run: ORT's retry already shrank its arena.
  // `rebuild` creates a fresh copy of the instance.
  RecoveringInstance(std::unique_ptr<backend::ModelInstance> inner, std::string name,
                     std::optional<RecoveryProbe> probe, Rebuild rebuild);

  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                    const std::vector<std::string>& output_names) override;
  // The placement of the instance as first created (a rebuilt one is created alike).
  const backend::PlacementAudit* placement() const override;
  // Counted over every copy the instance has had.
  std::optional<uint64_t> staged_runs() const override;
  std::optional<backend::MemoryStats> memory_stats() const override;
  // Runs the probe. When it runs out of memory too, the instance stays out of service (a
  // fresh copy would need more); when it fails otherwise, the instance is dropped (its
  // memory freed first) and rebuilt, and the fresh copy runs the probe too. A fresh copy that fails the probe
  // for any reason but memory shows that the probe is not valid input for this model
  // (random data is not valid for every model): the probe is dropped, with a warning,
  // and the copy serves. An error means out of service: no copy, or one short of memory.
  Status RecoverFromOutOfMemory() override;

 private:
  // Drops inner_ (counting what it ran), leaving `why` as the reason it is out of service.
  void Drop(std::string why);

  // Run, RecoverFromOutOfMemory and the swap of inner_ happen one at a time (the
  // scheduler keeps the instance busy across them, under its lock); mu_ guards inner_
  // against the statistics' readers on other threads.
  mutable std::shared_mutex mu_;
  std::unique_ptr<backend::ModelInstance> inner_;  // null while out of service
  // Guarded by mu_: the counters of dropped copies, carried forward (out-of-memory runs,
  // arena extensions and shrinkages), so that counters and detectors see one instance.
  backend::MemoryStats retired_;
  uint64_t retired_staged_runs_ = 0;  // guarded by mu_
  std::optional<backend::PlacementAudit> placement_;
  const std::string name_;
  std::optional<RecoveryProbe> probe_;
  const Rebuild rebuild_;
  std::string out_of_service_;  // why inner_ is null (set with it)
};

}  // namespace fastpath::scheduler
