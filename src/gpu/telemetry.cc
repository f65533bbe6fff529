// GPU telemetry: the trace source, the health fold and the JSON (telemetry.h). The NVML
// source is in nvml_sampler.cc.
#include "fastpath/gpu/telemetry.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "fastpath/common/json.h"

namespace fastpath::gpu {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

// Label names of the clock-event reason bits, lowest first (see kClockEventReasonNames in
// nvml_probe.cc for what each bit is).
constexpr std::array<const char*, 9> kReasonLabels = {
    "gpu_idle",   "applications_clocks", "sw_power_cap",   "hw_slowdown",  "sync_boost",
    "sw_thermal", "hw_thermal",          "hw_power_brake", "display_clock"};

// The causes of ThrottleCauses, in its order.
constexpr std::array<const char*, 3> kCauses = {"thermal", "power", "reliability"};

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// What an XID means, for the few that announce a failing GPU (NVIDIA's XID catalogue).
std::string XidMeaning(uint64_t xid) {
  switch (xid) {
    case 48: return "double-bit ECC error";
    case 63: return "ECC page retirement or row remapping recorded";
    case 64: return "ECC page retirement or row remapping failed";
    case 74: return "NVLink error";
    case 79: return "GPU has fallen off the bus";
    case 92: return "high single-bit ECC error rate";
    case 94: return "contained ECC error";
    case 95: return "uncontained ECC error";
    case 119: return "GSP RPC timeout";
    case 120: return "GSP error";
    default: return "";
  }
}

void Number(Writer& w, const char* key, const std::optional<double>& value) {
  w.Key(key);
  if (value) {
    w.Double(*value);
  } else {
    w.Null();
  }
}

void Unsigned(Writer& w, const char* key, const std::optional<uint64_t>& value) {
  w.Key(key);
  if (value) {
    w.Uint64(*value);
  } else {
    w.Null();
  }
}

void String(Writer& w, const char* key, const std::string& value) {
  w.Key(key);
  w.String(value.c_str(), static_cast<rapidjson::SizeType>(value.size()));
}

// --- the trace ---

struct TraceLine {
  std::chrono::milliseconds t{0};
  GpuSample sample;  // `xids` holds this line's one XID, if any
};

// Reads one member of a trace line into `sample`; an error names the field.
Status ReadField(const std::string& name, const rapidjson::Value& value, TraceLine* line) {
  GpuSample& s = line->sample;
  auto number = [&](std::optional<double>* out) -> Status {
    if (!value.IsNumber() || value.GetDouble() < 0) {
      return InvalidArgument("\"" + name + "\" must be a non-negative number");
    }
    *out = value.GetDouble();
    return Status::Ok();
  };
  auto count = [&](std::optional<uint64_t>* out) -> Status {
    if (!value.IsUint64()) {
      return InvalidArgument("\"" + name + "\" must be a non-negative integer");
    }
    *out = value.GetUint64();
    return Status::Ok();
  };
  if (name == "t_ms") {
    if (!value.IsUint64()) return InvalidArgument("\"t_ms\" must be a non-negative integer");
    line->t = std::chrono::milliseconds(static_cast<int64_t>(value.GetUint64()));
    return Status::Ok();
  }
  if (name == "gpu") {
    if (!value.IsUint() || value.GetUint() > 63) {
      return InvalidArgument("\"gpu\" must be an integer from 0 to 63");
    }
    s.gpu = static_cast<int>(value.GetUint());
    return Status::Ok();
  }
  if (name == "uuid") {
    if (!value.IsString()) return InvalidArgument("\"uuid\" must be a string");
    s.uuid = value.GetString();
    return Status::Ok();
  }
  if (name == "temperature_c") return number(&s.temperature_c);
  if (name == "sm_clock_mhz") return number(&s.sm_clock_mhz);
  if (name == "mem_clock_mhz") return number(&s.mem_clock_mhz);
  if (name == "power_w") return number(&s.power_w);
  if (name == "power_limit_w") return number(&s.power_limit_w);
  if (name == "utilization_ratio") {
    FASTPATH_RETURN_IF_ERROR(number(&s.utilization_ratio));
    if (*s.utilization_ratio > 1) return InvalidArgument("\"utilization_ratio\" must be 0..1");
    return Status::Ok();
  }
  if (name == "memory_used_bytes") return count(&s.memory_used_bytes);
  if (name == "memory_total_bytes") return count(&s.memory_total_bytes);
  if (name == "ecc_uncorrected_volatile") return count(&s.ecc_uncorrected_volatile);
  if (name == "remapped_rows_uncorrectable") return count(&s.remapped_rows_uncorrectable);
  if (name == "clocks_event_reasons") {
    // An integer, or a string in hex as nvidia-smi prints it ("0x40").
    if (value.IsUint64()) {
      s.clocks_event_reasons = value.GetUint64();
      return Status::Ok();
    }
    if (value.IsString()) {
      const std::string text = value.GetString();
      char* end = nullptr;
      const unsigned long long mask = std::strtoull(text.c_str(), &end, 16);
      if (text.size() > 2 && text.compare(0, 2, "0x") == 0 && end != nullptr && *end == '\0') {
        s.clocks_event_reasons = mask;
        return Status::Ok();
      }
    }
    return InvalidArgument(
        "\"clocks_event_reasons\" must be a bit mask: a non-negative integer or a hex string "
        "such as \"0x40\"");
  }
  if (name == "violation_s") {
    // NVML's cumulative violation counters, in seconds, by policy: {"thermal": 12.5, ...}.
    if (!value.IsObject()) {
      return InvalidArgument(
          "\"violation_s\" must be an object of seconds by policy, such as {\"thermal\": 12.5}");
    }
    const std::vector<std::string>& policies = ViolationPolicies();
    for (const auto& member : value.GetObject()) {
      const std::string policy(member.name.GetString(), member.name.GetStringLength());
      if (std::find(policies.begin(), policies.end(), policy) == policies.end()) {
        return InvalidArgument("unknown key \"" + policy + "\" in \"violation_s\" (known: " +
                               Joined(policies) + ")");
      }
      if (!member.value.IsNumber() || member.value.GetDouble() < 0) {
        return InvalidArgument("\"violation_s\": \"" + policy +
                               "\" must be a non-negative number (seconds)");
      }
      s.violation_seconds[policy] = member.value.GetDouble();
    }
    return Status::Ok();
  }
  if (name == "lost") {
    if (!value.IsBool()) return InvalidArgument("\"lost\" must be true or false");
    s.lost = value.GetBool();
    return Status::Ok();
  }
  if (name == "unanswered") {
    if (!value.IsString() || value.GetStringLength() == 0) {
      return InvalidArgument(
          "\"unanswered\" must be NVML's error for the reads, such as \"NVML_ERROR_UNKNOWN\"");
    }
    s.unanswered.assign(value.GetString(), value.GetStringLength());
    return Status::Ok();
  }
  if (name == "xid") {
    if (value.IsNull()) return Status::Ok();
    if (!value.IsUint64() || value.GetUint64() == 0) {
      return InvalidArgument("\"xid\" must be a positive integer (or null)");
    }
    s.xids.push_back(value.GetUint64());
    return Status::Ok();
  }
  return InvalidArgument(
      "unknown field \"" + name +
      "\" (known: t_ms, gpu, uuid, temperature_c, sm_clock_mhz, mem_clock_mhz, "
      "utilization_ratio, memory_used_bytes, memory_total_bytes, power_w, power_limit_w, "
      "clocks_event_reasons, ecc_uncorrected_volatile, remapped_rows_uncorrectable, "
      "violation_s, xid, lost, unanswered)");
}

class TraceSource final : public GpuSource {
 public:
  TraceSource(std::string file, std::map<int, std::vector<TraceLine>> lines)
      : file_(std::move(file)), lines_(std::move(lines)) {}

