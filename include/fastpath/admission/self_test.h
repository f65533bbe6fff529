// The start-up self-test (issue 4 §5, "SLOs as code"): before a model version is READY it
// runs deterministic, seeded warm-up requests through the model's real request path, then
// times N more at the budget's batch size and compares p95 latency and throughput with the
// budget its config declares.
//
// The budget lives in config.pbtxt `parameters` (all optional; a model without any
// fastpath.slo.* key has no budget and only runs its model_warmup):
//   fastpath.slo.p95_ms             p95 latency budget in milliseconds (> 0, fractions allowed)
//   fastpath.slo.min_throughput     minimum inferences (batch elements) per second (> 0)
//   fastpath.slo.batch_size         batch size of the timed requests (default: the first
//                                   model_warmup's batch_size, else 1; <= max_batch_size)
//   fastpath.slo.iterations         timed requests (default 20, 1..10000)
//   fastpath.slo.warmup_iterations  untimed requests before timing (default 3, 0..10000)
//   fastpath.slo.seed               seed of the random_data inputs (default 0)
//
// Inputs come from the config's model_warmup (Triton's schema: zero_data, random_data,
// input_data_file read from <model>/warmup/), or, without one, random_data for every input
// at its config dims. random_data is seeded (SplitMix64 of seed and the input's name), so
// every start feeds the same bytes: floats in [0, 1) ([0.5, 1) for FP16/BF16), integers in
// [0, 16), booleans 0/1, BYTES 8 lowercase letters.
//
// Time is injected: the self-test reads a Clock around each run, so unit tests feed it
// synthetic latencies and never depend on the machine's speed.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fastpath/common/clock.h"
#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"
#include "model_config.pb.h"

namespace fastpath::admission {

inline constexpr const char* kSloP95Ms = "fastpath.slo.p95_ms";
inline constexpr const char* kSloMinThroughput = "fastpath.slo.min_throughput";
inline constexpr const char* kSloBatchSize = "fastpath.slo.batch_size";
inline constexpr const char* kSloIterations = "fastpath.slo.iterations";
inline constexpr const char* kSloWarmupIterations = "fastpath.slo.warmup_iterations";
inline constexpr const char* kSloSeed = "fastpath.slo.seed";

struct SelfTestBudget {
  std::optional<double> p95_ms;
  std::optional<double> min_throughput;  // inferences per second
  uint32_t batch_size = 0;               // 0: not set (the plan picks)
  uint32_t iterations = 20;
  uint32_t warmup_iterations = 3;
  uint64_t seed = 0;
  bool declared() const { return p95_ms.has_value() || min_throughput.has_value(); }
};

// Reads the fastpath.slo.* parameters. An unknown fastpath.slo.* key, a value that is not
// a number in range, or a batch size the model cannot take is an error naming the key.
StatusOr<SelfTestBudget> ParseBudget(const inference::ModelConfig& config);

struct WarmupStep {
  std::string name;    // the model_warmup's name, or "self-test"
  uint32_t count = 1;  // how many times it runs
  InferRequest request;
};

struct SelfTestPlan {
  SelfTestBudget budget;
  std::vector<WarmupStep> warmups;    // the config's model_warmup entries, in order
  uint32_t batch_size = 1;            // of the timed requests
  std::optional<InferRequest> timed;  // set when the budget is declared
  bool empty() const { return warmups.empty() && !timed; }
};

// Builds the requests. `config` is the completed config; `model_dir` is <repository>/<model>
// (for input_data_file). A dynamic dim with no model_warmup to make it concrete is an error
// that says to declare one.
StatusOr<SelfTestPlan> MakeSelfTestPlan(const inference::ModelConfig& config,
                                        const std::filesystem::path& model_dir,
                                        const SelfTestBudget& budget);

// One seeded request of `batch_size` rows (1 for a model that does not batch): the inputs
// and shapes of the first model_warmup, or without one random_data at the config dims. A
// dynamic dim with nothing to make it concrete is an error that says to declare one.
// The seed of the canaries' requests, which the rollout gate (in the server and `fastpath
// gate`) sends too: "canary" in ASCII. What the gate compares is then what the canaries
// watch afterwards.
inline constexpr uint64_t kCanarySeed = 0x63616e617279;

StatusOr<InferRequest> MakeSeededRequest(const inference::ModelConfig& config,
                                         const std::filesystem::path& model_dir,
                                         uint32_t batch_size, uint64_t seed);

// The deterministic input bytes of one tensor (exposed for tests).
std::string SeededData(DataType dtype, int64_t elements, uint64_t seed, const std::string& name);

// Runs one request through the model's real path; blocks until it is answered.
using RunFn = std::function<Status(const InferRequest&)>;

struct SelfTestFigures {
  uint32_t iterations = 0;
  uint32_t batch_size = 1;
  double p50_ms = 0;
  double p95_ms = 0;
  double max_ms = 0;
  double throughput = 0;  // batch elements per second, one request in flight
};

// Nearest-rank percentiles and throughput of the timed latencies (non-empty).
SelfTestFigures ComputeFigures(const std::vector<std::chrono::nanoseconds>& latencies,
                               uint32_t batch_size);
// One line per missed budget: "p95 12.400 ms > budget 10.000 ms". Empty: within budget.
std::vector<std::string> CheckBudget(const SelfTestBudget& budget, const SelfTestFigures& figures);

struct SelfTestReport {
  SelfTestBudget budget;
  uint32_t warmup_runs = 0;                // untimed runs (model_warmup and warmup_iterations)
  std::optional<SelfTestFigures> figures;  // set when a budget was declared
  std::vector<std::string> misses;         // CheckBudget's lines
  bool passed() const { return misses.empty(); }
  // "p95 0.412 ms (budget 10.000 ms), throughput 2425.1/s (budget >= 100.0/s), batch 1, 20 runs"
  std::string Summary() const;
};

// Runs the plan: every warm-up step, then budget.warmup_iterations untimed and
// budget.iterations timed runs of the timed request. A failed run is an error naming the
// step and the run.
StatusOr<SelfTestReport> RunSelfTest(const SelfTestPlan& plan, const RunFn& run,
                                     const Clock& clock);

}  // namespace fastpath::admission
