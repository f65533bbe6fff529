// Formatting shared by the report writers (report_csv.cc, report_table.cc,
// report_svg.cc); defined in report.cc. Not part of fastpath::bench's interface.
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

}  // namespace fastpath::bench::internal
