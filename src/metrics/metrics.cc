#include "fastpath/metrics/metrics.h"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fastpath/admission/memory_budget.h"
#include "fastpath/common/log.h"
#include "fastpath/common/open_files.h"
#include "fastpath/common/thread_name.h"
#include "fastpath/common/thread_start.h"
#include "fastpath/common/utf8.h"

namespace fastpath::metrics {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Batch sizes are small integers; powers of two match how preferred sizes are chosen.
constexpr std::array<uint64_t, 11> kBatchSizeBounds = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};

std::vector<ClientMetric::Label> ModelLabels(const ModelStatistics& s) {
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

// In seconds, Prometheus's base unit (promtool's lint refuses abbreviated units such as
// `_us`); the statistics keep nanoseconds and microsecond bounds, converted only here. The
// bounds are the same 50 us .. 10 s, written 5e-05 .. 10.
ClientMetric DurationHistogram(const ModelStatistics& s, const LatencyHistogram& h) {
  ClientMetric m;
  m.label = ModelLabels(s);
  m.histogram.sample_count = h.count;
  m.histogram.sample_sum = static_cast<double>(h.sum_ns) / 1e9;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kLatencyBucketBoundsUs.size(); ++i) {
    cumulative += h.buckets[i];
    m.histogram.bucket.push_back(
        {cumulative, static_cast<double>(kLatencyBucketBoundsUs[i]) / 1e6});
  }
  // The +Inf bucket is written by the serializer from sample_count.
  return m;
}

