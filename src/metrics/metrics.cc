#include "fastpath/metrics/metrics.h"

#include <prometheus/exposer.h>
#include <prometheus/text_serializer.h>

#include <array>
#include <exception>
#include <iostream>
#include <utility>

namespace fastpath::metrics {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Batch sizes are small integers; powers of two match how preferred sizes are chosen.
constexpr std::array<uint64_t, 11> kBatchSizeBounds = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};

std::vector<ClientMetric::Label> ModelLabels(const server::ModelStatistics& s) {
  return {{"model", s.name}, {"version", s.version}};
}

// Cumulative microseconds as Triton reports them: the total in ns, truncated once.
double Us(uint64_t ns) { return static_cast<double>(ns / 1000); }

MetricFamily Family(std::string name, std::string help, MetricType type) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

ClientMetric Counter(std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.counter.value = value;
  return m;
}

ClientMetric LatencyHistogram(const server::ModelStatistics& s, const server::LatencyHistogram& h) {
  ClientMetric m;
  m.label = ModelLabels(s);
  m.histogram.sample_count = h.count;
  m.histogram.sample_sum = static_cast<double>(h.sum_ns) / 1000.0;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < server::kLatencyBucketBoundsUs.size(); ++i) {
    cumulative += h.buckets[i];
    m.histogram.bucket.push_back(
        {cumulative, static_cast<double>(server::kLatencyBucketBoundsUs[i])});
  }
  // The +Inf bucket is written by the serializer from sample_count.
  return m;
}

ClientMetric BatchSizeHistogram(const server::ModelStatistics& s) {
  ClientMetric m;
  m.label = ModelLabels(s);
  std::array<uint64_t, kBatchSizeBounds.size()> per_bucket{};
  for (const auto& b : s.batch_stats) {
    const uint64_t executions = b.compute_infer.count;
    m.histogram.sample_count += executions;
    m.histogram.sample_sum += static_cast<double>(b.batch_size * executions);
    for (size_t i = 0; i < kBatchSizeBounds.size(); ++i) {
      if (b.batch_size <= kBatchSizeBounds[i]) {
        per_bucket[i] += executions;
        break;
      }
    }
  }
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBatchSizeBounds.size(); ++i) {
    cumulative += per_bucket[i];
    m.histogram.bucket.push_back({cumulative, static_cast<double>(kBatchSizeBounds[i])});
  }
  return m;
}

}  // namespace

