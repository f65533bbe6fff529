// --soak: the flags' parsers, the GPU series of a metrics scrape, the per-window GPU fields,
// the drift, and the soak itself on top of the load generator's MeasureSoak.
#include "fastpath/bench/soak.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "fastpath/bench/gpu_sampler.h"
#include "fastpath/bench/http_once.h"

namespace fastpath::bench {
namespace {

constexpr int64_t kMsPerSecond = 1000;
constexpr int64_t kMaxSoakMs = int64_t{7} * 24 * 3600 * kMsPerSecond;

// ---- Prometheus text exposition (the sample lines we read) ----

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

bool IsNameChar(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         (!first && c >= '0' && c <= '9');
}

// `name{l="v",...} value [timestamp]`; the label values unescaped (\\, \" and \n).
// An error says what is wrong, without the line number (the caller adds it).
StatusOr<Sample> ParseSampleLine(std::string_view line) {
  Sample s;
  size_t i = 0;
  while (i < line.size() && IsNameChar(line[i], i == 0)) ++i;
  if (i == 0) return InvalidArgument("no metric name");
  s.name = std::string(line.substr(0, i));
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (true) {
      while (i < line.size() && (line[i] == ' ' || line[i] == ',')) ++i;
      if (i < line.size() && line[i] == '}') {
        ++i;
        break;
      }
      const size_t name_start = i;
      while (i < line.size() && IsNameChar(line[i], i == name_start)) ++i;
      if (i == name_start) return InvalidArgument("a label has no name");
      const std::string label(line.substr(name_start, i - name_start));
      if (i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') {
        return InvalidArgument("label '" + label + "' has no quoted value");
      }
      i += 2;
      std::string value;
      bool closed = false;
      while (i < line.size()) {
        const char c = line[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\' && i < line.size()) {
          const char e = line[i++];
          value += e == 'n' ? '\n' : e;
        } else {
          value += c;
        }
      }
      if (!closed) return InvalidArgument("label '" + label + "' is not closed");
      s.labels[label] = std::move(value);
    }
  }
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  size_t end = i;
  while (end < line.size() && line[end] != ' ' && line[end] != '\t') ++end;
  const std::string value(line.substr(i, end - i));
  if (value.empty()) return InvalidArgument("no value");
  char* parsed_end = nullptr;
  s.value = std::strtod(value.c_str(), &parsed_end);
  if (parsed_end != value.c_str() + value.size()) {
    return InvalidArgument("value '" + value + "' is not a number");
  }
  return s;
}

enum class Family {
  kTemperature,
  kSmClock,
  kPower,
  kUtilization,
  kMemoryUsed,
  kMemoryTotal,
  kClocksEventActive,
  kThrottleSeconds
};

std::optional<Family> GpuFamily(std::string_view name) {
  if (name == "fastpath_gpu_temperature_celsius") return Family::kTemperature;
  if (name == "fastpath_gpu_sm_clock_mhz") return Family::kSmClock;
  if (name == "fastpath_gpu_power_watts") return Family::kPower;
  if (name == "fastpath_gpu_utilization_ratio") return Family::kUtilization;
  if (name == "fastpath_gpu_memory_used_bytes") return Family::kMemoryUsed;
  if (name == "fastpath_gpu_memory_total_bytes") return Family::kMemoryTotal;
  if (name == "fastpath_gpu_clocks_event_active") return Family::kClocksEventActive;
  if (name == "fastpath_gpu_throttle_seconds_total") return Family::kThrottleSeconds;
  return std::nullopt;
}

// GPU labels in numeric order ("2" before "10"); what is not a number after, by text.
bool GpuLess(const std::string& a, const std::string& b) {
  int64_t x = 0;
  int64_t y = 0;
  const bool xa =
      std::from_chars(a.data(), a.data() + a.size(), x).ptr == a.data() + a.size() && !a.empty();
  const bool yb =
      std::from_chars(b.data(), b.data() + b.size(), y).ptr == b.data() + b.size() && !b.empty();
  if (xa && yb) return x < y;
  if (xa != yb) return xa;
  return a < b;
}

}  // namespace

StatusOr<std::chrono::milliseconds> ParseSoakDuration(std::string_view text,
                                                      std::string_view flag) {
  return ParseDuration(flag, text, std::chrono::seconds(1), std::chrono::milliseconds(kMaxSoakMs));
}

