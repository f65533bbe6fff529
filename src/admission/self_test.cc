#include "fastpath/admission/self_test.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "fastpath/config/model_config.h"

namespace fastpath::admission {
namespace {

constexpr const char* kSloPrefix = "fastpath.slo.";
constexpr int64_t kMaxSelfTestElements = int64_t{1} << 28;

std::string Number(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.6g", value);
  return text;
}

Status BadValue(const std::string& key, const std::string& value, const std::string& want) {
  return InvalidArgument("parameters: '" + key + "' is '" + value + "'; it must be " + want);
}

StatusOr<double> ParsePositive(const std::string& key, const std::string& text) {
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() ||
      !std::isfinite(value) || value <= 0) {
    return BadValue(key, text, "a number greater than 0");
  }
  return value;
}

StatusOr<uint64_t> ParseUnsigned(const std::string& key, const std::string& text, uint64_t lo,
                                 uint64_t hi) {
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || value < lo ||
      value > hi) {
    return BadValue(key, text,
                    "an integer between " + std::to_string(lo) + " and " + std::to_string(hi));
  }
  return value;
}

// SplitMix64: tiny, fast and fully specified, so the same seed gives the same bytes on
// every platform (std:: distributions do not promise that).
struct SplitMix64 {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

uint64_t Fnv1a(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

template <typename T>
void Append(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));  // little-endian hosts only
}

struct InputSource {
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> dims;  // without the batch dim
  enum class Kind { kZero, kRandom, kFile } kind = Kind::kRandom;
  std::string file;
};

// One tensor of `batch` elements of `source` (batch 0: the model does not batch).
StatusOr<Tensor> MakeTensor(const std::string& name, const InputSource& source, uint32_t batch,
                            uint64_t seed, const std::filesystem::path& model_dir) {
  Tensor tensor;
  tensor.name = name;
  tensor.dtype = source.dtype;
  if (batch > 0) tensor.shape.push_back(batch);
  tensor.shape.insert(tensor.shape.end(), source.dims.begin(), source.dims.end());
  for (int64_t d : source.dims) {
    if (d < 0) {
      return InvalidArgument("input '" + name + "' has a dynamic shape " +
                             ShapeToString(source.dims) +
                             "; declare a model_warmup with concrete dims for the self-test");
    }
  }
  FASTPATH_ASSIGN_OR_RETURN(const int64_t elements,
                            ElementCount(tensor.shape, kMaxSelfTestElements));
  const size_t size = ElementSize(source.dtype);
  switch (source.kind) {
    case InputSource::Kind::kZero:
      if (source.dtype == DataType::kBytes) {
        tensor.data.assign(static_cast<size_t>(elements) * 4, '\0');  // empty strings
      } else {
        tensor.data.assign(static_cast<size_t>(elements) * size, '\0');
      }
      break;
    case InputSource::Kind::kRandom:
      tensor.data = SeededData(source.dtype, elements, seed, name);
      break;
    case InputSource::Kind::kFile: {
      const std::filesystem::path path = model_dir / "warmup" / source.file;
      std::ifstream in(path, std::ios::binary);
      if (!in) return NotFound("input '" + name + "': cannot read warm-up data " + path.string());
      std::ostringstream bytes;
      bytes << in.rdbuf();
      const std::string one = bytes.str();  // one batch element, as Triton reads it
      const int64_t per_element = batch > 0 ? elements / batch : elements;
      if (source.dtype != DataType::kBytes &&
          one.size() != static_cast<size_t>(per_element) * size) {
        return InvalidArgument("input '" + name + "': warm-up data " + path.string() + " has " +
                               std::to_string(one.size()) + " bytes; one batch element of " +
                               ShapeToString(source.dims) + " " +
                               std::string(DataTypeName(source.dtype)) + " needs " +
                               std::to_string(per_element * static_cast<int64_t>(size)));
      }
      for (uint32_t i = 0; i < std::max<uint32_t>(batch, 1); ++i) tensor.data += one;
      break;
    }
  }
  FASTPATH_RETURN_IF_ERROR(ValidateTensorData(tensor));
  return tensor;
}

