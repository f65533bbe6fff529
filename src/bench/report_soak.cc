// A soak's table (one row per window: load, drift from the first window, GPU fields) and its
// SVG (latency percentiles and GPU temperature on one time axis, two scales).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
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

namespace {

// A linear scale for one side of a panel: its range and its tick step.
struct Scale {
  double lo = 0;
  double hi = 1;
  double step = 1;
};

// From 0 to a little above `max`, in nice steps.
Scale FromZero(double max, int ticks) {
  Scale s;
  s.step = internal::NiceStep(max * 1.05, ticks);
  s.hi = std::max(s.step, std::ceil(max * 1.05 / s.step) * s.step);
  return s;
}

// One line of the picture: a point per window, (x in the time unit, y in its scale's unit).
struct Series {
  std::string name;
  std::string css;
  const char* color;
  const char* dash;
  std::vector<std::pair<double, double>> points;
  std::string gpu;  // a GPU's series: its label
};

}  // namespace

// Two panels over one time axis: latency (left) with the GPUs' temperature (right) on top,
// throughput (left) with the GPUs' utilization (right) below, so that a drift in one shows
// beside its cause in the other.
std::string RenderSoakSvg(const BenchReport& report, const std::string& title) {
  using internal::Fmt;
  using internal::TickLabel;
  static const SoakResult kEmpty;
  const SoakResult& soak = report.soak ? *report.soak : kEmpty;

  // x: minutes for a soak of 2 minutes or more, seconds below.
  const bool minutes = soak.duration_s >= 120;
  const double x_unit = minutes ? 60 : 1;
  std::vector<Series> latency = {
      {"p50 latency", "p50", "#1f77b4", "", {}, ""},
      {"p95 latency", "p95", "#ff7f0e", " stroke-dasharray=\"6 4\"", {}, ""},
      {"p99 latency", "p99", "#9467bd", " stroke-dasharray=\"2 3\"", {}, ""}};
  Series throughput{"throughput", "throughput", "#2ca02c", "", {}, ""};
  std::map<std::string, Series> temperature;  // by GPU label
  std::map<std::string, Series> utilization;  // by GPU label
  auto gpu_series = [](std::map<std::string, Series>& by_gpu, const std::string& gpu,
                       const char* what, const char* first_color) -> Series& {
    Series& s = by_gpu[gpu];
    if (s.name.empty()) {
      s.name = "GPU " + gpu + " " + what;
      s.css = what;
      s.color = by_gpu.size() == 1 ? first_color : internal::SeriesColor(by_gpu.size() + 2);
      s.dash = "";
      s.gpu = gpu;
    }
    return s;
  };
  double max_x = soak.duration_s / x_unit;
  double max_ms = 0;
  double max_ips = 0;
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
      throughput.points.emplace_back(x, w.load.throughput_ips);
      max_ips = std::max(max_ips, w.load.throughput_ips);
    }
    for (const SoakGpu& g : w.gpus) {
      if (g.temperature_c) {
        gpu_series(temperature, g.gpu, "temperature", "#d62728")
            .points.emplace_back(x, *g.temperature_c);
        min_c = std::min(min_c, *g.temperature_c);
        max_c = std::max(max_c, *g.temperature_c);
      }
      if (g.utilization_avg) {
        gpu_series(utilization, g.gpu, "utilization", "#8c564b")
            .points.emplace_back(x, *g.utilization_avg * 100);
      }
    }
  }
  const double x_step = internal::NiceStep(max_x, 8);
  // A last window that ended a hair after the duration does not add a tick.
  const double x_max = std::max(x_step, std::ceil(max_x / x_step - 0.01) * x_step);
  const Scale ms_scale = FromZero(max_ms, 6);
  const Scale ips_scale = FromZero(max_ips, 4);
  // The temperature scale hugs its range (a few degrees of drift must show), with a margin.
  Scale c_scale{0, 100, 1};
  if (!temperature.empty()) {
    c_scale.step = internal::NiceStep(std::max(10.0, max_c - min_c + 10), 5);
    c_scale.lo = std::floor((min_c - 5) / c_scale.step) * c_scale.step;
    c_scale.hi = std::ceil((max_c + 5) / c_scale.step) * c_scale.step;
  }
  const Scale utilization_scale{0, 100, 25};

  const double plot_left = 80;
  const double plot_w = 760;
  const double top_y = 60;  // the latency panel
  const double top_h = 300;
  const double bottom_y = top_y + top_h + 40;  // the throughput panel
  const double bottom_h = 150;
  const double width = plot_left + plot_w + 90;
  const double legend_y = bottom_y + bottom_h + 62;
  const size_t legend_items = latency.size() + 1 + std::max<size_t>(1, temperature.size()) +
                              std::max<size_t>(1, utilization.size());
  const double height = legend_y + 22.0 * ((legend_items + 2) / 3) + 10;
  auto sx = [&](double x) { return plot_left + x / x_max * plot_w; };
  // A y on `scale` in the panel from `top`, `h` high.
  auto sy = [](const Scale& scale, double top, double h) {
    return [=](double v) { return top + h - (v - scale.lo) / (scale.hi - scale.lo) * h; };
  };

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

  // A panel's grid, axes, ticks and axis titles. `right_color` null: its right scale is absent,
  // and `right_title` says so.
  auto panel = [&](double top, double h, const Scale& left, const std::string& left_title,
                   const Scale& right, const char* right_css, const char* right_color,
                   const std::string& right_title) {
    const auto ly = sy(left, top, h);
    const auto ry = sy(right, top, h);
    svg << "  <g class=\"grid\" stroke=\"#e5e5e5\" stroke-width=\"1\">\n";
    for (double x = 0; x <= x_max + x_step / 2; x += x_step) {
      svg << "    <line x1=\"" << sx(x) << "\" y1=\"" << top << "\" x2=\"" << sx(x) << "\" y2=\""
          << top + h << "\"/>\n";
    }
    for (double y = left.lo; y <= left.hi + left.step / 2; y += left.step) {
      svg << "    <line x1=\"" << plot_left << "\" y1=\"" << ly(y) << "\" x2=\""
          << plot_left + plot_w << "\" y2=\"" << ly(y) << "\"/>\n";
    }
    svg << "  </g>\n";
    svg << "  <g class=\"axes\" stroke=\"#333333\" stroke-width=\"1.5\">\n";
    svg << "    <line x1=\"" << plot_left << "\" y1=\"" << top + h << "\" x2=\""
        << plot_left + plot_w << "\" y2=\"" << top + h << "\"/>\n";
    svg << "    <line x1=\"" << plot_left << "\" y1=\"" << top << "\" x2=\"" << plot_left
        << "\" y2=\"" << top + h << "\"/>\n";
    svg << "    <line x1=\"" << plot_left + plot_w << "\" y1=\"" << top << "\" x2=\""
        << plot_left + plot_w << "\" y2=\"" << top + h << "\""
        << (right_color != nullptr ? "" : " stroke=\"#bbbbbb\"") << "/>\n";
    svg << "  </g>\n";
    svg << "  <g class=\"ticks\" fill=\"#333333\">\n";
    for (double x = 0; x <= x_max + x_step / 2; x += x_step) {
      svg << "    <text x=\"" << sx(x) << "\" y=\"" << top + h + 18 << "\" text-anchor=\"middle\">"
          << TickLabel(x) << "</text>\n";
    }
    for (double y = left.lo; y <= left.hi + left.step / 2; y += left.step) {
      svg << "    <text x=\"" << plot_left - 8 << "\" y=\"" << ly(y) + 4
          << "\" text-anchor=\"end\">" << TickLabel(y) << "</text>\n";
    }
    if (right_color != nullptr) {
      for (double y = right.lo; y <= right.hi + right.step / 2; y += right.step) {
        svg << "    <text x=\"" << plot_left + plot_w + 8 << "\" y=\"" << ry(y) + 4 << "\" fill=\""
            << right_color << "\">" << TickLabel(y) << "</text>\n";
      }
    }
    svg << "  </g>\n";
    const double mid = top + h / 2;
    svg << "  <text x=\"22\" y=\"" << mid << "\" text-anchor=\"middle\" transform=\"rotate(-90 22 "
        << mid << ")\">" << XmlEscape(left_title) << "</text>\n";
    const double rx = plot_left + plot_w + 58;
    svg << "  <text class=\"" << right_css << "-axis\" x=\"" << rx << "\" y=\"" << mid
        << "\" text-anchor=\"middle\" transform=\"rotate(90 " << rx << " " << mid << ")\" fill=\""
        << (right_color != nullptr ? right_color : "#999999") << "\">" << XmlEscape(right_title)
        << "</text>\n";
    if (latency[0].points.empty()) {
      svg << "  <text x=\"" << plot_left + plot_w / 2 << "\" y=\"" << mid
          << "\" text-anchor=\"middle\" fill=\"#999999\">no completed requests to plot</text>\n";
    }
  };
  auto draw = [&](const Series& s, const std::function<double(double)>& scale_y, const char* unit) {
    svg << "  <g class=\"series " << s.css << "\"";
    if (!s.gpu.empty()) svg << " data-gpu=\"" << XmlEscape(s.gpu) << "\"";
    svg << ">\n";
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

  panel(top_y, top_h, ms_scale, "latency (ms)", c_scale, "temperature",
        temperature.empty() ? nullptr : "#d62728",
        temperature.empty() ? "GPU temperature: absent (no GPU series)" : "GPU temperature (°C)");
  for (const Series& s : latency) {
    if (!s.points.empty()) draw(s, sy(ms_scale, top_y, top_h), "ms");
  }
  for (const auto& [gpu, s] : temperature) draw(s, sy(c_scale, top_y, top_h), "°C");

  panel(bottom_y, bottom_h, ips_scale, "throughput (infer/s)", utilization_scale, "utilization",
        utilization.empty() ? nullptr : "#8c564b",
        utilization.empty() ? "GPU utilization: absent" : "GPU utilization (%)");
  if (!throughput.points.empty()) draw(throughput, sy(ips_scale, bottom_y, bottom_h), "infer/s");
  for (const auto& [gpu, s] : utilization) {
    draw(s, sy(utilization_scale, bottom_y, bottom_h), "%");
  }
  svg << "  <text x=\"" << plot_left + plot_w / 2 << "\" y=\"" << bottom_y + bottom_h + 40
      << "\" text-anchor=\"middle\">time since the soak started (" << (minutes ? "min" : "s")
      << ")</text>\n";

  // Legend under the plots, three to a row.
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
  const char* kAbsentDash = " stroke-dasharray=\"1 4\"";
  for (const Series& s : latency) legend(s.color, s.dash, s.name + " (top left, ms)");
  if (temperature.empty()) legend("#bbbbbb", kAbsentDash, "GPU temperature: absent");
  for (const auto& [gpu, s] : temperature) legend(s.color, s.dash, s.name + " (top right, °C)");
  legend(throughput.color, throughput.dash, "throughput (bottom left, infer/s)");
  if (utilization.empty()) legend("#bbbbbb", kAbsentDash, "GPU utilization: absent");
  for (const auto& [gpu, s] : utilization) legend(s.color, s.dash, s.name + " (bottom right, %)");
  svg << "  </g>\n";
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace fastpath::bench
