// Formatting shared by the report writers (report_csv.cc, report_table.cc, report_svg.cc,
// report_soak.cc); defined in report.cc, the SVG helpers in report_svg.cc. Not part of
// fastpath::bench's interface.
#pragma once

#include <string>

#include "fastpath/bench/report.h"

namespace fastpath::bench::internal {

// One number through snprintf: Fmt("%.3f", v).
std::string Fmt(const char* format, double v);

// "kind:count kind:count", in kind order: a point's errors, for a table cell or a CSV field.
std::string ErrorsText(const BenchPoint& p);

// "size:executions size:executions", in size order: the batches the server formed.
std::string HistogramText(const ServerSplit& s);

// The soak's table (RenderTable calls it for a report with a soak); in report_soak.cc.
std::string SoakTable(const BenchReport& r);

// ---- SVG ----

// 1, 2 or 5 times a power of ten, so that about `target` ticks cover [0, max].
double NiceStep(double max, int target);
// A tick's text: "0", "2.5", "40", "1.5k".
std::string TickLabel(double v);
// The i-th series colour (ten, then again).
const char* SeriesColor(size_t i);

}  // namespace fastpath::bench::internal
