// A soak's table (one row per window: load, drift from the first window, GPU fields) and its
// SVG (latency percentiles and GPU temperature on one time axis, two scales).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "fastpath/bench/soak.h"
#include "report_internal.h"

namespace fastpath::bench {
namespace internal {
namespace {

std::string Opt(const std::optional<double>& v, const char* format) {
  return v ? Fmt(format, *v) : "-";
}

std::string ReasonsText(const SoakGpu& g) {
  if (!g.active_reasons) return "-";
  if (g.active_reasons->empty()) return "none";
  std::string out;
  for (const auto& r : *g.active_reasons) out += (out.empty() ? "" : ",") + r;
  return out;
}

std::string ThrottleText(const SoakGpu& g) {
  if (!g.throttle_seconds) return "-";
  if (g.throttle_seconds->empty()) return "0";
  std::string out;
  for (const auto& [reason, s] : *g.throttle_seconds) {
    out += (out.empty() ? "" : ",") + reason + ":" + Fmt("%.1f", s);
  }
  return out;
}

std::string GpuColumns(const SoakGpu* g) {
  char line[512];
  if (g == nullptr) {
    std::snprintf(line, sizeof(line), "  %6s %7s %8s %5s %8s  %-16s %s", "-", "-", "-", "-", "-",
                  "-", "-");
  } else {
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    const std::optional<double> memory_gib =
        g->memory_used_max_bytes ? std::optional<double>(*g->memory_used_max_bytes / kGiB)
                                 : std::nullopt;
    std::snprintf(line, sizeof(line), "  %6s %7s %8s %5s %8s  %-16s %s",
                  Opt(g->temperature_c, "%.0f").c_str(), Opt(g->sm_clock_mhz, "%.0f").c_str(),
                  Opt(g->power_w, "%.1f").c_str(), Opt(g->utilization_avg, "%.2f").c_str(),
                  Opt(memory_gib, "%.2f").c_str(), ReasonsText(*g).c_str(),
                  ThrottleText(*g).c_str());
  }
  return line;
}

}  // namespace

std::string SoakTable(const BenchReport& r) {
  const SoakResult& soak = *r.soak;
  std::ostringstream out;
  const auto duration = std::chrono::milliseconds(std::llround(soak.duration_s * 1000));
  const auto window = std::chrono::milliseconds(std::llround(soak.window_s * 1000));
  out << "\nsoak at concurrency " << soak.concurrency << " for " << FormatDuration(duration)
      << " in windows of " << FormatDuration(window) << "; GPU series from "
      << (soak.metrics_url.empty() ? "nowhere (not scraped)" : soak.metrics_url) << "\n";
  char line[512];
  std::snprintf(
      line, sizeof(line), "%6s %8s %10s %9s %9s %9s %7s %10s %9s  %6s %7s %8s %5s %8s  %-16s %s\n",
      "window", "end s", "infer/s", "p50 ms", "p95 ms", "p99 ms", "errors", "tput ratio",
      "p95 ratio", "temp C", "SM MHz", "power W", "util", "mem GiB", "clock events", "throttled s");
  out << line;
  size_t failed_scrapes = 0;
  std::string first_error;
  bool any_gpu = false;
  for (const SoakWindow& w : soak.windows) {
    const BenchPoint& p = w.load;
    std::snprintf(line, sizeof(line), "%6d %8.1f %10.1f %9.3f %9.3f %9.3f %7llu %10s %9s", w.index,
                  w.end_s, p.throughput_ips, p.latency.p50_us / 1000, p.latency.p95_us / 1000,
                  p.latency.p99_us / 1000, static_cast<unsigned long long>(p.errors),
                  Opt(w.throughput_ratio, "%.3f").c_str(), Opt(w.p95_ratio, "%.3f").c_str());
    out << line << GpuColumns(w.gpus.empty() ? nullptr : &w.gpus[0]) << "\n";
    for (size_t g = 1; g < w.gpus.size(); ++g) {
      std::snprintf(line, sizeof(line), "%6s %8s %10s %9s %9s %9s %7s %10s %9s", "",
                    ("gpu " + w.gpus[g].gpu).c_str(), "", "", "", "", "", "", "");
      out << line << GpuColumns(&w.gpus[g]) << "\n";
    }
    any_gpu = any_gpu || !w.gpus.empty();
    if (!w.metrics_error.empty()) {
      ++failed_scrapes;
      if (first_error.empty()) first_error = w.metrics_error;
    }
  }
  for (const SoakWindow& w : soak.windows) {
    if (w.load.errors > 0)
      out << "  window " << w.index << " errors: " << ErrorsText(w.load) << "\n";
    for (const auto& [kind, message] : w.load.error_samples) {
      out << "  window " << w.index << " " << kind << ": " << message << "\n";
    }
  }
  if (const auto d = SummarizeSoakDrift(soak)) {
    out << "\ndrift from window 1: the last window runs at "
        << Opt(d->last_throughput_ratio, "%.3f") << "x the throughput with "
        << Opt(d->last_p95_ratio, "%.3f") << "x the p95";
    if (d->min_throughput_ratio) {
      out << "; lowest throughput " << Fmt("%.3f", *d->min_throughput_ratio) << "x (window "
          << d->min_throughput_window << ")";
    }
    if (d->max_p95_ratio) {
      out << ", highest p95 " << Fmt("%.3f", *d->max_p95_ratio) << "x (window " << d->max_p95_window
          << ")";
    }
    out << "\n";
  } else {
    out << "\nno window was measured\n";
  }
  if (soak.metrics_url.empty()) {
    out << "GPU fields absent: the server's metrics were not scraped\n";
  } else if (failed_scrapes > 0) {
    out << "GPU fields absent in " << failed_scrapes << " window(s): the scrape failed ("
        << first_error << ")\n";
  } else if (!any_gpu) {
    out << "GPU fields absent ('-'): " << soak.metrics_url
        << " exports no fastpath_gpu_* series (a server without a GPU)\n";
  }
  if (soak.interrupted) out << "interrupted after " << soak.windows.size() << " window(s)\n";
  return out.str();
}

}  // namespace internal

std::string RenderSoakSvg(const BenchReport& report, const std::string& title) {
  using internal::Fmt;
  using internal::NiceStep;
  using internal::TickLabel;
  static const SoakResult kEmpty;
  const SoakResult& soak = report.soak ? *report.soak : kEmpty;

  // x: minutes for a soak of 2 minutes or more, seconds below.
  const bool minutes = soak.duration_s >= 120;
  const double x_unit = minutes ? 60 : 1;
  struct Series {
    std::string name;
    std::string css;
    const char* color;
    const char* dash;
    std::vector<std::pair<double, double>> points;
  };
  std::vector<Series> latency = {
      {"p50 latency", "p50", "#1f77b4", "", {}},
      {"p95 latency", "p95", "#ff7f0e", " stroke-dasharray=\"6 4\"", {}},
      {"p99 latency", "p99", "#9467bd", " stroke-dasharray=\"2 3\"", {}}};
  std::map<std::string, Series> temperature;  // by GPU label
  double max_x = soak.duration_s / x_unit;
  double max_ms = 0;
  double min_c = 1e9;
  double max_c = -1e9;
  for (const SoakWindow& w : soak.windows) {
    const double x = w.end_s / x_unit;
    max_x = std::max(max_x, x);
    if (w.load.requests > 0) {
      const LatencySummary& l = w.load.latency;
      latency[0].points.emplace_back(x, l.p50_us / 1000);
      latency[1].points.emplace_back(x, l.p95_us / 1000);
      latency[2].points.emplace_back(x, l.p99_us / 1000);
      max_ms = std::max({max_ms, l.p50_us / 1000, l.p95_us / 1000, l.p99_us / 1000});
    }
    for (const SoakGpu& g : w.gpus) {
      if (!g.temperature_c) continue;
      Series& s = temperature[g.gpu];
      if (s.name.empty()) {
        s.name = "GPU " + g.gpu + " temperature";
        s.css = "temperature";
        s.color =
            temperature.size() == 1 ? "#d62728" : internal::SeriesColor(temperature.size() + 2);
        s.dash = "";
      }
      s.points.emplace_back(x, *g.temperature_c);
      min_c = std::min(min_c, *g.temperature_c);
      max_c = std::max(max_c, *g.temperature_c);
    }
  }
  const double x_step = NiceStep(max_x, 8);
  // A last window that ended a hair after the duration does not add a tick.
  const double x_max = std::max(x_step, std::ceil(max_x / x_step - 0.01) * x_step);
  const double y_step = NiceStep(max_ms * 1.05, 6);
  const double y_max = std::max(y_step, std::ceil(max_ms * 1.05 / y_step) * y_step);
  // The temperature scale hugs its range (a few degrees of drift must show), with a margin.
  const bool have_c = !temperature.empty();
  double c_step = 1;
  double c_lo = 0;
  double c_hi = 100;
  if (have_c) {
    c_step = NiceStep(std::max(10.0, max_c - min_c + 10), 5);
    c_lo = std::floor((min_c - 5) / c_step) * c_step;
    c_hi = std::ceil((max_c + 5) / c_step) * c_step;
  }

  const double plot_left = 80;
  const double plot_top = 60;
  const double plot_w = 760;
  const double plot_h = 360;
  const double width = plot_left + plot_w + 90;
  const double legend_y = plot_top + plot_h + 62;
  const size_t legend_items = latency.size() + std::max<size_t>(1, temperature.size());
  const double height = legend_y + 22.0 * ((legend_items + 2) / 3) + 10;
  auto sx = [&](double x) { return plot_left + x / x_max * plot_w; };
  auto sy = [&](double ms) { return plot_top + plot_h - ms / y_max * plot_h; };
  auto sc = [&](double c) { return plot_top + plot_h - (c - c_lo) / (c_hi - c_lo) * plot_h; };

  std::ostringstream svg;
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << " " << height
      << "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  svg << "  <rect x=\"0\" y=\"0\" width=\"" << width << "\" height=\"" << height
      << "\" fill=\"#ffffff\"/>\n";
  svg << "  <text x=\"" << plot_left + plot_w / 2
      << "\" y=\"24\" text-anchor=\"middle\" font-size=\"16\""
      << " font-weight=\"bold\">" << XmlEscape(title) << "</text>\n";
  std::string subtitle =
      "concurrency " + std::to_string(soak.concurrency) + ", one point per window of " +
      FormatDuration(std::chrono::milliseconds(std::llround(soak.window_s * 1000))) +
      " at its end";
  if (const auto d = SummarizeSoakDrift(soak); d && d->last_throughput_ratio && d->last_p95_ratio) {
    subtitle += "; last window vs first: throughput " + Fmt("%.3f", *d->last_throughput_ratio) +
                "x, p95 " + Fmt("%.3f", *d->last_p95_ratio) + "x";
  }
  svg << "  <text x=\"" << plot_left + plot_w / 2
      << "\" y=\"44\" text-anchor=\"middle\" fill=\"#555555\">" << XmlEscape(subtitle)
      << "</text>\n";

  svg << "  <g class=\"grid\" stroke=\"#e5e5e5\" stroke-width=\"1\">\n";
  for (double x = 0; x <= x_max + x_step / 2; x += x_step) {
    svg << "    <line x1=\"" << sx(x) << "\" y1=\"" << plot_top << "\" x2=\"" << sx(x) << "\" y2=\""
        << plot_top + plot_h << "\"/>\n";
  }
  for (double y = 0; y <= y_max + y_step / 2; y += y_step) {
    svg << "    <line x1=\"" << plot_left << "\" y1=\"" << sy(y) << "\" x2=\"" << plot_left + plot_w
        << "\" y2=\"" << sy(y) << "\"/>\n";
  }
  svg << "  </g>\n";
  svg << "  <g class=\"axes\" stroke=\"#333333\" stroke-width=\"1.5\">\n";
  svg << "    <line x1=\"" << plot_left << "\" y1=\"" << plot_top + plot_h << "\" x2=\""
      << plot_left + plot_w << "\" y2=\"" << plot_top + plot_h << "\"/>\n";
  svg << "    <line x1=\"" << plot_left << "\" y1=\"" << plot_top << "\" x2=\"" << plot_left
      << "\" y2=\"" << plot_top + plot_h << "\"/>\n";
  svg << "    <line x1=\"" << plot_left + plot_w << "\" y1=\"" << plot_top << "\" x2=\""
      << plot_left + plot_w << "\" y2=\"" << plot_top + plot_h << "\""
      << (have_c ? "" : " stroke=\"#bbbbbb\"") << "/>\n";
  svg << "  </g>\n";
  svg << "  <g class=\"ticks\" fill=\"#333333\">\n";
  for (double x = 0; x <= x_max + x_step / 2; x += x_step) {
    svg << "    <text x=\"" << sx(x) << "\" y=\"" << plot_top + plot_h + 18
        << "\" text-anchor=\"middle\">" << TickLabel(x) << "</text>\n";
  }
  for (double y = 0; y <= y_max + y_step / 2; y += y_step) {
    svg << "    <text x=\"" << plot_left - 8 << "\" y=\"" << sy(y) + 4 << "\" text-anchor=\"end\">"
        << TickLabel(y) << "</text>\n";
  }
  if (have_c) {
    for (double c = c_lo; c <= c_hi + c_step / 2; c += c_step) {
      svg << "    <text x=\"" << plot_left + plot_w + 8 << "\" y=\"" << sc(c) + 4
          << "\" fill=\"#d62728\">" << TickLabel(c) << "</text>\n";
    }
  }
  svg << "  </g>\n";
  svg << "  <text x=\"" << plot_left + plot_w / 2 << "\" y=\"" << plot_top + plot_h + 40
      << "\" text-anchor=\"middle\">time since the soak started (" << (minutes ? "min" : "s")
      << ")</text>\n";
  svg << "  <text x=\"22\" y=\"" << plot_top + plot_h / 2
      << "\" text-anchor=\"middle\" transform=\"rotate(-90 22 " << plot_top + plot_h / 2
      << ")\">latency (ms)</text>\n";
  const double rx = plot_left + plot_w + 58;
  svg << "  <text class=\"temperature-axis\" x=\"" << rx << "\" y=\"" << plot_top + plot_h / 2
      << "\" text-anchor=\"middle\" transform=\"rotate(90 " << rx << " " << plot_top + plot_h / 2
      << ")\" fill=\"" << (have_c ? "#d62728" : "#999999") << "\">"
      << (have_c ? "GPU temperature (°C)" : "GPU temperature: absent (no GPU series)")
      << "</text>\n";
  if (latency[0].points.empty()) {
    svg << "  <text x=\"" << plot_left + plot_w / 2 << "\" y=\"" << plot_top + plot_h / 2
        << "\" text-anchor=\"middle\" fill=\"#999999\">no completed requests to plot</text>\n";
  }

  auto draw = [&](const Series& s, auto scale_y, const char* unit, const std::string& extra) {
    svg << "  <g class=\"series " << s.css << "\"" << extra << ">\n";
    svg << "    <polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"2\"" << s.dash
        << " points=\"";
    for (size_t k = 0; k < s.points.size(); ++k) {
      svg << (k ? " " : "") << Fmt("%.1f", sx(s.points[k].first)) << ","
          << Fmt("%.1f", scale_y(s.points[k].second));
    }
    svg << "\"/>\n";
    for (const auto& [x, y] : s.points) {
      svg << "    <circle cx=\"" << Fmt("%.1f", sx(x)) << "\" cy=\"" << Fmt("%.1f", scale_y(y))
          << "\" r=\"3\" fill=\"" << s.color << "\"><title>" << XmlEscape(s.name) << " "
          << Fmt("%.3f", y) << " " << unit << " at " << Fmt("%.2f", x) << (minutes ? " min" : " s")
          << "</title></circle>\n";
    }
    svg << "  </g>\n";
  };
  for (const Series& s : latency) {
    if (!s.points.empty()) draw(s, sy, "ms", "");
  }
  for (const auto& [gpu, s] : temperature)
    draw(s, sc, "°C", " data-gpu=\"" + XmlEscape(gpu) + "\"");

  // Legend under the plot, three to a row.
  svg << "  <g class=\"legend\">\n";
  size_t item = 0;
  auto legend = [&](const char* color, const char* dash, const std::string& text) {
    const double lx = plot_left + (item % 3) * 260.0;
    const double ly = legend_y + 22.0 * (item / 3);
    svg << "    <line x1=\"" << lx << "\" y1=\"" << ly - 4 << "\" x2=\"" << lx + 24 << "\" y2=\""
        << ly - 4 << "\" stroke=\"" << color << "\" stroke-width=\"2\"" << dash << "/>\n";
    svg << "    <text x=\"" << lx + 30 << "\" y=\"" << ly << "\">" << XmlEscape(text)
        << "</text>\n";
    ++item;
  };
  for (const Series& s : latency) legend(s.color, s.dash, s.name + " (left, ms)");
  if (temperature.empty()) {
    legend("#bbbbbb", " stroke-dasharray=\"1 4\"", "GPU temperature: absent");
  } else {
    for (const auto& [gpu, s] : temperature) legend(s.color, s.dash, s.name + " (right, °C)");
  }
  svg << "  </g>\n";
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace fastpath::bench
