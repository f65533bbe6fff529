#include "fastpath/admission/memory_budget.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "fastpath/admission/self_test.h"

namespace fastpath::admission {

StatusOr<double> MemoryMarginFor(const inference::ModelConfig& config) {
  const auto it = config.parameters().find(kMemoryMargin);
  if (it == config.parameters().end()) return kDefaultMemoryMargin;
  const std::string& text = it->second.string_value();
  char* end = nullptr;
  const double value = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  if (std::isnan(value) || end != text.c_str() + text.size() || value < 0 || value > 10) {
    return InvalidArgument(std::string("parameters: '") + kMemoryMargin + "' is '" + text +
                           "'; it must be a number between 0 and 10 (0.15 adds 15% to the "
                           "measured peak)");
  }
  return value;
}

StatusOr<std::optional<InferRequest>> MakeMemoryBudgetRequest(
    const inference::ModelConfig& config, const std::filesystem::path& model_dir,
    std::string* why_not) {
  const uint32_t rows =
      config.max_batch_size() > 0 ? static_cast<uint32_t>(config.max_batch_size()) : 1;
  const bool dynamic = std::any_of(config.input().begin(), config.input().end(),
                                   [](const inference::ModelInput& input) {
                                     return std::find(input.dims().begin(), input.dims().end(),
                                                      -1) != input.dims().end();
                                   });
  if (dynamic && config.model_warmup_size() == 0) {
    if (why_not != nullptr) {
      *why_not =
          "an input has a dynamic dim and no model_warmup gives it a size; declare one at the "
          "largest shape the model serves to have its memory measured";
    }
    return std::optional<InferRequest>();
  }
  auto request = MakeSeededRequest(config, model_dir, rows, /*seed=*/0);
  if (!request.ok()) return request.status().WithContext("memory budget");
  request->id = "fastpath-memory-budget";
  return std::optional<InferRequest>(std::move(request).value());
}

uint64_t InputElements(const std::vector<Tensor>& inputs) {
  uint64_t total = 0;
  for (const Tensor& t : inputs) {
    uint64_t elements = 1;
    for (const int64_t dim : t.shape) elements *= static_cast<uint64_t>(std::max<int64_t>(dim, 0));
    total += elements;
  }
  return total;
}

uint64_t MemoryBudget::EstimateBytes(uint64_t elements) const {
  return at_rest_bytes +
         static_cast<uint64_t>(std::ceil(bytes_per_input_element * static_cast<double>(elements)));
}

MemoryBudget ComputeMemoryBudget(const backend::MemoryStats& before,
                                 const backend::MemoryStats& after, const InferRequest& request,
                                 uint64_t rows, double margin, uint64_t weights_bytes) {
  MemoryBudget b;
  b.device = after.device;
  b.weights_bytes = weights_bytes;
  b.at_rest_bytes = before.in_use_bytes;
  b.peak_bytes = std::max(after.peak_bytes, before.in_use_bytes);
  b.rows = rows;
  b.input_elements = InputElements(request.inputs);
  b.margin = margin;
  b.budget_bytes =
      static_cast<uint64_t>(std::ceil(static_cast<double>(b.peak_bytes) * (1.0 + margin)));
  b.limit_bytes = after.limit_bytes;
  if (b.input_elements > 0) {
    b.bytes_per_input_element = static_cast<double>(b.peak_bytes - b.at_rest_bytes) /
                                static_cast<double>(b.input_elements);
  }
  return b;
}

double FragmentationRatio(const backend::MemoryStats& stats) {
  if (stats.reserved_bytes == 0 || stats.in_use_bytes >= stats.reserved_bytes) return 0;
  return static_cast<double>(stats.reserved_bytes - stats.in_use_bytes) /
         static_cast<double>(stats.reserved_bytes);
}

uint64_t FilesBytes(const std::filesystem::path& dir, const std::string& except) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code size_ec;
    if (!except.empty() && it->path() == dir / except) continue;
    if (it->is_regular_file(size_ec)) {
      const uint64_t size = it->file_size(size_ec);
      if (!size_ec) total += size;
    }
  }
  return total;
}

std::string MemoryBudgetToJson(const MemoryBudget& b) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("device");
  w.String(b.device.c_str(), static_cast<rapidjson::SizeType>(b.device.size()));
  w.Key("weights_bytes");
  w.Uint64(b.weights_bytes);
  w.Key("at_rest_bytes");
  w.Uint64(b.at_rest_bytes);
  w.Key("peak_bytes");
  w.Uint64(b.peak_bytes);
  w.Key("rows");
  w.Uint64(b.rows);
  w.Key("input_elements");
  w.Uint64(b.input_elements);
  w.Key("margin");
  w.Double(b.margin);
  // A measurement that ran out of memory measured no budget: null, not what it saw before.
  w.Key("budget_bytes");
  if (b.ran_out_of_memory) {
    w.Null();
  } else {
    w.Uint64(b.budget_bytes);
  }
  w.Key("limit_bytes");
  if (b.limit_bytes) {
    w.Uint64(*b.limit_bytes);
  } else {
    w.Null();
  }
  w.Key("bytes_per_input_element");
  if (b.ran_out_of_memory) {
    w.Null();
  } else {
    w.Double(b.bytes_per_input_element);
  }
  w.Key("instances");
  w.Uint(b.instances);
  w.Key("device_total_bytes");
  if (b.device_total_bytes) {
    w.Uint64(*b.device_total_bytes);
  } else {
    w.Null();
  }
  w.Key("ran_out_of_memory");
  w.Bool(b.ran_out_of_memory);
  w.Key("fits_limit");
  w.Bool(b.fits_limit());
  w.Key("fits_device");
  w.Bool(b.fits_device());
  w.Key("fits");
  w.Bool(b.fits());
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string FormatBytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (unit == 0) {
    std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
  }
  return text;
}

std::string DescribeBudget(const MemoryBudget& b) {
  char margin[16];
  std::snprintf(margin, sizeof margin, "%g%%", b.margin * 100);
  return "weights " + FormatBytes(b.weights_bytes) + ", arena at rest " +
         FormatBytes(b.at_rest_bytes) + ", peak " + FormatBytes(b.peak_bytes) +
         (b.ran_out_of_memory ? " when batch " + std::to_string(b.rows) + " ran out of memory"
                              : " at batch " + std::to_string(b.rows)) +
         ", budget " + (b.ran_out_of_memory ? "unknown" : FormatBytes(b.budget_bytes)) +
         " (margin " + margin + "), limit " +
         (b.limit_bytes ? FormatBytes(*b.limit_bytes) : std::string("none")) +
         (!b.device_total_bytes ? std::string()
          : b.ran_out_of_memory ? "; what its instances need of the device's " +
                                      FormatBytes(*b.device_total_bytes) + " is unknown"
                                : "; " + std::to_string(b.instances) +
                                      (b.instances == 1 ? " instance needs " : " instances need ") +
                                      FormatBytes(b.instances_bytes()) + " of the device's " +
                                      FormatBytes(*b.device_total_bytes));
}

}  // namespace fastpath::admission