  std::string Describe() const override { return "trace " + file_; }

  std::vector<GpuSample> Sample(std::chrono::milliseconds since_start) override {
    std::vector<GpuSample> out;
    for (auto& [gpu, lines] : lines_) {
      size_t& next = next_[gpu];
      std::vector<uint64_t> xids;
      const TraceLine* latest = next > 0 ? &lines[next - 1] : nullptr;
      while (next < lines.size() && lines[next].t <= since_start) {
        latest = &lines[next];
        xids.insert(xids.end(), latest->sample.xids.begin(), latest->sample.xids.end());
        ++next;
      }
      if (latest == nullptr) continue;  // the trace has not reached this GPU yet
      GpuSample sample = latest->sample;
      sample.xids = std::move(xids);  // each XID once, on the pass that reaches its line
      out.push_back(std::move(sample));
    }
    return out;
  }

 private:
  std::string file_;
  std::map<int, std::vector<TraceLine>> lines_;  // by GPU, in time order
  std::map<int, size_t> next_;                   // the first line not played yet
};

}  // namespace

StatusOr<std::unique_ptr<GpuSource>> OpenTraceSource(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return NotFound("GPU trace " + file.string() + " cannot be read");
  std::map<int, std::vector<TraceLine>> lines;
  std::string text;
  size_t number = 0;
  size_t count = 0;
  while (std::getline(in, text)) {
    ++number;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto bad = [&](const std::string& why) {
      return InvalidArgument("GPU trace " + file.string() + " line " + std::to_string(number) +
                             ": " + why);
    };
    rapidjson::Document doc;
    if (const std::string error = json::ParseBounded(&doc, text); !error.empty()) {
      return bad("not JSON: " + error);
    }
    if (!doc.IsObject()) return bad("not a JSON object");
    TraceLine line;
    bool has_time = false;
    for (const auto& member : doc.GetObject()) {
      const std::string name(member.name.GetString(), member.name.GetStringLength());
      has_time = has_time || name == "t_ms";
      if (Status s = ReadField(name, member.value, &line); !s.ok()) return bad(s.message());
    }
    if (!has_time) return bad("\"t_ms\" is missing");
    std::vector<TraceLine>& of_gpu = lines[line.sample.gpu];
    // A GPU keeps its UUID: said once, it holds for the GPU's later lines.
    if (line.sample.uuid.empty() && !of_gpu.empty()) line.sample.uuid = of_gpu.back().sample.uuid;
    if (!of_gpu.empty() && line.t < of_gpu.back().t) {
      return bad("t_ms " + std::to_string(line.t.count()) + " is before the previous line of gpu " +
                 std::to_string(line.sample.gpu) + " (" +
                 std::to_string(of_gpu.back().t.count()) + ")");
    }
    of_gpu.push_back(std::move(line));
    ++count;
  }
  if (count == 0) return InvalidArgument("GPU trace " + file.string() + " has no samples");
  return std::unique_ptr<GpuSource>(new TraceSource(file.string(), std::move(lines)));
}

