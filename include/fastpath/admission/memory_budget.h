// The memory budget of a model instance (issue 13 §2): measured, never guessed. At load a
// seeded request at max_batch_size runs once on the instance, and its arena's statistics
// before and after give the weights (what is held at rest) and the peak (the most held
// while the largest batch ran). The budget is the peak with a margin:
//
//   budget = peak × (1 + margin)     margin: parameters "fastpath.memory.margin", default 0.15
//
// A budget over the instance's cap (fastpath.memory.limit_bytes), or instances that together
// do not fit the device, is refused in production and served DEGRADED in dev. While serving,
// the measured cost per input element refuses up front a request that could never fit
// (HTTP 413), rather than letting it run out of memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "fastpath/backend/backend.h"
#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"
#include "model_config.pb.h"

namespace fastpath::admission {

inline constexpr const char* kMemoryMargin = "fastpath.memory.margin";
inline constexpr double kDefaultMemoryMargin = 0.15;

// parameters "fastpath.memory.margin": a number in [0, 10]; kDefaultMemoryMargin when
// absent. A bad value is InvalidArgument naming the key.
StatusOr<double> MemoryMarginFor(const inference::ModelConfig& config);

// The request the budget is measured with: MakeSeededRequest at max_batch_size (1 for a
// model that does not batch), seed 0. nullopt, with `why_not` set, when the config leaves a
// dim dynamic and declares no model_warmup to make it concrete.
StatusOr<std::optional<InferRequest>> MakeMemoryBudgetRequest(
    const inference::ModelConfig& config, const std::filesystem::path& model_dir,
    std::string* why_not);

// The input elements of a request (every input's element count, summed): what the cost
// per element is measured against.
uint64_t InputElements(const std::vector<Tensor>& inputs);

struct MemoryBudget {
  std::string device;               // where the arena is: "cpu", "gpu0", ...
  uint64_t weights_bytes = 0;       // the model's files: its weights, wherever ORT keeps them
  uint64_t at_rest_bytes = 0;       // what the arena held before the measured run
  uint64_t peak_bytes = 0;          // the most the arena held while it ran
  uint64_t rows = 0;                // the measured request's batch rows
  uint64_t input_elements = 0;      // ... and its input elements
  double margin = kDefaultMemoryMargin;
  uint64_t budget_bytes = 0;        // peak × (1 + margin): what the arena may need
  std::optional<uint64_t> limit_bytes;  // the instance's cap
  // The activations of the measured run per input element: (peak - at rest) / elements.
  double bytes_per_input_element = 0;
  // The version's instances on this device, and the device's memory (the GPU's, or on the
  // CPU the cgroup's limit else the machine's); nullopt when unknown.
  uint32_t instances = 1;
  std::optional<uint64_t> device_total_bytes;
  // The measured request itself ran out of memory: the peak is where it stopped, and the
  // budget is unknown beyond "more than the limit".
  bool ran_out_of_memory = false;

  bool fits_limit() const {
    return !ran_out_of_memory && (!limit_bytes || budget_bytes <= *limit_bytes);
  }
  // What one instance takes from the device: its arena's budget, and the weights ORT keeps
  // outside the arena (prepacked or mapped: the files' size beyond what the arena held).
  uint64_t instance_bytes() const {
    return budget_bytes + (weights_bytes > at_rest_bytes ? weights_bytes - at_rest_bytes : 0);
  }
  uint64_t instances_bytes() const { return instance_bytes() * instances; }
  // Unknown (false) when the measurement ran out of memory: its figures are no budget.
  bool fits_device() const {
    return !ran_out_of_memory && (!device_total_bytes || instances_bytes() <= *device_total_bytes);
  }
  bool fits() const { return fits_limit() && fits_device(); }
  // What a request of `elements` input elements is estimated to need of the arena: what it
  // holds at rest plus the measured cost per element. Linear: exact for the batch dim, an
  // estimate for others.
  uint64_t EstimateBytes(uint64_t elements) const;
};

// The budget from the arena's statistics before and after the measured run of `request`,
// and the size of the model's files.
MemoryBudget ComputeMemoryBudget(const backend::MemoryStats& before,
                                 const backend::MemoryStats& after, const InferRequest& request,
                                 uint64_t rows, double margin, uint64_t weights_bytes);

// The size of the regular files under `dir` (a version folder: the model and its external
// data), but for the file named `except` directly in it (the FP32 reference the accuracy
// guard keeps beside the model, which no instance loads); 0 when it cannot be read.
uint64_t FilesBytes(const std::filesystem::path& dir, const std::string& except = "");

// "weights 1.2 MiB, arena at rest 1.2 MiB, peak 9.5 MiB at batch 8, budget 10.9 MiB
// (margin 15%), limit 8.0 MiB; 2 instances need 21.8 MiB of the device's 16.0 GiB"
std::string DescribeBudget(const MemoryBudget& budget);

// {"device", "weights_bytes", "at_rest_bytes", "peak_bytes", "rows", "input_elements", "margin",
//  "budget_bytes", "limit_bytes" (null: none), "bytes_per_input_element", "instances",
//  "device_total_bytes" (null: unknown), "ran_out_of_memory", "fits_limit", "fits_device",
//  "fits"}
std::string MemoryBudgetToJson(const MemoryBudget& budget);

// (reserved − in use) / reserved: what the arena holds beyond its live tensors (cached free
// regions, fragments), as a share of all it holds; 0 for an empty arena.
double FragmentationRatio(const backend::MemoryStats& stats);

// Bytes in binary units for people: "512 B", "1.5 KiB", "9.5 MiB", "2.0 GiB".
std::string FormatBytes(uint64_t bytes);

}  // namespace fastpath::admission