ClientMetric BatchSizeHistogram(const ModelStatistics& s) {
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

std::vector<MetricFamily> StatisticsFamilies(const std::vector<ModelStatistics>& stats) {
  // Triton's names and help texts where the meaning is the same.
  MetricFamily success =
      Family("nv_inference_request_success",
             "Number of successful inference requests, all batch sizes", MetricType::Counter);
  MetricFamily failure =
      Family("nv_inference_request_failure", "Number of failed inference requests, all batch sizes",
             MetricType::Counter);
  MetricFamily count =
      Family("nv_inference_count", "Number of inferences performed", MetricType::Counter);
  MetricFamily exec = Family("nv_inference_exec_count", "Number of model executions performed",
                             MetricType::Counter);
  MetricFamily request_us =
      Family("nv_inference_request_duration_us",
             "Cumulative inference request duration in microseconds", MetricType::Counter);
  MetricFamily queue_us =
      Family("nv_inference_queue_duration_us",
             "Cumulative inference queuing duration in microseconds", MetricType::Counter);
  MetricFamily input_us =
      Family("nv_inference_compute_input_duration_us",
             "Cumulative compute input duration in microseconds", MetricType::Counter);
  MetricFamily infer_us =
      Family("nv_inference_compute_infer_duration_us",
             "Cumulative compute inference duration in microseconds", MetricType::Counter);
  MetricFamily output_us =
      Family("nv_inference_compute_output_duration_us",
             "Cumulative inference compute output duration in microseconds", MetricType::Counter);
  // Triton's counts only the queued ones; fastpath's the running ones too (README), and the
  // help text says so rather than Triton's "awaiting execution".
  MetricFamily pending = Family("nv_inference_pending_request_count",
                                "Instantaneous number of requests accepted and not yet answered "
                                "(queued or running) per-model",
                                MetricType::Gauge);
  // Triton's names above keep their `_us` and lack `_total` (promtool's lint complains about
  // them; dashboards built for Triton read them as they are). fastpath's own names pass it.
  MetricFamily request_hist =
      Family("fastpath_inference_request_duration_seconds",
             "Duration of successful inference requests inside the server, in seconds",
             MetricType::Histogram);
  MetricFamily queue_hist =
      Family("fastpath_inference_queue_duration_seconds",
             "Time successful requests waited in the queue, in seconds", MetricType::Histogram);
  MetricFamily infer_hist =
      Family("fastpath_inference_compute_infer_duration_seconds",
             "Duration of model executions, in seconds", MetricType::Histogram);
  MetricFamily batch_hist =
      Family("fastpath_inference_batch_size", "Batch size (elements) of each model execution",
             MetricType::Histogram);

  for (const auto& s : stats) {
    const auto labels = ModelLabels(s);
    const auto& is = s.inference_stats;
    success.metric.push_back(Counter(labels, static_cast<double>(is.success.count)));
    for (size_t r = 0; r < kFailureReasonCount; ++r) {
      auto with_reason = labels;
      with_reason.push_back(
          {"reason", FailureReasonName(static_cast<FailureReason>(r))});
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
    request_hist.metric.push_back(DurationHistogram(s, s.request_latency));
    queue_hist.metric.push_back(DurationHistogram(s, s.queue_latency));
    infer_hist.metric.push_back(DurationHistogram(s, s.compute_infer_latency));
    batch_hist.metric.push_back(BatchSizeHistogram(s));
  }
  std::vector<MetricFamily> out;
  for (MetricFamily* f :
       {&success, &failure, &count, &exec, &request_us, &queue_us, &input_us, &infer_us, &output_us,
        &pending, &request_hist, &queue_hist, &infer_hist, &batch_hist}) {
    // A family without samples would be a bare HELP/TYPE header; leave it out.
    if (!f->metric.empty()) out.push_back(std::move(*f));
  }
  return out;
}

std::vector<MetricFamily> AdmissionFamilies(const admission::AdmissionReport& report) {
  MetricFamily ready = Family("fastpath_server_ready",
                              "1 when the server is ready: every model admitted and its self-test "
                              "passed (GET /v2/health/ready answers 200)",
                              MetricType::Gauge);
  ClientMetric server_ready;
  server_ready.gauge.value = report.ready ? 1 : 0;
  ready.metric.push_back(std::move(server_ready));
  std::vector<MetricFamily> out;
  out.push_back(std::move(ready));
  if (report.models.empty()) return out;

  MetricFamily state = Family("fastpath_model_state",
                              "1 for the model's admission state (READY, DEGRADED: served below "
                              "its proven fast path, UNAVAILABLE), 0 for the others",
                              MetricType::Gauge);
  for (const admission::ModelAdmission& model : report.models) {
    // Not loaded by choice: nothing for the UNAVAILABLE alert to fire on.
    if (model.unloaded) continue;
    for (const auto candidate :
         {admission::AdmissionState::kReady, admission::AdmissionState::kDegraded,
          admission::AdmissionState::kUnavailable}) {
      ClientMetric m;
      m.label = {{"model", model.name},
                 {"version", model.version},
                 {"state", admission::AdmissionStateName(candidate)}};
      m.gauge.value = model.state == candidate ? 1 : 0;
      state.metric.push_back(std::move(m));
    }
  }
  out.push_back(std::move(state));

  // Drift (issue 14 §4), per READY version the drift watch has judged.
  MetricFamily drift_ratio = Family(
      "fastpath_drift_ratio",
      "Compute time per execution over the drift window divided by the version's start-up "
      "baseline, batch size by batch size (1: as fast as at start)",
      MetricType::Gauge);
  MetricFamily drift_alert = Family(
      "fastpath_drift_alert",
      "1 for the cause while the version drifts (thermal, power, reliability: the GPU's "
      "clock-event reasons; not_gpu: its clocks held), 0 for the others",
      MetricType::Gauge);
  for (const admission::ModelAdmission& model : report.models) {
    if (!model.drift) continue;
    if (model.drift->ratio) {
      ClientMetric m;
      m.label = {{"model", model.name}, {"version", model.version}};
      m.gauge.value = *model.drift->ratio;
      drift_ratio.metric.push_back(std::move(m));
    }
    for (const char* cause : admission::kDriftCauses) {
      ClientMetric m;
      m.label = {{"model", model.name}, {"version", model.version}, {"cause", cause}};
      m.gauge.value = model.drift->alert && model.drift->cause == cause ? 1 : 0;
      drift_alert.metric.push_back(std::move(m));
    }
  }
  // Canaries (issue 14 §6), per READY version that declares one.
  MetricFamily canary_runs = Family("fastpath_canary_runs_total",
                                    "Canary runs (the self-test's seeded request through the "
                                    "normal path, counted apart from user traffic)",
                                    MetricType::Counter);
  MetricFamily canary_mismatch = Family(
      "fastpath_canary_output_mismatch_total",
      "Canary runs whose outputs differed from what the same request answered at admission "
      "(numerical drift, a silent precision change, another engine)",
      MetricType::Counter);
  MetricFamily canary_failures = Family(
      "fastpath_canary_failures_total",
      "Canary runs that got an error instead of outputs (queue full, a failing instance, ...)",
      MetricType::Counter);
  MetricFamily canary_ratio = Family(
      "fastpath_canary_latency_ratio",
      "The median latency of the last 5 canary runs divided by the median at admission",
      MetricType::Gauge);
  for (const admission::ModelAdmission& model : report.models) {
    if (!model.canary) continue;
    const std::vector<ClientMetric::Label> labels = {{"model", model.name},
                                                     {"version", model.version}};
    canary_runs.metric.push_back(Counter(labels, static_cast<double>(model.canary->runs)));
    canary_mismatch.metric.push_back(
        Counter(labels, static_cast<double>(model.canary->mismatches)));
    canary_failures.metric.push_back(Counter(labels, static_cast<double>(model.canary->failures)));
    if (model.canary->latency_ratio) {
      ClientMetric m;
      m.label = labels;
      m.gauge.value = *model.canary->latency_ratio;
      canary_ratio.metric.push_back(std::move(m));
    }
  }
  // The rollout gate (issue 12 §2): its decisions since start.
  MetricFamily rollouts =
      Family("fastpath_rollout_decisions_total",
             "The rollout gate's decisions on candidate versions, by outcome (passed, refused, "
             "no_baseline, not_measured, canary, promoted, rolled_back, ended); the figures are at "
             "GET /v2/models/{m}/rollout",
             MetricType::Counter);
  for (const admission::AdmissionReport::RolloutCount& r : report.rollout_decisions) {
    rollouts.metric.push_back(
        Counter({{"model", r.model}, {"outcome", r.outcome}}, static_cast<double>(r.count)));
  }
  for (MetricFamily* f : {&drift_ratio, &drift_alert, &canary_runs, &canary_mismatch,
                          &canary_failures, &canary_ratio, &rollouts}) {
    if (!f->metric.empty()) out.push_back(std::move(*f));
  }

  // Memory (issue 13), per READY version's instance, read from its arena at scrape time.
  MetricFamily in_use = Family("fastpath_memory_in_use_bytes",
                               "Bytes held by live tensors (weights included) in the instance's "
                               "memory arena",
                               MetricType::Gauge);
  MetricFamily reserved = Family("fastpath_memory_reserved_bytes",
                                 "Bytes the instance's memory arena holds from the device, in use "
                                 "or free (reserved minus in use is what fragmentation and "
                                 "caching keep)",
                                 MetricType::Gauge);
  MetricFamily peak = Family("fastpath_memory_peak_bytes",
                             "The most bytes in use at once in the instance's arena since it was "
                             "created",
                             MetricType::Gauge);
  MetricFamily limit = Family("fastpath_memory_limit_bytes",
                              "The instance's memory cap (parameters fastpath.memory.limit_bytes); "
                              "absent for an instance without one",
                              MetricType::Gauge);
  MetricFamily extensions = Family("fastpath_memory_arena_extensions_total",
                                   "Times the instance's memory arena grew", MetricType::Counter);
  MetricFamily fragmentation = Family(
      "fastpath_memory_fragmentation_ratio",
      "(reserved - in use) / reserved of the instance's arena: what it holds beyond its live "
      "tensors, as a share of all it holds",
      MetricType::Gauge);
  MetricFamily fragmented = Family(
      "fastpath_memory_fragmentation_suspected",
      "1 when the instance's arena grew within the window although it held free at least what "
      "its largest run needs: no free region was large enough",
      MetricType::Gauge);
  MetricFamily leak = Family("fastpath_memory_leak_suspected",
                             "1 when the memory the instance holds at rest has kept rising over "
                             "the leak window with the request mix steady",
                             MetricType::Gauge);
  MetricFamily slope = Family("fastpath_memory_leak_slope_bytes_per_second",
                              "The slope of the memory the instance holds at rest over the leak "
                              "window",
                              MetricType::Gauge);
  MetricFamily oom = Family("fastpath_memory_oom_total",
                            "Runs that failed for lack of memory (each failed its batch's "
                            "requests with 'out of memory')",
                            MetricType::Counter);
  const auto gauge = [](std::vector<ClientMetric::Label> labels, uint64_t value) {
    ClientMetric m;
    m.label = std::move(labels);
    m.gauge.value = static_cast<double>(value);
    return m;
  };
  for (const admission::ModelAdmission& model : report.models) {
    uint64_t oom_runs = 0;
    bool measured = false;
    for (size_t i = 0; i < model.instance_memory.size(); ++i) {
      const std::optional<backend::MemoryStats>& memory = model.instance_memory[i];
      if (!memory) continue;
      measured = true;
      const std::vector<ClientMetric::Label> labels = {{"model", model.name},
                                                       {"version", model.version},
                                                       {"model_instance", std::to_string(i)},
                                                       {"device", memory->device}};
      in_use.metric.push_back(gauge(labels, memory->in_use_bytes));
      reserved.metric.push_back(gauge(labels, memory->reserved_bytes));
      peak.metric.push_back(gauge(labels, memory->peak_bytes));
      if (memory->limit_bytes) limit.metric.push_back(gauge(labels, *memory->limit_bytes));
      extensions.metric.push_back(
          Counter(labels, static_cast<double>(memory->arena_extensions)));
      ClientMetric ratio;
      ratio.label = labels;
      ratio.gauge.value = admission::FragmentationRatio(*memory);
      fragmentation.metric.push_back(std::move(ratio));
      if (i < model.instance_fragmentation.size() && model.instance_fragmentation[i]) {
        fragmented.metric.push_back(
            gauge(labels, model.instance_fragmentation[i]->suspected ? 1 : 0));
      }
      // Not before the window is judged: a slope of 0 then is no measurement.
      if (i < model.instance_leaks.size() && model.instance_leaks[i] &&
          model.instance_leaks[i]->judged) {
        leak.metric.push_back(gauge(labels, model.instance_leaks[i]->suspected ? 1 : 0));
        ClientMetric s;
        s.label = labels;
        s.gauge.value = model.instance_leaks[i]->slope_bytes_per_second;
        slope.metric.push_back(std::move(s));
      }
      oom_runs += memory->out_of_memory_runs;
    }
    if (measured) {
      oom.metric.push_back(Counter({{"model", model.name}, {"version", model.version}},
                                   static_cast<double>(oom_runs)));
    }
  }
  for (MetricFamily* f :
       {&in_use, &reserved, &peak, &limit, &extensions, &fragmentation, &fragmented, &leak, &slope,
        &oom}) {
    if (!f->metric.empty()) out.push_back(std::move(*f));
  }
  return out;
}

std::vector<MetricFamily> HeapFamilies(const std::optional<HeapStatistics>& heap) {
  if (!heap) return {};
  MetricFamily f = Family("fastpath_heap_bytes",
                          "The process's malloc heap, from jemalloc's statistics: allocated is "
                          "what live objects hold, active the pages that hold them, resident "
                          "what the allocator has in memory, retained the address space it keeps "
                          "unmapped for reuse. allocated rising across like reloads is a leak; "
                          "resident rising with allocated flat is freed memory kept",
                          MetricType::Gauge);
  for (const auto& [kind, bytes] :
       {std::pair{"allocated", heap->allocated}, std::pair{"active", heap->active},
        std::pair{"resident", heap->resident}, std::pair{"retained", heap->retained}}) {
    ClientMetric m;
    m.label = {{"kind", kind}};
    m.gauge.value = static_cast<double>(bytes);
    f.metric.push_back(std::move(m));
  }
  return {std::move(f)};
}

std::vector<MetricFamily> ProcessFamilies(const ProcessStatistics& process) {
  std::vector<MetricFamily> out;
  const auto add = [&out](const char* name, const char* help, MetricType type,
                          std::optional<double> value) {
    if (!value) return;
    MetricFamily f = Family(name, help, type);
    ClientMetric m;
    if (type == MetricType::Counter) {
      m.counter.value = *value;
    } else {
      m.gauge.value = *value;
    }
    f.metric.push_back(std::move(m));
    out.push_back(std::move(f));
  };
  const auto as_double = [](std::optional<uint64_t> v) -> std::optional<double> {
    if (!v) return std::nullopt;
    return static_cast<double>(*v);
  };
  add("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
      MetricType::Counter, process.cpu_seconds);
  add("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
      MetricType::Gauge, process.start_time_seconds);
  add("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
      as_double(process.resident_bytes));
  add("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge,
      as_double(process.virtual_bytes));
  add("process_open_fds", "Number of open file descriptors.", MetricType::Gauge,
      as_double(process.open_fds));
  add("process_max_fds", "Maximum number of open file descriptors (the soft limit).",
      MetricType::Gauge, as_double(process.max_fds));
  return out;
}

std::vector<MetricFamily> ServerCollector::Collect() const {
  // Runs on the exposer's thread: nothing may escape into the HTTP library.
  try {
    auto stats = server_.GetModelStatistics("", "");
    if (!stats.ok()) return {};
    std::vector<MetricFamily> out = StatisticsFamilies(*stats);
    const admission::AdmissionReport report = server_.Admission();
    for (MetricFamily& f : AdmissionFamilies(report)) out.push_back(std::move(f));
    for (MetricFamily& f : GpuFamilies(report)) out.push_back(std::move(f));
    for (MetricFamily& f : HeapFamilies(ReadHeapStatistics())) out.push_back(std::move(f));
    for (MetricFamily& f : ProcessFamilies(ReadProcessStatistics())) out.push_back(std::move(f));
    // A label value that is not UTF-8 fails the whole scrape in Prometheus: one that quotes
    // other bytes (a model folder's name) shows each as U+FFFD. Two names that differ only in
    // such bytes (or one with a real U+FFFD there) then name one series twice, which a scrape
    // must not hold: a series written as it was stays, and of the rewritten ones the first.
    // A name that is not UTF-8 is never served, so what goes is an UNAVAILABLE model's state.
    using LabelSet = std::vector<std::pair<std::string, std::string>>;
    const auto label_set = [](const prometheus::ClientMetric& metric) {
      LabelSet labels;
      for (const auto& label : metric.label) labels.emplace_back(label.name, label.value);
      return labels;
    };
    for (MetricFamily& family : out) {
      std::vector<bool> rewritten(family.metric.size(), false);
      for (size_t m = 0; m < family.metric.size(); ++m) {
        for (prometheus::ClientMetric::Label& label : family.metric[m].label) {
          if (IsValidUtf8(label.value)) continue;
          label.value = ToValidUtf8(label.value);
          rewritten[m] = true;
        }
      }
      if (std::find(rewritten.begin(), rewritten.end(), true) == rewritten.end()) continue;
      std::set<LabelSet> seen;
      for (size_t m = 0; m < family.metric.size(); ++m) {
        if (!rewritten[m]) seen.insert(label_set(family.metric[m]));
      }
      std::vector<prometheus::ClientMetric> kept;
      for (size_t m = 0; m < family.metric.size(); ++m) {
        if (!rewritten[m] || seen.insert(label_set(family.metric[m])).second) {
          kept.push_back(std::move(family.metric[m]));
        }
      }
      family.metric = std::move(kept);
    }
    return out;
  } catch (const std::exception& e) {
    log::Error(std::string("metrics collection failed: ") + e.what());
    return {};
  }
}

std::string RenderText(const prometheus::Collectable& collectable) {
  return prometheus::TextSerializer().Serialize(collectable.Collect());
}

// The listener: one Asio thread, one session per connection. Scrapes are rare and small, so
// a single thread serves them all, one at a time. prometheus-cpp's own
// Exposer (civetweb) would do, but civetweb polls its sockets in 2-second quanta, and every
// server stop (each integration test) waited for that.
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = net::ip::tcp;

constexpr auto kIdleTimeout = std::chrono::seconds(60);
constexpr uint64_t kMaxRequestBytes = 64 * 1024;  // a scrape has no body

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const ServerCollector& collector)
      : stream_(std::move(socket)), collector_(collector) {}

  void Read() {
    parser_.emplace();
    parser_->body_limit(kMaxRequestBytes);
    parser_->header_limit(static_cast<uint32_t>(kMaxRequestBytes));
    stream_.expires_after(kIdleTimeout);
    bhttp::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

 private:
  void OnRead(beast::error_code ec) {
    if (ec) {
      // The client closed, timed out, or sent something that is not HTTP: nothing to answer
      // but a malformed request, which gets a 400 before the connection closes.
      if (ec != bhttp::error::end_of_stream && ec != beast::error::timeout &&
          ec != net::error::operation_aborted && ec != net::error::connection_reset) {
        Respond(bhttp::status::bad_request, "malformed request: " + ec.message() + "\n", false, 11);
      }
      return;
    }
    const auto& req = parser_->get();
    const std::string_view target(req.target().data(), req.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    if (path != "/metrics") {
      Respond(bhttp::status::not_found, "only /metrics is served here\n", req.keep_alive(),
              req.version());
    } else if (req.method() != bhttp::verb::get && req.method() != bhttp::verb::head) {
      Respond(bhttp::status::method_not_allowed, "/metrics answers GET\n", req.keep_alive(),
              req.version());
    } else {
      std::string body;
      try {
        body = RenderText(collector_);
      } catch (const std::exception& e) {
        Respond(bhttp::status::internal_server_error,
                std::string("metrics could not be rendered: ") + e.what() + "\n", false,
                req.version());
        return;
      }
      Respond(bhttp::status::ok, std::move(body), req.keep_alive(), req.version(),
              req.method() == bhttp::verb::head);
    }
  }

  void Respond(bhttp::status status, std::string body, bool keep_alive, unsigned version,
               bool head = false) {
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>(status, version);
    res->set(bhttp::field::server, "fastpath");
    res->set(bhttp::field::content_type, status == bhttp::status::ok
                                             ? "text/plain; version=0.0.4; charset=utf-8"
                                             : "text/plain; charset=utf-8");
    res->keep_alive(keep_alive);
    if (status == bhttp::status::method_not_allowed) res->set(bhttp::field::allow, "GET, HEAD");
    res->body() = std::move(body);
    res->prepare_payload();
    if (head) res->body().clear();  // Content-Length stays that of the GET answer
    stream_.expires_after(kIdleTimeout);
    bhttp::async_write(stream_, *res,
                       [self = shared_from_this(), res, keep_alive](beast::error_code ec, size_t) {
                         if (ec || !keep_alive) {
                           beast::error_code ignored;
                           self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
                           return;
                         }
                         self->Read();
                       });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::empty_body>> parser_;
  const ServerCollector& collector_;
};

}  // namespace

struct MetricsServer::Impl {
  explicit Impl(const server::InferenceServer& server) : collector(server) {}

  void Accept() {
    acceptor.async_accept(net::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted) return;
      if (!ec) {
        failures.Accepted();
        std::make_shared<Session>(std::move(socket), collector)->Read();
        Accept();
        return;
      }
      // A failed accept (e.g. out of descriptors) does not stop the listener, nor spin it.
      const auto wait = failures.Failed(ec.value(), ec.message());
      if (wait.count() == 0) return Accept();
      retry.expires_after(wait);
      retry.async_wait([this](beast::error_code wait_ec) {
        if (!wait_ec) Accept();
      });
    });
  }

  ServerCollector collector;
  net::io_context io{1};
  tcp::acceptor acceptor{io};
  net::steady_timer retry{io};
  AcceptFailures failures{"metrics"};
  std::thread thread;
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl, int port)
    : impl_(std::move(impl)), port_(port) {}

