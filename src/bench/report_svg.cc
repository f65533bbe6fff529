// The latency-throughput plot as a self-contained SVG (--svg and `fastpath bench plot`).
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>

#include "fastpath/bench/report.h"
#include "report_internal.h"

namespace fastpath::bench {

using internal::Fmt;

std::string XmlEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace internal {

double NiceStep(double max, int target) {
  if (max <= 0) return 1;
  const double raw = max / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * mag) return m * mag;
  }
  return 10 * mag;
}

std::string TickLabel(double v) {
  if (v == 0) return "0";
  if (std::fabs(v) >= 1000) return Fmt("%gk", v / 1000);
  if (std::fabs(v) >= 10) return Fmt("%.0f", v);
  if (std::fabs(v) >= 1) return Fmt("%.1f", v);
  return Fmt("%.2f", v);
}

const char* SeriesColor(size_t i) {
  static const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                  "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
  return kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
}

}  // namespace internal

namespace {

using internal::NiceStep;
using internal::SeriesColor;
using internal::TickLabel;

struct Curve {
  std::string label;
  std::vector<std::pair<double, double>> p50;  // (infer/s, ms)
  std::vector<std::pair<double, double>> p99;
};

}  // namespace

std::string RenderLatencyThroughputSvg(const std::vector<BenchReport>& reports,
                                       const std::string& title) {
  std::vector<Curve> curves;
  auto add = [&](const std::string& label, const std::vector<BenchPoint>& points) {
    Curve c;
    c.label = label;
    for (const auto& p : points) {
      if (p.requests == 0) continue;
      c.p50.emplace_back(p.throughput_ips, p.latency.p50_us / 1000.0);
      c.p99.emplace_back(p.throughput_ips, p.latency.p99_us / 1000.0);
    }
    // Along the throughput axis, so that each curve reads left to right.
    auto by_x = [](const auto& a, const auto& b) { return a.first < b.first; };
    std::sort(c.p50.begin(), c.p50.end(), by_x);
    std::sort(c.p99.begin(), c.p99.end(), by_x);
    if (!c.p50.empty()) curves.push_back(std::move(c));
  };
  for (const auto& r : reports) {
    std::string base = r.label.empty() ? r.model + " " + r.transport + " " + r.encoding : r.label;
    add(base, r.points);
    // In-process, one curve per intra-op thread count of the sweep: points of different
    // settings joined into one line would zigzag between them.
    std::map<std::optional<int64_t>, std::vector<BenchPoint>> by_threads;
    for (const BenchPoint& p : r.in_process) by_threads[p.intra_op_threads].push_back(p);
    for (const auto& [threads, points] : by_threads) {
      add(base + (threads ? " (in-process, " + std::to_string(*threads) + " intra-op thread" +
                                (*threads == 1 ? ")" : "s)")
                          : std::string(" (in-process)")),
          points);
    }
  }

  double max_x = 0;
  double max_y = 0;
  for (const auto& c : curves) {
    for (const auto& [x, y] : c.p50) max_x = std::max(max_x, x);
    for (const auto& [x, y] : c.p99) {
      max_x = std::max(max_x, x);
      max_y = std::max(max_y, y);
    }
  }
  const double x_step = NiceStep(max_x * 1.05, 6);
  const double y_step = NiceStep(max_y * 1.05, 6);
  const double x_max = std::max(x_step, std::ceil(max_x * 1.05 / x_step) * x_step);
  const double y_max = std::max(y_step, std::ceil(max_y * 1.05 / y_step) * y_step);

  const double width = 1000;
  const double plot_left = 80;
  const double plot_top = 50;
  const double plot_w = 560;
  const double plot_h = 380;
  const double legend_x = plot_left + plot_w + 25;
  const double height =
      std::max(plot_top + plot_h + 70, plot_top + 40 + 22.0 * (curves.size() + 3));
  auto sx = [&](double x) { return plot_left + x / x_max * plot_w; };
  auto sy = [&](double y) { return plot_top + plot_h - y / y_max * plot_h; };

  std::ostringstream svg;
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << " " << height
      << "\" font-family=\"Helvetica, Arial, sans-serif\""
      << " font-size=\"12\">\n";
  svg << "  <rect x=\"0\" y=\"0\" width=\"" << width << "\" height=\"" << height
      << "\" fill=\"#ffffff\"/>\n";
  svg << "  <text x=\"" << plot_left + plot_w / 2
      << "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\""
      << " font-weight=\"bold\">" << XmlEscape(title) << "</text>\n";
  // Grid and ticks.
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
  svg << "  </g>\n";
  svg << "  <text x=\"" << plot_left + plot_w / 2 << "\" y=\"" << plot_top + plot_h + 42
      << "\" text-anchor=\"middle\">throughput (inferences/s)</text>\n";
  svg << "  <text x=\"22\" y=\"" << plot_top + plot_h / 2
      << "\" text-anchor=\"middle\" transform=\"rotate(-90 22 " << plot_top + plot_h / 2
      << ")\">latency (ms)</text>\n";
  if (curves.empty()) {
    svg << "  <text x=\"" << plot_left + plot_w / 2 << "\" y=\"" << plot_top + plot_h / 2
        << "\" text-anchor=\"middle\" fill=\"#999999\">no completed requests to plot</text>\n";
  }
  // Curves: p50 solid with dots, p99 dashed with squares.
  for (size_t i = 0; i < curves.size(); ++i) {
    const char* color = SeriesColor(i);
    const auto& c = curves[i];
    svg << "  <g class=\"series\" data-label=\"" << XmlEscape(c.label) << "\">\n";
    for (int which = 0; which < 2; ++which) {
      const auto& pts = which == 0 ? c.p50 : c.p99;
      svg << "    <polyline class=\"" << (which == 0 ? "p50" : "p99")
          << "\" fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\""
          << (which == 0 ? "" : " stroke-dasharray=\"6 4\"") << " points=\"";
      for (size_t k = 0; k < pts.size(); ++k) {
        svg << (k ? " " : "") << Fmt("%.1f", sx(pts[k].first)) << ","
            << Fmt("%.1f", sy(pts[k].second));
      }
      svg << "\"/>\n";
      for (const auto& [x, y] : pts) {
        if (which == 0) {
          svg << "    <circle cx=\"" << Fmt("%.1f", sx(x)) << "\" cy=\"" << Fmt("%.1f", sy(y))
              << "\" r=\"3.5\" fill=\"" << color << "\"><title>" << XmlEscape(c.label) << " p50 "
              << Fmt("%.3f", y) << " ms at " << Fmt("%.1f", x) << " infer/s</title></circle>\n";
        } else {
          svg << "    <rect x=\"" << Fmt("%.1f", sx(x) - 3) << "\" y=\"" << Fmt("%.1f", sy(y) - 3)
              << "\" width=\"6\" height=\"6\" fill=\"#ffffff\" stroke=\"" << color << "\"><title>"
              << XmlEscape(c.label) << " p99 " << Fmt("%.3f", y) << " ms at " << Fmt("%.1f", x)
              << " infer/s</title></rect>\n";
        }
      }
    }
    svg << "  </g>\n";
  }
  // Legend: one colour per configuration, then the line styles.
  svg << "  <g class=\"legend\">\n";
  double ly = plot_top + 10;
  for (size_t i = 0; i < curves.size(); ++i) {
    const char* color = SeriesColor(i);
    svg << "    <rect x=\"" << legend_x << "\" y=\"" << ly - 9
        << "\" width=\"14\" height=\"10\" fill=\"" << color << "\"/>\n";
    svg << "    <text x=\"" << legend_x + 20 << "\" y=\"" << ly << "\">"
        << XmlEscape(curves[i].label) << "</text>\n";
    ly += 22;
  }
  ly += 8;
  svg << "    <line x1=\"" << legend_x << "\" y1=\"" << ly - 4 << "\" x2=\"" << legend_x + 24
      << "\" y2=\"" << ly - 4 << "\" stroke=\"#333333\" stroke-width=\"2\"/>\n";
  svg << "    <text x=\"" << legend_x + 30 << "\" y=\"" << ly << "\">p50 latency</text>\n";
  ly += 22;
  svg << "    <line x1=\"" << legend_x << "\" y1=\"" << ly - 4 << "\" x2=\"" << legend_x + 24
      << "\" y2=\"" << ly - 4
      << "\" stroke=\"#333333\" stroke-width=\"2\" stroke-dasharray=\"6 4\"/>\n";
  svg << "    <text x=\"" << legend_x + 30 << "\" y=\"" << ly << "\">p99 latency</text>\n";
  svg << "  </g>\n";
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace fastpath::bench
