#include "fastpath/bench/calibration.h"

#include <google/protobuf/text_format.h>

#include "fastpath/config/model_config.h"

namespace fastpath::bench {

StatusOr<std::string> RewriteBatchingConfig(std::string_view config_text, std::string_view source,
                                            const CalibrationCandidate& candidate) {
  FASTPATH_ASSIGN_OR_RETURN(inference::ModelConfig config, config::ParseModelConfig(config_text, source));
  if (candidate.dynamic_batching) {
    if (candidate.max_batch_size < 1) {
      return InvalidArgument("a dynamic batching candidate needs max_batch_size >= 1");
    }
    config.set_max_batch_size(static_cast<int32_t>(candidate.max_batch_size));
    auto* batching = config.mutable_dynamic_batching();
    batching->clear_preferred_batch_size();
    batching->set_max_queue_delay_microseconds(static_cast<uint64_t>(candidate.max_queue_delay_us));
  } else {
    config.clear_dynamic_batching();
  }
  std::string out;
  if (!google::protobuf::TextFormat::PrintToString(config, &out)) {
    return Internal("cannot print the rewritten config of " + std::string(source));
  }
  return out;
}

}  // namespace fastpath::bench