namespace {

void WriteTraceLine(const GpuSample& s, std::chrono::milliseconds t, const uint64_t* xid,
                    std::string* out) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("t_ms");
  w.Int64(t.count());
  w.Key("gpu");
  w.Int(s.gpu);
  if (!s.uuid.empty()) String(w, "uuid", s.uuid);
  // Unsupported fields are left out, which is how a trace says "unsupported".
  auto number = [&](const char* key, const std::optional<double>& v) {
    if (v) Number(w, key, v);
  };
  auto count = [&](const char* key, const std::optional<uint64_t>& v) {
    if (v) Unsigned(w, key, v);
  };
  number("temperature_c", s.temperature_c);
  number("sm_clock_mhz", s.sm_clock_mhz);
  number("mem_clock_mhz", s.mem_clock_mhz);
  number("utilization_ratio", s.utilization_ratio);
  count("memory_used_bytes", s.memory_used_bytes);
  count("memory_total_bytes", s.memory_total_bytes);
  number("power_w", s.power_w);
  number("power_limit_w", s.power_limit_w);
  count("clocks_event_reasons", s.clocks_event_reasons);
  count("ecc_uncorrected_volatile", s.ecc_uncorrected_volatile);
  count("remapped_rows_uncorrectable", s.remapped_rows_uncorrectable);
  if (!s.violation_seconds.empty()) {
    w.Key("violation_s");
    w.StartObject();
    for (const auto& [policy, seconds] : s.violation_seconds) {
      w.Key(policy.c_str(), static_cast<rapidjson::SizeType>(policy.size()));
      w.Double(seconds);
    }
    w.EndObject();
  }
  if (xid != nullptr) Unsigned(w, "xid", *xid);
  if (s.lost) {
    w.Key("lost");
    w.Bool(true);
  }
  if (!s.unanswered.empty()) String(w, "unanswered", s.unanswered);
  w.EndObject();
  if (!out->empty()) out->push_back('\n');
  out->append(buffer.GetString(), buffer.GetSize());
}

}  // namespace

