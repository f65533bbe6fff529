// libFuzzer target: config.pbtxt and a load request's JSON config are outside input.
// Whatever the bytes, parsing and the checks behind it return a Status; they never crash,
// hang or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fastpath/config/model_config.h"

namespace {

// The checks behind a parsed config, as a load runs them.
void CheckParsed(inference::ModelConfig cfg, const fastpath::config::ParseDetails& details) {
  using namespace fastpath;
  (void)config::ValidateModelConfig(cfg);
  const backend::ModelSignature signature = {
      {{"x", DataType::kFp32, {-1, 4}, {}}, {"ids", DataType::kInt64, {-1, -1}, {}}},
      {{"y", DataType::kFp32, {-1, 2}, {}}}};
  config::CompletionOptions options;
  options.max_batch_size_set = details.max_batch_size_set;
  if (!config::CompleteAndValidate(signature, &cfg, options).ok()) return;
  (void)config::SelectVersions(cfg.version_policy(), {1, 2, 3});
  for (const auto& group : cfg.instance_group()) (void)config::InstanceOptionsFor(cfg, group, 0);
  Tensor x{"x", DataType::kFp32, {1, 4}, std::string(16, '\0')};
  Tensor ids{"ids", DataType::kInt64, {1, 3}, std::string(24, '\0')};
  (void)config::ValidateInferInputs(cfg, {x, ids}, 1 << 20);
  for (const auto& input : cfg.input()) (void)config::ReshapeForModel(cfg, input, {1, 4});
}

}  // namespace

// The same bytes as config.pbtxt and as a load request's JSON config.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fastpath;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  config::ParseDetails details;
  if (auto parsed = config::ParseModelConfig(text, "fuzz/config.pbtxt", &details); parsed.ok()) {
    CheckParsed(std::move(parsed).value(), details);
  }
  if (auto parsed = config::ParseModelConfigJson(text, "fuzz/config.json", &details);
      parsed.ok()) {
    CheckParsed(std::move(parsed).value(), details);
  }
  return 0;
}