std::vector<MetricFamily> StatisticsFamilies(const std::vector<server::ModelStatistics>& stats) {
  // Triton's names and help texts where the meaning is the same.
  MetricFamily success = Family("nv_inference_request_success",
                                "Number of successful inference requests, all batch sizes",
                                MetricType::Counter);
  MetricFamily failure = Family("nv_inference_request_failure",
                                "Number of failed inference requests, all batch sizes",
                                MetricType::Counter);
  MetricFamily count = Family("nv_inference_count", "Number of inferences performed",
                              MetricType::Counter);
  MetricFamily exec = Family("nv_inference_exec_count", "Number of model executions performed",
                             MetricType::Counter);
  MetricFamily request_us = Family("nv_inference_request_duration_us",
                                   "Cumulative inference request duration in microseconds",
                                   MetricType::Counter);
  MetricFamily queue_us = Family("nv_inference_queue_duration_us",
                                 "Cumulative inference queuing duration in microseconds",
                                 MetricType::Counter);
  MetricFamily input_us = Family("nv_inference_compute_input_duration_us",
                                 "Cumulative compute input duration in microseconds",
                                 MetricType::Counter);
  MetricFamily infer_us = Family("nv_inference_compute_infer_duration_us",
                                 "Cumulative compute inference duration in microseconds",
                                 MetricType::Counter);
  MetricFamily output_us = Family("nv_inference_compute_output_duration_us",
                                  "Cumulative inference compute output duration in microseconds",
                                  MetricType::Counter);
  MetricFamily pending = Family("nv_inference_pending_request_count",
                                "Instantaneous number of pending requests awaiting execution "
                                "per-model",
                                MetricType::Gauge);
  MetricFamily request_hist = Family(
      "fastpath_inference_request_latency_us",
      "Latency of successful inference requests inside the server, in microseconds",
      MetricType::Histogram);
  MetricFamily queue_hist = Family("fastpath_inference_queue_latency_us",
                                   "Time successful requests waited in the queue, in microseconds",
                                   MetricType::Histogram);
  MetricFamily infer_hist = Family("fastpath_inference_compute_infer_latency_us",
                                   "Duration of model executions, in microseconds",
                                   MetricType::Histogram);
  MetricFamily batch_hist = Family("fastpath_inference_batch_size",
                                   "Batch size (elements) of each model execution",
                                   MetricType::Histogram);

  for (const auto& s : stats) {
    const auto labels = ModelLabels(s);
    const auto& is = s.inference_stats;
    success.metric.push_back(Counter(labels, static_cast<double>(is.success.count)));
    for (size_t r = 0; r < server::kFailureReasonCount; ++r) {
      auto with_reason = labels;
      with_reason.push_back(
          {"reason", server::FailureReasonName(static_cast<server::FailureReason>(r))});
      failure.metric.push_back(Counter(std::move(with_reason), static_cast<double>(s.failures[r])));
    }
    count.metric.push_back(Counter(labels, static_cast<double>(s.inference_count)));
    exec.metric.push_back(Counter(labels, static_cast<double>(s.execution_count)));
    request_us.metric.push_back(Counter(labels, Us(is.success.ns)));
    queue_us.metric.push_back(Counter(labels, Us(is.queue.ns)));
    input_us.metric.push_back(Counter(labels, Us(is.compute_input.ns)));
    infer_us.metric.push_back(Counter(labels, Us(is.compute_infer.ns)));
    output_us.metric.push_back(Counter(labels, Us(is.compute_output.ns)));
    ClientMetric gauge;
    gauge.label = labels;
    gauge.gauge.value = static_cast<double>(s.pending_request_count);
    pending.metric.push_back(std::move(gauge));
    request_hist.metric.push_back(LatencyHistogram(s, s.request_latency));
    queue_hist.metric.push_back(LatencyHistogram(s, s.queue_latency));
    infer_hist.metric.push_back(LatencyHistogram(s, s.compute_infer_latency));
    batch_hist.metric.push_back(BatchSizeHistogram(s));
  }
  std::vector<MetricFamily> out;
  for (MetricFamily* f : {&success, &failure, &count, &exec, &request_us, &queue_us, &input_us,
                          &infer_us, &output_us, &pending, &request_hist, &queue_hist,
                          &infer_hist, &batch_hist}) {
    // A family without samples would be a bare HELP/TYPE header; leave it out.
    if (!f->metric.empty()) out.push_back(std::move(*f));
  }
  return out;
}

std::vector<MetricFamily> ServerCollector::Collect() const {
  // Runs on the exposer's thread: nothing may escape into the HTTP library.
  try {
    auto stats = server_.GetModelStatistics("", "");
    if (!stats.ok()) return {};
    return StatisticsFamilies(*stats);
  } catch (const std::exception& e) {
    std::cerr << "fastpath: metrics collection failed: " << e.what() << "\n";
    return {};
  }
}

std::string RenderText(const prometheus::Collectable& collectable) {
  return prometheus::TextSerializer().Serialize(collectable.Collect());
}

struct MetricsServer::Impl {
  // Declared before the exposer so that the exposer, which holds a weak_ptr to it and
  // calls it from its threads, is destroyed (threads joined) first.
  std::shared_ptr<ServerCollector> collector;
  std::unique_ptr<prometheus::Exposer> exposer;
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl, int port)
    : impl_(std::move(impl)), port_(port) {}

MetricsServer::~MetricsServer() {
  if (impl_) impl_->exposer.reset();  // stop serving before the collector goes away
}

StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const server::InferenceServer& server,
                                                             const MetricsOptions& options) {
  // civetweb's listening_ports syntax: IPv6 addresses go in brackets.
  const bool ipv6 = options.address.find(':') != std::string::npos;
  const std::string bind = (ipv6 ? "[" + options.address + "]" : options.address) + ":" +
                           std::to_string(options.port);
  auto impl = std::make_unique<Impl>();
  impl->collector = std::make_shared<ServerCollector>(server);
  try {
    impl->exposer = std::make_unique<prometheus::Exposer>(bind, options.threads);
    impl->exposer->RegisterCollectable(impl->collector, "/metrics");
    const std::vector<int> ports = impl->exposer->GetListeningPorts();
    if (ports.empty()) return Unavailable("metrics endpoint " + bind + " is not listening");
    const int port = ports.front();
    return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl), port));
  } catch (const std::exception& e) {
    // CivetServer throws when it cannot bind (port taken, bad address).
    return Unavailable("cannot serve metrics on " + bind + ": " + e.what());
  }
}

}  // namespace fastpath::metrics
