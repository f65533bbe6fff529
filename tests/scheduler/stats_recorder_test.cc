// StatsRecorder: what one model version's statistics hold after successes and failures,
// including what the Prometheus metrics read (failure reasons, latency histograms).
#include "fastpath/scheduler/stats_recorder.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace fastpath::scheduler {
namespace {


size_t Reason(FailureReason r) { return static_cast<size_t>(r); }

// Index of the histogram bucket whose upper bound is `us`.
size_t BucketOf(uint64_t us) {
  for (size_t i = 0; i < kLatencyBucketBoundsUs.size(); ++i) {
    if (kLatencyBucketBoundsUs[i] == us) return i;
  }
  ADD_FAILURE() << us << " us is not a bucket bound";
  return 0;
}

TEST(StatsRecorderTest, SuccessFeedsCountsDurationsHistogramsAndBatchStats) {
  StatsRecorder recorder;
  StatsRecorder::Timings t;
  t.queue_ns = 200'000;  // 200 us
  t.compute_input_ns = 1'000;
  t.compute_infer_ns = 3'000'000;  // 3 ms
  t.compute_output_ns = 2'000;
  // One execution of 3 requests holding 5 batch elements, each request 4 ms end to end.
  recorder.RecordSuccess(3, 5, t, 4'000'000);
  recorder.RecordSuccess(1, 1, t, 4'000'000);

  const ModelStatistics s = recorder.Snapshot("m", "2");
  EXPECT_EQ(s.name, "m");
  EXPECT_EQ(s.version, "2");
  EXPECT_EQ(s.inference_count, 6u);
  EXPECT_EQ(s.execution_count, 2u);
  EXPECT_GT(s.last_inference_ms, 0u);
  EXPECT_EQ(s.inference_stats.success.count, 4u);
  EXPECT_EQ(s.inference_stats.success.ns, 4u * 4'000'000);
  EXPECT_EQ(s.inference_stats.queue.count, 4u);
  EXPECT_EQ(s.inference_stats.queue.ns, 4u * 200'000);
  EXPECT_EQ(s.inference_stats.compute_infer.ns, 4u * 3'000'000);
  EXPECT_EQ(s.inference_stats.fail.count, 0u);

  // Per request for request and queue latency, per execution for compute_infer.
  EXPECT_EQ(s.request_latency.count, 4u);
  EXPECT_EQ(s.request_latency.sum_ns, 4u * 4'000'000);
  EXPECT_EQ(s.request_latency.buckets[BucketOf(5000)], 4u);
  EXPECT_EQ(s.queue_latency.count, 4u);
  EXPECT_EQ(s.queue_latency.buckets[BucketOf(250)], 4u);
  EXPECT_EQ(s.compute_infer_latency.count, 2u);
  EXPECT_EQ(s.compute_infer_latency.buckets[BucketOf(5000)], 2u);

  ASSERT_EQ(s.batch_stats.size(), 2u);
  for (const auto& b : s.batch_stats) {
    EXPECT_TRUE(b.batch_size == 5 || b.batch_size == 1) << b.batch_size;
    EXPECT_EQ(b.compute_infer.count, 1u);  // executions of that size
    EXPECT_EQ(b.compute_infer.ns, 3'000'000u);
  }
}

TEST(StatsRecorderTest, FailuresAreCountedByReason) {
  StatsRecorder recorder;
  recorder.RecordFailure(10, FailureReason::kRejected);
  recorder.RecordFailure(20, FailureReason::kRejected);
  recorder.RecordFailure(30, FailureReason::kBackend);
  recorder.RecordFailure(40, FailureReason::kCanceled);
  recorder.RecordFailure(50);  // no reason given: OTHER
  const ModelStatistics s = recorder.Snapshot("m", "1");
  EXPECT_EQ(s.inference_stats.fail.count, 5u);
  EXPECT_EQ(s.inference_stats.fail.ns, 150u);
  EXPECT_EQ(s.failures[Reason(FailureReason::kRejected)], 2u);
  EXPECT_EQ(s.failures[Reason(FailureReason::kBackend)], 1u);
  EXPECT_EQ(s.failures[Reason(FailureReason::kCanceled)], 1u);
  EXPECT_EQ(s.failures[Reason(FailureReason::kOther)], 1u);
  // Failures are not latencies of served requests.
  EXPECT_EQ(s.request_latency.count, 0u);
  EXPECT_EQ(s.inference_stats.success.count, 0u);
}

// The requests of one batch waited differently: each is observed with its own times, so
// that the histograms keep the tail (an average of 300 and 48 ms is neither).
TEST(StatsRecorderTest, EachRequestOfABatchKeepsItsOwnTimes) {
  StatsRecorder recorder;
  recorder.KeepLatencies(8);
  StatsRecorder::Timings compute{0, 1'000, 2'000'000, 3'000};
  recorder.RecordSuccess({{302'000'000, 300'000'000}, {48'000'000, 46'000'000}}, 2, compute);
  const ModelStatistics s = recorder.Snapshot("m", "1");
  EXPECT_EQ(s.inference_stats.success.count, 2u);
  EXPECT_EQ(s.inference_stats.success.ns, 350'000'000u);
  EXPECT_EQ(s.inference_stats.queue.ns, 346'000'000u);
  EXPECT_EQ(s.inference_stats.compute_infer.ns, 4'000'000u);    // the execution's, each request's
  EXPECT_EQ(s.request_latency.buckets[BucketOf(500'000)], 1u);  // 302 ms: in (250, 500] ms
  EXPECT_EQ(s.request_latency.buckets[BucketOf(50'000)], 1u);   // 48 ms: in (25, 50] ms
  EXPECT_EQ(s.queue_latency.buckets[BucketOf(500'000)], 1u);
  EXPECT_EQ(s.queue_latency.buckets[BucketOf(50'000)], 1u);
  EXPECT_EQ(s.compute_infer_latency.count, 1u);  // once per execution
  std::vector<double> kept = recorder.KeptLatenciesMs();
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept, (std::vector<double>{48.0, 302.0}));
}

TEST(StatsRecorderTest, KeepsTheLatestLatenciesOnlyWhenAsked) {
  StatsRecorder recorder;
  recorder.RecordSuccess(1, 1, {}, 1'000'000);
  EXPECT_TRUE(recorder.KeptLatenciesMs().empty()) << "kept only once asked";
  recorder.KeepLatencies(3);
  recorder.RecordSuccess(2, 2, {}, 2'000'000);  // two requests of 2 ms
  recorder.RecordSuccess(1, 1, {}, 3'000'000);
  recorder.RecordSuccess(1, 1, {}, 4'000'000);  // the first 2 ms one goes
  std::vector<double> kept = recorder.KeptLatenciesMs();
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept, (std::vector<double>{2.0, 3.0, 4.0}));
  recorder.RecordFailure(5'000'000);
  EXPECT_EQ(recorder.KeptLatenciesMs().size(), 3u) << "a failure is no latency";
  recorder.KeepLatencies(0);
  recorder.RecordSuccess(1, 1, {}, 1'000'000);
  EXPECT_TRUE(recorder.KeptLatenciesMs().empty());
}

TEST(StatisticsTest, AccumulateAddsTwoLoadsOfOneVersion) {
  StatsRecorder a, b;
  a.RecordSuccess(2, 2, {10, 0, 100, 0}, 1000);
  b.RecordSuccess(1, 1, {20, 0, 200, 0}, 2000);
  b.RecordSuccess(3, 4, {30, 0, 300, 0}, 3000);
  b.RecordFailure(40, FailureReason::kBackend);
  ModelStatistics sum = a.Snapshot("m", "1");
  Accumulate(sum, b.Snapshot("m", "1"));
  EXPECT_EQ(sum.name, "m");
  EXPECT_EQ(sum.inference_count, 7u);
  EXPECT_EQ(sum.execution_count, 3u);
  EXPECT_EQ(sum.inference_stats.success.count, 6u);
  EXPECT_EQ(sum.inference_stats.fail.count, 1u);
  EXPECT_EQ(sum.failures[Reason(FailureReason::kBackend)], 1u);
  EXPECT_EQ(sum.request_latency.count, 6u);
  EXPECT_EQ(sum.compute_infer_latency.count, 3u);
  ASSERT_EQ(sum.batch_stats.size(), 3u);  // sizes 2, 1 and 4
  for (const BatchStatistics& batch : sum.batch_stats) {
    EXPECT_EQ(batch.compute_infer.count, 1u) << batch.batch_size;
  }
}

TEST(LatencyHistogramTest, BoundsAreInclusiveAndTheLastBucketIsUnbounded) {
  LatencyHistogram h;
  h.Observe(0);
  h.Observe(50'000);  // exactly the first bound
  h.Observe(50'001);  // just above it
  h.Observe(kLatencyBucketBoundsUs.back() * 1000 + 1, 3);
  EXPECT_EQ(h.buckets[0], 2u);
  EXPECT_EQ(h.buckets[1], 1u);
  EXPECT_EQ(h.buckets.back(), 3u);
  EXPECT_EQ(h.count, 6u);
}

}  // namespace
}  // namespace fastpath::scheduler