StatusOr<std::map<std::string, InputSource>> WarmupSources(const inference::ModelWarmup& warmup) {
  std::map<std::string, InputSource> sources;
  for (const auto& [name, input] : warmup.inputs()) {
    InputSource s;
    s.dtype = config::FromConfigDataType(input.data_type());
    s.dims.assign(input.dims().begin(), input.dims().end());
    switch (input.input_data_type_case()) {
      case inference::ModelWarmup::Input::kZeroData:
        s.kind = InputSource::Kind::kZero;
        break;
      case inference::ModelWarmup::Input::kRandomData:
        s.kind = InputSource::Kind::kRandom;
        break;
      case inference::ModelWarmup::Input::kInputDataFile:
        s.kind = InputSource::Kind::kFile;
        s.file = input.input_data_file();
        break;
      default:
        return InvalidArgument("input '" + name +
                               "': set one of zero_data, random_data or input_data_file");
    }
    sources[name] = std::move(s);
  }
  return sources;
}

StatusOr<InferRequest> MakeRequest(const inference::ModelConfig& config,
                                   const std::map<std::string, InputSource>& sources,
                                   uint32_t batch, uint64_t seed,
                                   const std::filesystem::path& model_dir) {
  InferRequest request;
  request.model_name = config.name();
  request.id = "fastpath-self-test";
  for (const auto& [name, source] : sources) {
    FASTPATH_ASSIGN_OR_RETURN(
        Tensor tensor,
        MakeTensor(name, source, config.max_batch_size() > 0 ? batch : 0, seed, model_dir));
    request.inputs.push_back(std::move(tensor));
  }
  return request;
}

}  // namespace

StatusOr<SelfTestBudget> ParseBudget(const inference::ModelConfig& config) {
  SelfTestBudget budget;
  bool tuning_set = false;
  for (const auto& [key, parameter] : config.parameters()) {
    if (key.rfind(kSloPrefix, 0) != 0) continue;
    const std::string& value = parameter.string_value();
    if (key == kSloP95Ms) {
      FASTPATH_ASSIGN_OR_RETURN(budget.p95_ms, ParsePositive(key, value));
    } else if (key == kSloMinThroughput) {
      FASTPATH_ASSIGN_OR_RETURN(budget.min_throughput, ParsePositive(key, value));
    } else if (key == kSloBatchSize) {
      const uint64_t max_batch =
          config.max_batch_size() > 0 ? static_cast<uint64_t>(config.max_batch_size()) : 1;
      auto parsed = ParseUnsigned(key, value, 1, UINT32_MAX);
      if (!parsed.ok()) return parsed.status();
      if (*parsed > max_batch) {
        return BadValue(key, value,
                        "between 1 and " + std::to_string(max_batch) +
                            (config.max_batch_size() > 0 ? " (max_batch_size)"
                                                         : " (the model does not batch)"));
      }
      budget.batch_size = static_cast<uint32_t>(*parsed);
      tuning_set = true;
    } else if (key == kSloIterations) {
      FASTPATH_ASSIGN_OR_RETURN(uint64_t n, ParseUnsigned(key, value, 1, 10000));
      budget.iterations = static_cast<uint32_t>(n);
      tuning_set = true;
    } else if (key == kSloWarmupIterations) {
      FASTPATH_ASSIGN_OR_RETURN(uint64_t n, ParseUnsigned(key, value, 0, 10000));
      budget.warmup_iterations = static_cast<uint32_t>(n);
      tuning_set = true;
    } else if (key == kSloSeed) {
      FASTPATH_ASSIGN_OR_RETURN(budget.seed, ParseUnsigned(key, value, 0, UINT64_MAX));
      tuning_set = true;
    } else {
      return InvalidArgument("parameters: unknown key '" + key + "' (known: " + kSloP95Ms + ", " +
                             kSloMinThroughput + ", " + kSloBatchSize + ", " + kSloIterations +
                             ", " + kSloWarmupIterations + ", " + kSloSeed + ")");
    }
  }
  if (tuning_set && !budget.declared()) {
    return InvalidArgument(
        std::string("parameters: fastpath.slo.* settings without a budget; set ") + kSloP95Ms +
        " and/or " + kSloMinThroughput);
  }
  return budget;
}

