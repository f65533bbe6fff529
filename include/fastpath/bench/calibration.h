// --calibrate-batching: the config rewriting behind each candidate. The chooser and the
// snippet printer live with the report types (report.h) since they only read results.
#pragma once

#include <string>
#include <string_view>

#include "fastpath/bench/report.h"
#include "fastpath/common/status.h"

namespace fastpath::bench {

// config.pbtxt text for a candidate: the baseline drops dynamic_batching (and keeps the
// model's max_batch_size); a batching candidate sets max_batch_size and
// dynamic_batching { max_queue_delay_microseconds } (preferred sizes dropped, so the
// batcher forms batches up to max_batch_size). Everything else is kept. The text must
// parse as a fastpath config; the error names `source`.
StatusOr<std::string> RewriteBatchingConfig(std::string_view config_text, std::string_view source,
                                            const CalibrationCandidate& candidate);

}  // namespace fastpath::bench
