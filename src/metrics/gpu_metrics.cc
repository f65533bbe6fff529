// The GPU families (issue 14 §3): the GPU watch's statuses as they stand in the admission
// report, per GPU. A reading the GPU does not support is left out, never exported as 0.
#include <string>
#include <vector>

#include "fastpath/metrics/metrics.h"

namespace fastpath::metrics {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily NewFamily(const char* name, const char* help, MetricType type) {
  MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

ClientMetric Value(std::vector<ClientMetric::Label> labels, MetricType type, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  if (type == MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  return m;
}

std::optional<double> AsDouble(const std::optional<uint64_t>& v) {
  if (v) return static_cast<double>(*v);
  return std::nullopt;
}

// Triton labels its GPU metrics by UUID only; a trace without one gets "gpu<N>".
std::string TritonUuid(const gpu::GpuStatus& g) {
  return g.last.uuid.empty() ? "gpu" + std::to_string(g.gpu) : g.last.uuid;
}

}  // namespace

std::vector<MetricFamily> GpuFamilies(const admission::AdmissionReport& report) {
  if (report.gpu_telemetry.empty()) return {};
  struct Reading {
    MetricFamily family;
    std::optional<double> (*read)(const gpu::GpuSample&);
    bool triton;  // labelled gpu_uuid, Triton's way
  };
  std::vector<Reading> readings;
  auto add = [&](const char* name, const char* help, MetricType type, bool triton,
                 std::optional<double> (*read)(const gpu::GpuSample&)) {
    readings.push_back({NewFamily(name, help, type), read, triton});
  };
  using S = gpu::GpuSample;
  add("fastpath_gpu_temperature_celsius", "GPU core temperature", MetricType::Gauge, false,
      [](const S& s) { return s.temperature_c; });
  add("fastpath_gpu_sm_clock_mhz", "GPU SM clock", MetricType::Gauge, false,
      [](const S& s) { return s.sm_clock_mhz; });
  add("fastpath_gpu_memory_clock_mhz", "GPU memory clock", MetricType::Gauge, false,
      [](const S& s) { return s.mem_clock_mhz; });
  add("fastpath_gpu_utilization_ratio",
      "Fraction of the last sample period in which a kernel ran on the GPU (0..1)",
      MetricType::Gauge, false, [](const S& s) { return s.utilization_ratio; });
  add("fastpath_gpu_memory_used_bytes", "GPU memory in use, by every process", MetricType::Gauge,
      false, [](const S& s) { return AsDouble(s.memory_used_bytes); });
  add("fastpath_gpu_memory_total_bytes", "GPU memory in all", MetricType::Gauge, false,
      [](const S& s) { return AsDouble(s.memory_total_bytes); });
  add("fastpath_gpu_power_watts", "GPU power draw", MetricType::Gauge, false,
      [](const S& s) { return s.power_w; });
  add("fastpath_gpu_power_limit_watts", "GPU power limit enforced", MetricType::Gauge, false,
      [](const S& s) { return s.power_limit_w; });
  add("fastpath_gpu_ecc_uncorrected_total",
      "Uncorrected ECC errors since the driver loaded (NVML's volatile count); any makes the "
      "GPU quarantined",
      MetricType::Counter, false, [](const S& s) { return AsDouble(s.ecc_uncorrected_volatile); });
  add("fastpath_gpu_remapped_rows_uncorrectable",
      "GPU memory rows remapped after uncorrectable errors", MetricType::Gauge, false,
      [](const S& s) { return AsDouble(s.remapped_rows_uncorrectable); });
  // Triton's names and meanings, for dashboards built on Triton.
  add("nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)", MetricType::Gauge, true,
      [](const S& s) { return s.utilization_ratio; });
  add("nv_gpu_memory_total_bytes", "GPU total memory, in bytes", MetricType::Gauge, true,
      [](const S& s) { return AsDouble(s.memory_total_bytes); });
  add("nv_gpu_memory_used_bytes", "GPU used memory, in bytes", MetricType::Gauge, true,
      [](const S& s) { return AsDouble(s.memory_used_bytes); });
  add("nv_gpu_power_usage", "GPU power usage in watts", MetricType::Gauge, true,
      [](const S& s) { return s.power_w; });
  add("nv_gpu_power_limit", "GPU power management limit in watts", MetricType::Gauge, true,
      [](const S& s) { return s.power_limit_w; });

  MetricFamily active = NewFamily(
      "fastpath_gpu_clocks_event_active",
      "1 while the GPU's clocks are held down for this reason (NVML's clock-event reasons)",
      MetricType::Gauge);
  MetricFamily throttled = NewFamily(
      "fastpath_gpu_throttle_seconds_total",
      "Seconds the clocks were held down for this reason since fastpath started (from the "
      "samples: a reason holds until the next one)",
      MetricType::Counter);
  MetricFamily violations = NewFamily(
      "fastpath_gpu_violation_seconds_total",
      "Seconds this policy held the clocks below the application clocks (total_base_clocks: "
      "below the base clocks) since the driver loaded: NVML's perf-policy violation counters, "
      "which see episodes shorter than the sampling interval",
      MetricType::Counter);
  MetricFamily xids = NewFamily("fastpath_gpu_xid_total", "XID events seen since fastpath started",
                                MetricType::Counter);
  MetricFamily quarantined = NewFamily(
      "fastpath_gpu_quarantined",
      "1 once the GPU announced failing hardware (uncorrected ECC error, critical XID): "
      "readiness is off and no new request runs on it until fastpath restarts",
      MetricType::Gauge);

  for (const gpu::GpuStatus& g : report.gpus) {
    const std::vector<ClientMetric::Label> labels = {{"gpu", std::to_string(g.gpu)},
                                                     {"uuid", g.last.uuid}};
    for (Reading& r : readings) {
      if (const std::optional<double> v = r.read(g.last)) {
        r.family.metric.push_back(Value(
            r.triton ? std::vector<ClientMetric::Label>{{"gpu_uuid", TritonUuid(g)}} : labels,
            r.family.type, *v));
      }
    }
    if (g.last.clocks_event_reasons) {
      std::vector<int> bits = gpu::NamedClockEventReasonBits();
      for (int bit = static_cast<int>(bits.size()); bit < 64; ++bit) {
        if ((*g.last.clocks_event_reasons >> bit) & 1) bits.push_back(bit);
      }
      for (int bit : bits) {
        auto l = labels;
        l.push_back({"reason", gpu::ClockEventReasonLabel(bit)});
        active.metric.push_back(Value(std::move(l), MetricType::Gauge,
                                      static_cast<double>((*g.last.clocks_event_reasons >> bit) & 1)));
      }
    }
    for (const auto& [bit, seconds] : g.throttle_seconds) {
      auto l = labels;
      l.push_back({"reason", gpu::ClockEventReasonLabel(bit)});
      throttled.metric.push_back(Value(std::move(l), MetricType::Counter, seconds));
    }
    // Only the counters the GPU supports: an unsupported one is left out, never 0.
    for (const auto& [policy, seconds] : g.last.violation_seconds) {
      auto l = labels;
      l.push_back({"policy", policy});
      violations.metric.push_back(Value(std::move(l), MetricType::Counter, seconds));
    }
    for (const auto& [xid, n] : g.xid_counts) {
      auto l = labels;
      l.push_back({"xid", std::to_string(xid)});
      xids.metric.push_back(Value(std::move(l), MetricType::Counter, static_cast<double>(n)));
    }
    quarantined.metric.push_back(
        Value(labels, MetricType::Gauge, g.quarantined.empty() ? 0.0 : 1.0));
  }
  std::vector<MetricFamily> out;
  for (Reading& r : readings) {
    if (!r.family.metric.empty()) out.push_back(std::move(r.family));
  }
  for (MetricFamily* f : {&active, &throttled, &violations, &xids, &quarantined}) {
    if (!f->metric.empty()) out.push_back(std::move(*f));
  }
  return out;
}

}  // namespace fastpath::metrics