std::string SeededData(DataType dtype, int64_t elements, uint64_t seed, const std::string& name) {
  SplitMix64 rng{seed ^ Fnv1a(name)};
  std::string out;
  const size_t n = static_cast<size_t>(std::max<int64_t>(elements, 0));
  out.reserve(n * std::max<size_t>(ElementSize(dtype), 4));
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = rng.Next();
    const double unit = static_cast<double>(r >> 11) * 0x1.0p-53;  // [0, 1)
    const uint64_t small = r >> 60;                                // [0, 16)
    switch (dtype) {
      case DataType::kBool:
        Append<uint8_t>(&out, static_cast<uint8_t>(r >> 63));
        break;
      case DataType::kUint8:
        Append<uint8_t>(&out, static_cast<uint8_t>(small));
        break;
      case DataType::kUint16:
        Append<uint16_t>(&out, static_cast<uint16_t>(small));
        break;
      case DataType::kUint32:
        Append<uint32_t>(&out, static_cast<uint32_t>(small));
        break;
      case DataType::kUint64:
        Append<uint64_t>(&out, small);
        break;
      case DataType::kInt8:
        Append<int8_t>(&out, static_cast<int8_t>(small));
        break;
      case DataType::kInt16:
        Append<int16_t>(&out, static_cast<int16_t>(small));
        break;
      case DataType::kInt32:
        Append<int32_t>(&out, static_cast<int32_t>(small));
        break;
      case DataType::kInt64:
        Append<int64_t>(&out, static_cast<int64_t>(small));
        break;
      // Exponent fixed at 2^-1 and a random mantissa: [0.5, 1) without a float conversion.
      case DataType::kFp16:
        Append<uint16_t>(&out, static_cast<uint16_t>((14u << 10) | (r >> 54)));
        break;
      case DataType::kBf16:
        Append<uint16_t>(&out, static_cast<uint16_t>((126u << 7) | (r >> 57)));
        break;
      case DataType::kFp32:
        Append<float>(&out, static_cast<float>(unit));
        break;
      case DataType::kFp64:
        Append<double>(&out, unit);
        break;
      case DataType::kBytes: {
        std::string word;
        for (int c = 0; c < 8; ++c) word += static_cast<char>('a' + ((r >> (c * 5)) % 26));
        AppendBytesElement(&out, word);
        break;
      }
      case DataType::kInvalid:
        break;
    }
  }
  return out;
}

StatusOr<SelfTestPlan> MakeSelfTestPlan(const inference::ModelConfig& config,
                                        const std::filesystem::path& model_dir,
                                        const SelfTestBudget& budget) {
  SelfTestPlan plan;
  plan.budget = budget;
  for (int i = 0; i < config.model_warmup_size(); ++i) {
    const inference::ModelWarmup& warmup = config.model_warmup(i);
    const std::string what = "model_warmup[" + std::to_string(i) + "]" +
                             (warmup.name().empty() ? "" : " '" + warmup.name() + "'");
    auto sources = WarmupSources(warmup);
    if (!sources.ok()) return InvalidArgument(what + ": " + sources.status().message());
    auto request = MakeRequest(config, *sources, std::max<uint32_t>(warmup.batch_size(), 1),
                               budget.seed, model_dir);
    if (!request.ok()) return InvalidArgument(what + ": " + request.status().message());
    plan.warmups.push_back(
        {warmup.name().empty() ? "model_warmup[" + std::to_string(i) + "]" : warmup.name(),
         std::max<uint32_t>(warmup.count(), 1), std::move(request).value()});
  }
  if (!budget.declared()) return plan;

  plan.batch_size = budget.batch_size > 0 ? budget.batch_size
                    : config.model_warmup_size() > 0
                        ? std::max<uint32_t>(config.model_warmup(0).batch_size(), 1)
                        : 1;
  if (config.max_batch_size() <= 0) plan.batch_size = 1;
  auto timed = MakeSeededRequest(config, model_dir, plan.batch_size, budget.seed);
  if (!timed.ok()) return InvalidArgument("its timed request: " + timed.status().message());
  plan.timed = std::move(timed).value();
  return plan;
}

StatusOr<InferRequest> MakeSeededRequest(const inference::ModelConfig& config,
                                         const std::filesystem::path& model_dir,
                                         uint32_t batch_size, uint64_t seed) {
  std::map<std::string, InputSource> sources;
  if (config.model_warmup_size() > 0) {
    FASTPATH_ASSIGN_OR_RETURN(sources, WarmupSources(config.model_warmup(0)));
  } else {
    for (const auto& input : config.input()) {
      if (input.optional()) continue;
      InputSource s;
      s.dtype = config::FromConfigDataType(input.data_type());
      s.dims.assign(input.dims().begin(), input.dims().end());
      sources[input.name()] = std::move(s);
    }
  }
  return MakeRequest(config, sources, batch_size, seed, model_dir);
}