std::string SampleToTraceLines(const GpuSample& sample, std::chrono::milliseconds t) {
  std::string out;
  if (sample.xids.empty()) WriteTraceLine(sample, t, nullptr, &out);
  for (const uint64_t& xid : sample.xids) WriteTraceLine(sample, t, &xid, &out);
  return out;
}

std::set<uint64_t> DefaultIgnoredXids() { return {13, 31, 43, 45, 68, 109}; }

StatusOr<std::set<uint64_t>> ParseXidList(const std::string& text) {
  std::set<uint64_t> out;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t first = item.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    const size_t last = item.find_last_not_of(' ');
    uint64_t xid = 0;
    const auto [ptr, ec] = std::from_chars(item.data() + first, item.data() + last + 1, xid);
    if (ec != std::errc() || ptr != item.data() + last + 1 || xid == 0) {
      return InvalidArgument("'" + item + "' is not an XID (a positive integer)");
    }
    out.insert(xid);
  }
  return out;
}

std::vector<int> GpuHealth::Add(const std::vector<GpuSample>& samples,
                                std::chrono::milliseconds at) {
  std::vector<int> newly;
  for (const GpuSample& sample : samples) {
    auto [it, first] = gpus_.try_emplace(sample.gpu);
    GpuStatus& status = it->second;
    status.gpu = sample.gpu;
    if (!first && at > status.last_sample_at) {
      const double seconds =
          std::chrono::duration<double>(at - status.last_sample_at).count();
      const GpuSample& then = status.last;
      // The reasons of the previous sample held for the whole interval.
      std::vector<std::string> held;
      if (then.clocks_event_reasons) {
        for (int bit = 0; bit < 64; ++bit) {
          if ((*then.clocks_event_reasons >> bit) & 1) status.throttle_seconds[bit] += seconds;
        }
        held = ThrottleCauses(*then.clocks_event_reasons);
      }
      for (const char* cause : kCauses) {
        double add = std::find(held.begin(), held.end(), cause) != held.end() ? seconds : 0.0;
        // NVML's counter, where both samples carry it and no reason it does not time held.
        if (const std::optional<CauseCounter> counter = CounterOfCause(cause)) {
          const auto before = then.violation_seconds.find(counter->policy);
          const auto now = sample.violation_seconds.find(counter->policy);
          if (before != then.violation_seconds.end() && now != sample.violation_seconds.end() &&
              (then.clocks_event_reasons.value_or(0) & counter->untimed_reasons) == 0) {
            // Never negative (a driver reload restarts it). Not capped at the interval
            // either: a counter the driver updates more coarsely than we sample, or read
            // late in a slow pass, moves in steps larger than one interval, and the excess
            // is throttle time all the same.
            add = std::max(now->second - before->second, 0.0);
          }
        }
        if (add > 0) status.cause_seconds[cause] += add;
      }
    }
    status.last = sample;
    status.last_sample_at = at;
    std::string why;
    for (uint64_t xid : sample.xids) {
      ++status.xid_counts[xid];
      if (why.empty() && ignored_xids_.count(xid) == 0) {
        const std::string meaning = XidMeaning(xid);
        why = "critical XID " + std::to_string(xid) + (meaning.empty() ? "" : " (" + meaning + ")");
      }
    }
    if (why.empty() && sample.lost) {
      why = "the GPU is lost (NVML_ERROR_GPU_IS_LOST: it fell off the bus or stopped answering)";
    }
    if (sample.unanswered.empty()) {
      status.unanswered_in_a_row = 0;
    } else if (status.unanswered_in_a_row++ == 0) {
      status.unanswered_since = at;
    }
    if (why.empty() && status.unanswered_in_a_row >= kUnansweredInARow &&
        at - status.unanswered_since >= kUnansweredFor) {
      why = "NVML answered none of the GPU's reads in " +
            std::to_string(status.unanswered_in_a_row) + " samples in a row over " +
            std::to_string((at - status.unanswered_since).count() / 1000) + " s (" +
            sample.unanswered +
            "): it may have fallen off the bus (look for an XID in the kernel log); its "
            "temperature, clocks and ECC can no longer be watched";
    }
    if (why.empty() && sample.ecc_uncorrected_volatile.value_or(0) > 0) {
      why = std::to_string(*sample.ecc_uncorrected_volatile) +
            " uncorrected ECC error(s) since the driver loaded (volatile count)";
    }
    if (!why.empty() && status.quarantined.empty()) {
      status.quarantined = why;
      any_quarantined_ = true;
      newly.push_back(sample.gpu);
    }
  }
  return newly;
}

