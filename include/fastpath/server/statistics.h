// Per-model statistics in the shape of the KServe statistics extension. Header-only
// vocabulary shared by the scheduler (which records), the server facade (which serves)
// and the front ends (which render).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fastpath::server {

// Cumulative count and duration, as in the KServe statistics extension.
struct StatDuration {
  uint64_t count = 0;
  uint64_t ns = 0;
};

struct InferStatistics {
  StatDuration success;         // whole request, end to end inside the server
  StatDuration fail;
  StatDuration queue;
  StatDuration compute_input;
  StatDuration compute_infer;
  StatDuration compute_output;
};

struct BatchStatistics {
  uint64_t batch_size = 0;
  StatDuration compute_input;
  StatDuration compute_infer;
  StatDuration compute_output;
};

struct ModelStatistics {
  std::string name;
  std::string version;
  uint64_t last_inference_ms = 0;  // since the epoch; 0 if never
  uint64_t inference_count = 0;    // inferences (batch elements) performed
  uint64_t execution_count = 0;    // model executions (batches) performed
  InferStatistics inference_stats;
  std::vector<BatchStatistics> batch_stats;
};

}  // namespace fastpath::server