SelfTestFigures ComputeFigures(const std::vector<std::chrono::nanoseconds>& latencies,
                               uint32_t batch_size) {
  SelfTestFigures f;
  f.iterations = static_cast<uint32_t>(latencies.size());
  f.batch_size = batch_size;
  if (latencies.empty()) return f;
  std::vector<std::chrono::nanoseconds> sorted = latencies;
  std::sort(sorted.begin(), sorted.end());
  // Nearest rank: the smallest value with at least p% of the samples at or below it.
  auto rank = [&](double p) {
    const size_t r = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
    return sorted[std::clamp<size_t>(r, 1, sorted.size()) - 1];
  };
  auto ms = [](std::chrono::nanoseconds ns) { return static_cast<double>(ns.count()) / 1e6; };
  f.p50_ms = ms(rank(0.50));
  f.p95_ms = ms(rank(0.95));
  f.max_ms = ms(sorted.back());
  std::chrono::nanoseconds total{0};
  for (auto l : latencies) total += l;
  const double seconds = std::max<double>(static_cast<double>(total.count()), 1.0) / 1e9;
  f.throughput = static_cast<double>(batch_size) * static_cast<double>(latencies.size()) / seconds;
  return f;
}

std::vector<std::string> CheckBudget(const SelfTestBudget& budget, const SelfTestFigures& figures) {
  std::vector<std::string> misses;
  if (budget.p95_ms && figures.p95_ms > *budget.p95_ms) {
    misses.push_back("p95 " + Number(figures.p95_ms) + " ms > budget " + Number(*budget.p95_ms) +
                     " ms");
  }
  if (budget.min_throughput && figures.throughput < *budget.min_throughput) {
    misses.push_back("throughput " + Number(figures.throughput) + "/s < budget " +
                     Number(*budget.min_throughput) + "/s");
  }
  return misses;
}

std::string SelfTestReport::Summary() const {
  if (!figures) return "warm-up only (" + std::to_string(warmup_runs) + " runs), no budget";
  std::string out = "p95 " + Number(figures->p95_ms) + " ms";
  if (budget.p95_ms) out += " (budget " + Number(*budget.p95_ms) + " ms)";
  out += ", throughput " + Number(figures->throughput) + "/s";
  if (budget.min_throughput) out += " (budget >= " + Number(*budget.min_throughput) + "/s)";
  out += ", batch " + std::to_string(figures->batch_size) + ", " +
         std::to_string(figures->iterations) + " timed runs";
  return out;
}

StatusOr<SelfTestReport> RunSelfTest(const SelfTestPlan& plan, const RunFn& run,
                                     const Clock& clock) {
  SelfTestReport report;
  report.budget = plan.budget;
  for (const WarmupStep& step : plan.warmups) {
    for (uint32_t i = 0; i < step.count; ++i) {
      if (Status s = run(step.request); !s.ok()) {
        return Status(s.code(), "warm-up '" + step.name + "' run " + std::to_string(i + 1) +
                                    " of " + std::to_string(step.count) +
                                    " failed: " + s.message());
      }
      ++report.warmup_runs;
    }
  }
  if (!plan.timed) return report;
  for (uint32_t i = 0; i < plan.budget.warmup_iterations; ++i) {
    if (Status s = run(*plan.timed); !s.ok()) {
      return Status(s.code(),
                    "self-test warm-up run " + std::to_string(i + 1) + " failed: " + s.message());
    }
    ++report.warmup_runs;
  }
  std::vector<std::chrono::nanoseconds> latencies;
  latencies.reserve(plan.budget.iterations);
  for (uint32_t i = 0; i < plan.budget.iterations; ++i) {
    const auto start = clock.Now();
    Status s = run(*plan.timed);
    const auto end = clock.Now();
    if (!s.ok()) {
      return Status(s.code(),
                    "self-test timed run " + std::to_string(i + 1) + " failed: " + s.message());
    }
    latencies.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(end - start));
  }
  report.figures = ComputeFigures(latencies, plan.batch_size);
  report.misses = CheckBudget(plan.budget, *report.figures);
  return report;
}

}  // namespace fastpath::admission