StatusOr<MetricsUrl> ParseMetricsUrl(std::string_view text) {
  const std::string given(text);
  std::string_view rest = text;
  if (rest.substr(0, 8) == "https://") {
    return InvalidArgument("--metrics-url '" + given + "': https is not supported, use http://");
  }
  if (rest.substr(0, 7) == "http://") rest.remove_prefix(7);
  MetricsUrl url;
  const size_t slash = rest.find('/');
  if (slash != std::string_view::npos) {
    url.path = std::string(rest.substr(slash));
    rest = rest.substr(0, slash);
  }
  auto address = ParseAddress(rest, 8002);
  if (!address.ok() || address->host.empty()) {
    return InvalidArgument("--metrics-url '" + given +
                           "' is not HOST[:PORT][/PATH] with a port in [1, 65535]");
  }
  url.host = address->host;
  url.port = address->port;
  return url;
}

MetricsUrl DefaultMetricsUrl(const ServerAddress& server) {
  MetricsUrl url;
  url.host = server.host;
  return url;
}

std::string DescribeMetricsUrl(const MetricsUrl& url) {
  ServerAddress server;
  server.host = url.host;
  server.port = url.port;
  return DescribeServer(server) + url.path;
}

StatusOr<std::vector<GpuMetrics>> ParseGpuMetrics(std::string_view text) {
  std::map<std::string, GpuMetrics> by_gpu;
  size_t line_start = 0;
  int line_number = 0;
  while (line_start < text.size()) {
    size_t line_end = text.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = text.size();
    std::string_view line = text.substr(line_start, line_end - line_start);
    line_start = line_end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line[0] == '#') continue;
    // Only our GPU families are read: their names end at '{' or a space.
    size_t name_end = 0;
    while (name_end < line.size() && IsNameChar(line[name_end], name_end == 0)) ++name_end;
    const std::optional<Family> family = GpuFamily(line.substr(0, name_end));
    if (!family) continue;
    auto where = [&] {
      return "metrics line " + std::to_string(line_number) + " (" +
             std::string(line.substr(0, name_end)) + ")";
    };
    StatusOr<Sample> sample = ParseSampleLine(line);
    if (!sample.ok()) return InvalidArgument(where() + ": " + sample.status().message());
    auto gpu = sample->labels.find("gpu");
    if (gpu == sample->labels.end()) return InvalidArgument(where() + " has no gpu label");
    GpuMetrics& g = by_gpu[gpu->second];
    g.gpu = gpu->second;
    if (auto uuid = sample->labels.find("uuid"); uuid != sample->labels.end())
      g.uuid = uuid->second;
    std::string reason;
    if (*family == Family::kClocksEventActive || *family == Family::kThrottleSeconds) {
      auto r = sample->labels.find("reason");
      if (r == sample->labels.end()) return InvalidArgument(where() + " has no reason label");
      reason = r->second;
    }
    switch (*family) {
      case Family::kTemperature:
        g.temperature_c = sample->value;
        break;
      case Family::kSmClock:
        g.sm_clock_mhz = sample->value;
        break;
      case Family::kPower:
        g.power_w = sample->value;
        break;
      case Family::kUtilization:
        g.utilization_ratio = sample->value;
        break;
      case Family::kMemoryUsed:
        g.memory_used_bytes = sample->value;
        break;
      case Family::kMemoryTotal:
        g.memory_total_bytes = sample->value;
        break;
      case Family::kClocksEventActive:
        g.clocks_event_active[reason] = sample->value;
        break;
      case Family::kThrottleSeconds:
        g.throttle_seconds_total[reason] = sample->value;
        break;
    }
  }
  std::vector<GpuMetrics> out;
  for (auto& [gpu, g] : by_gpu) out.push_back(std::move(g));
  std::sort(out.begin(), out.end(),
            [](const GpuMetrics& a, const GpuMetrics& b) { return GpuLess(a.gpu, b.gpu); });
  return out;
}

std::vector<SoakGpu> SoakGpusBetween(const std::optional<std::vector<GpuMetrics>>& start,
                                     const std::vector<GpuMetrics>& end) {
  std::vector<SoakGpu> out;
  for (const GpuMetrics& g : end) {
    SoakGpu w;
    w.gpu = g.gpu;
    w.uuid = g.uuid;
    w.temperature_c = g.temperature_c;
    w.sm_clock_mhz = g.sm_clock_mhz;
    w.power_w = g.power_w;
    if (!g.clocks_event_active.empty()) {
      std::vector<std::string> active;
      for (const auto& [reason, v] : g.clocks_event_active) {
        if (v >= 0.5) active.push_back(reason);
      }
      w.active_reasons = std::move(active);
    }
    // The server exports a reason's counter once it was active; with no reasons at all the
    // GPU does not report them, and the throttle time is unknown rather than 0.
    const bool reasons_known = !g.clocks_event_active.empty() || !g.throttle_seconds_total.empty();
    if (reasons_known && start) {
      const GpuMetrics* before = nullptr;
      for (const GpuMetrics& s : *start) {
        if (s.gpu == g.gpu) before = &s;
      }
      if (before != nullptr && before->uuid != g.uuid) before = nullptr;  // another GPU now
      std::map<std::string, double> seconds;
      for (const auto& [reason, total] : g.throttle_seconds_total) {
        double from = 0;
        if (before != nullptr) {
          auto it = before->throttle_seconds_total.find(reason);
          if (it != before->throttle_seconds_total.end()) from = it->second;
        }
        const double delta = total >= from ? total - from : total;  // a reset counts from 0
        if (delta > 0) seconds[reason] = delta;
      }
      w.throttle_seconds = std::move(seconds);
    }
    out.push_back(std::move(w));
  }
  return out;
}