MetricsServer::~MetricsServer() {
  if (!impl_) return;
  // Stops at once: open connections are dropped, a scrape in progress is abandoned.
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const server::InferenceServer& server,
                                                              const MetricsOptions& options) {
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(options.address, ec);
  if (ec) return InvalidArgument("metrics address '" + options.address + "' is not an IP address");
  const std::string where = options.address + ":" + std::to_string(options.port);
  auto impl = std::make_unique<Impl>(server);
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
  auto& acceptor = impl->acceptor;
  if (acceptor.open(endpoint.protocol(), ec); ec) {
    return Unavailable("cannot serve metrics on " + where + ": " + ec.message());
  }
  if (acceptor.set_option(net::socket_base::reuse_address(true), ec); ec) {
    return Unavailable("cannot serve metrics on " + where + ": " + ec.message());
  }
  if (acceptor.bind(endpoint, ec); ec) {
    return Unavailable("cannot serve metrics on " + where + ": " + ec.message());
  }
  if (acceptor.listen(net::socket_base::max_listen_connections, ec); ec) {
    return Unavailable("cannot serve metrics on " + where + ": " + ec.message());
  }
  const int port = acceptor.local_endpoint(ec).port();
  if (ec) return Unavailable("cannot serve metrics on " + where + ": " + ec.message());
  impl->Accept();
  FASTPATH_RETURN_IF_ERROR(StartThreads(
      [&] {
        impl->thread = std::thread([raw = impl.get()] {
          NameThisThread("fp-metrics");
          raw->io.run();
        });
      },
      [] {}, "the metrics thread"));
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl), port));
}

}  // namespace fastpath::metrics
