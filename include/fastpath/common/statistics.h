// Per-model statistics in the shape of the KServe statistics extension. Header-only
// vocabulary shared by the scheduler (which records), the server facade (which serves)
// and the front ends (which render).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fastpath {

// Why a request failed, with Triton's reason labels for nv_inference_request_failure.
enum class FailureReason {
  kRejected,  // refused before reaching the model: queue full, timed out in the queue, stopping
  kCanceled,  // the client cancelled it
  kBackend,   // the model's execution failed
  kOther,     // anything else, e.g. a request the model's config refuses
};
inline constexpr size_t kFailureReasonCount = 4;
inline const char* FailureReasonName(FailureReason reason) {
  switch (reason) {
    case FailureReason::kRejected: return "REJECTED";
    case FailureReason::kCanceled: return "CANCELED";
    case FailureReason::kBackend: return "BACKEND";
    case FailureReason::kOther: return "OTHER";
  }
  return "OTHER";
}

// Upper bounds, in microseconds, of the latency histograms' buckets: 50 us to 10 s, roughly
// 1-2.5-5 per decade. Fixed so that every model and every scrape share one layout.
inline constexpr std::array<uint64_t, 18> kLatencyBucketBoundsUs = {
    50,     100,    250,     500,     1000,    2500,    5000,    10000,   25000,
    50000,  100000, 250000,  500000,  1000000, 2500000, 5000000, 7500000, 10000000};

// A fixed-bucket histogram of durations. `buckets[i]` counts the observations <=
// kLatencyBucketBoundsUs[i] and above the previous bound (not cumulative); the last entry
// counts those above every bound.
struct LatencyHistogram {
  std::array<uint64_t, kLatencyBucketBoundsUs.size() + 1> buckets{};
  uint64_t count = 0;
  uint64_t sum_ns = 0;

  void Observe(uint64_t ns, uint64_t times = 1) {
    size_t i = 0;
    while (i < kLatencyBucketBoundsUs.size() && ns > kLatencyBucketBoundsUs[i] * 1000) ++i;
    buckets[i] += times;
    count += times;
    sum_ns += ns * times;
  }
};

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
  // One entry per batch size executed; compute_infer.count is how many executions had
  // that size, so these entries are also the histogram of batch sizes.
  std::vector<BatchStatistics> batch_stats;

  // Beyond the KServe statistics extension; served as Prometheus metrics.
  // Failed requests by reason (index: FailureReason); they sum to inference_stats.fail.count.
  std::array<uint64_t, kFailureReasonCount> failures{};
  LatencyHistogram request_latency;        // successful requests, end to end in the server
  LatencyHistogram queue_latency;          // successful requests, time in the queue
  LatencyHistogram compute_infer_latency;  // model executions
  uint64_t pending_request_count = 0;      // queued or running now (filled by the facade)
};

// Adds what `from` counted to `into` (two loads of one version, as in a canary phase); the
// name and version stay `into`'s.
inline void Accumulate(ModelStatistics& into, const ModelStatistics& from) {
  auto add = [](StatDuration& a, const StatDuration& b) {
    a.count += b.count;
    a.ns += b.ns;
  };
  auto add_histogram = [](LatencyHistogram& a, const LatencyHistogram& b) {
    for (size_t i = 0; i < a.buckets.size(); ++i) a.buckets[i] += b.buckets[i];
    a.count += b.count;
    a.sum_ns += b.sum_ns;
  };
  into.last_inference_ms = into.last_inference_ms > from.last_inference_ms ? into.last_inference_ms
                                                                           : from.last_inference_ms;
  into.inference_count += from.inference_count;
  into.execution_count += from.execution_count;
  InferStatistics& s = into.inference_stats;
  const InferStatistics& f = from.inference_stats;
  add(s.success, f.success);
  add(s.fail, f.fail);
  add(s.queue, f.queue);
  add(s.compute_input, f.compute_input);
  add(s.compute_infer, f.compute_infer);
  add(s.compute_output, f.compute_output);
  for (const BatchStatistics& b : from.batch_stats) {
    BatchStatistics* same = nullptr;
    for (BatchStatistics& a : into.batch_stats) {
      if (a.batch_size == b.batch_size) same = &a;
    }
    if (same == nullptr) {
      into.batch_stats.push_back(b);
      continue;
    }
    add(same->compute_input, b.compute_input);
    add(same->compute_infer, b.compute_infer);
    add(same->compute_output, b.compute_output);
  }
  for (size_t i = 0; i < into.failures.size(); ++i) into.failures[i] += from.failures[i];
  add_histogram(into.request_latency, from.request_latency);
  add_histogram(into.queue_latency, from.queue_latency);
  add_histogram(into.compute_infer_latency, from.compute_infer_latency);
  into.pending_request_count += from.pending_request_count;
}

}  // namespace fastpath