void ComputeSoakDrift(SoakResult* soak) {
  if (soak->windows.empty()) return;
  const BenchPoint& first = soak->windows.front().load;
  for (SoakWindow& w : soak->windows) {
    w.throughput_ratio.reset();
    w.p95_ratio.reset();
    if (first.throughput_ips > 0) w.throughput_ratio = w.load.throughput_ips / first.throughput_ips;
    if (first.requests > 0 && first.latency.p95_us > 0 && w.load.requests > 0) {
      w.p95_ratio = w.load.latency.p95_us / first.latency.p95_us;
    }
  }
}

std::optional<SoakDriftSummary> SummarizeSoakDrift(const SoakResult& soak) {
  if (soak.windows.empty()) return std::nullopt;
  SoakDriftSummary s;
  s.last_throughput_ratio = soak.windows.back().throughput_ratio;
  s.last_p95_ratio = soak.windows.back().p95_ratio;
  for (const SoakWindow& w : soak.windows) {
    if (w.throughput_ratio &&
        (!s.min_throughput_ratio || *w.throughput_ratio < *s.min_throughput_ratio)) {
      s.min_throughput_ratio = w.throughput_ratio;
      s.min_throughput_window = w.index;
    }
    if (w.p95_ratio && (!s.max_p95_ratio || *w.p95_ratio > *s.max_p95_ratio)) {
      s.max_p95_ratio = w.p95_ratio;
      s.max_p95_window = w.index;
    }
  }
  return s;
}

StatusOr<SoakResult> RunSoak(Target& target, const SoakOptions& options) {
  SoakResult soak;
  soak.concurrency = options.concurrency;
  soak.duration_s = std::chrono::duration<double>(options.schedule.duration).count();
  soak.window_s = std::chrono::duration<double>(options.schedule.window).count();
  if (options.metrics != nullptr) soak.metrics_url = options.metrics->Describe();
  // The GPU series of the last boundary's scrape; nullopt when it failed.
  std::optional<std::vector<GpuMetrics>> previous;
  double elapsed_s = 0;
  GpuSampler::Clock::time_point window_began;
  auto on_boundary = [&](int index, const BenchPoint* window) {
    const GpuSampler::Clock::time_point now_at = GpuSampler::Clock::now();
    std::optional<std::vector<GpuMetrics>> now;
    std::string error;
    if (options.metrics != nullptr) {
      StatusOr<std::string> text = options.metrics->Scrape();
      StatusOr<std::vector<GpuMetrics>> gpus =
          text.ok() ? ParseGpuMetrics(*text) : StatusOr<std::vector<GpuMetrics>>(text.status());
      if (gpus.ok()) {
        now = std::move(gpus).value();
      } else {
        error = gpus.status().message();
      }
    }
    if (window != nullptr) {
      SoakWindow w;
      w.index = index;
      w.start_s = elapsed_s;
      // Kept in whole milliseconds, as the report writes them, so a chart drawn now and
      // one drawn later from the report (`plot`) place and name each point alike.
      elapsed_s = std::round((elapsed_s + window->measured_seconds) * 1000.0) / 1000.0;
      w.end_s = elapsed_s;
      w.load = *window;
      if (now) w.gpus = SoakGpusBetween(previous, *now);
      if (options.sampler != nullptr) {
        const PointGpuMetrics through = options.sampler->Between(window_began, now_at);
        options.sampler->Forget(now_at);
        for (SoakGpu& g : w.gpus) {
          for (const PointGpu& p : through.gpus) {
            if (p.gpu != g.gpu) continue;
            g.utilization_avg = p.utilization_avg;
            g.memory_used_max_bytes = p.memory_used_max_bytes;
          }
        }
      }
      w.metrics_error = error;
      soak.windows.push_back(std::move(w));
      ComputeSoakDrift(&soak);
      if (options.on_window) options.on_window(soak.windows.back());
    }
    previous = std::move(now);
    window_began = now_at;
  };
  FASTPATH_RETURN_IF_ERROR(
      MeasureSoak(target, options.concurrency, options.measure, options.schedule, on_boundary));
  soak.interrupted = options.schedule.stop != nullptr && options.schedule.stop->load();
  return soak;
}

}  // namespace fastpath::bench