std::vector<int> GpuHealth::QuarantineAll(const std::string& why) {
  std::vector<int> newly;
  for (auto& [gpu, status] : gpus_) {
    if (!status.quarantined.empty()) continue;
    status.quarantined = why;
    any_quarantined_ = true;
    newly.push_back(gpu);
  }
  return newly;
}

std::vector<GpuStatus> GpuHealth::Statuses() const {
  std::vector<GpuStatus> out;
  out.reserve(gpus_.size());
  for (const auto& [gpu, status] : gpus_) out.push_back(status);
  return out;
}

std::vector<std::string> ThrottleCauses(uint64_t reasons) {
  constexpr uint64_t kSwPowerCap = 0x4, kHwSlowdown = 0x8, kSwThermal = 0x20, kHwThermal = 0x40,
                     kHwPowerBrake = 0x80;
  std::vector<std::string> causes;
  if (reasons & (kSwThermal | kHwThermal)) causes.emplace_back("thermal");
  if (reasons & (kSwPowerCap | kHwPowerBrake)) causes.emplace_back("power");
  if ((reasons & kHwSlowdown) && !(reasons & (kHwThermal | kHwPowerBrake))) {
    causes.emplace_back("reliability");
  }
  return causes;
}

std::optional<CauseCounter> CounterOfCause(const std::string& cause) {
  // What nvml.h says the perf-policy counters time:
  //  - NVML_FI_DEV_PERF_POLICY_POWER is the very id of
  //    NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP ("throttling to not exceed currently set
  //    power limits"): SW power cap (0x4), not HW power brake (0x80, an external signal that
  //    newer NVMLs count in a field of its own).
  //  - NVML_PERF_POLICY_THERMAL translates to NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN
  //    (nvmlDeviceGetViolationStatus's deprecation note, NVML 13): SW thermal slowdown (0x20),
  //    not HW thermal slowdown (0x40, again a field of its own in newer NVMLs).
  //  - BOARD_LIMIT and RELIABILITY are only "the board limit" and "the board reliability
  //    limit" there, tied to no clock-event reason: neither is taken for the power limit or
  //    for HW slowdown, so the "reliability" cause (HW slowdown alone) keeps the samples and
  //    both counters are only exported. SYNC_BOOST and LOW_UTILIZATION are settings or rest,
  //    not throttling; TOTAL_APP_CLOCKS adds them in; TOTAL_BASE_CLOCKS names no cause.
  // The HW reasons' own fields (NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_*) are not read: their ids
  // changed from NVML 13.0 (251-253) to 13.1 (269-271).
  constexpr uint64_t kHwThermal = 0x40, kHwPowerBrake = 0x80;
  if (cause == "thermal") return CauseCounter{"thermal", kHwThermal};
  if (cause == "power") return CauseCounter{"power", kHwPowerBrake};
  return std::nullopt;
}

const std::vector<std::string>& ViolationPolicies() {
  static const std::vector<std::string> policies = {
      "power",           "thermal",     "sync_boost",       "board_limit",
      "low_utilization", "reliability", "total_app_clocks", "total_base_clocks"};
  return policies;
}

std::string ClockEventReasonLabel(int bit) {
  if (bit >= 0 && static_cast<size_t>(bit) < kReasonLabels.size()) return kReasonLabels[bit];
  return "bit_" + std::to_string(bit);
}

std::vector<int> NamedClockEventReasonBits() {
  std::vector<int> bits;
  for (size_t bit = 0; bit < kReasonLabels.size(); ++bit) bits.push_back(static_cast<int>(bit));
  return bits;
}

std::string StatusToJson(const GpuStatus& status) {
  const GpuSample& s = status.last;
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("gpu");
  w.Int(status.gpu);
  String(w, "uuid", s.uuid);
  w.Key("sampled_at_ms");
  w.Int64(status.last_sample_at.count());
  Number(w, "temperature_c", s.temperature_c);
  Number(w, "sm_clock_mhz", s.sm_clock_mhz);
  Number(w, "mem_clock_mhz", s.mem_clock_mhz);
  Number(w, "utilization_ratio", s.utilization_ratio);
  Unsigned(w, "memory_used_bytes", s.memory_used_bytes);
  Unsigned(w, "memory_total_bytes", s.memory_total_bytes);
  Number(w, "power_w", s.power_w);
  Number(w, "power_limit_w", s.power_limit_w);
  w.Key("clocks_event_reasons");
  if (s.clocks_event_reasons) {
    w.StartArray();
    for (const std::string& name : DecodeClockEventReasons(*s.clocks_event_reasons)) {
      w.String(name.c_str(), static_cast<rapidjson::SizeType>(name.size()));
    }
    w.EndArray();
  } else {
    w.Null();
  }
  Unsigned(w, "ecc_uncorrected_volatile", s.ecc_uncorrected_volatile);
  Unsigned(w, "remapped_rows_uncorrectable", s.remapped_rows_uncorrectable);
  w.Key("throttle_seconds");
  w.StartObject();
  for (const auto& [bit, seconds] : status.throttle_seconds) {
    const std::string label = ClockEventReasonLabel(bit);
    w.Key(label.c_str(), static_cast<rapidjson::SizeType>(label.size()));
    w.Double(seconds);
  }
  w.EndObject();
  w.Key("violation_seconds");
  if (s.violation_seconds.empty()) {
    w.Null();
  } else {
    w.StartObject();
    for (const auto& [policy, seconds] : s.violation_seconds) {
      w.Key(policy.c_str(), static_cast<rapidjson::SizeType>(policy.size()));
      w.Double(seconds);
    }
    w.EndObject();
  }
  w.Key("xids");
  w.StartObject();
  for (const auto& [xid, n] : status.xid_counts) {
    const std::string key = std::to_string(xid);
    w.Key(key.c_str(), static_cast<rapidjson::SizeType>(key.size()));
    w.Uint64(n);
  }
  w.EndObject();
  w.Key("unanswered");  // NVML's error when it answered none of the last sample's reads
  if (s.unanswered.empty()) {
    w.Null();
  } else {
    w.String(s.unanswered.c_str(), static_cast<rapidjson::SizeType>(s.unanswered.size()));
  }
  w.Key("quarantined");
  if (status.quarantined.empty()) {
    w.Null();
  } else {
    w.String(status.quarantined.c_str(), static_cast<rapidjson::SizeType>(status.quarantined.size()));
  }
  w.EndObject();
  return buffer.GetString();
}

}  // namespace fastpath::gpu
