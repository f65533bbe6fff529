// GPU telemetry while serving (issue 14 §1, §2, §5): samples of every GPU the server was
// given, from NVML or replayed from a trace file, and what they add up to: throttle time per
// clock-event reason, XID counts, and the quarantine that an uncorrected ECC error or a
// critical XID puts a GPU in. Pure logic and dlopen only, like the rest of the gpu module:
// no link-time dependency on NVML, and everything is driven by tests through a trace.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fastpath/common/status.h"
#include "fastpath/gpu/capability_snapshot.h"

namespace fastpath::gpu {

// One GPU at one moment. A value the device does not support (a MIG slice has no
// temperature of its own, an old driver no clock-event reasons) stays nullopt:
// "unsupported", never zero.
struct GpuSample {
  int gpu = 0;       // the index among the GPUs the server was given (CUDA's order)
  std::string uuid;  // "GPU-..." when known
  std::optional<double> temperature_c;
  std::optional<double> sm_clock_mhz;
  std::optional<double> mem_clock_mhz;
  std::optional<double> utilization_ratio;  // 0..1, of the last sample period
  std::optional<uint64_t> memory_used_bytes;
  std::optional<uint64_t> memory_total_bytes;
  std::optional<double> power_w;
  std::optional<double> power_limit_w;
  std::optional<uint64_t> clocks_event_reasons;  // nvmlDeviceGetCurrentClocksEventReasons
  static constexpr uint64_t kGpuIdle = 0x1;      // its nvmlClocksEventReasonGpuIdle bit
  std::optional<uint64_t> ecc_uncorrected_volatile;  // since the driver loaded
  std::optional<uint64_t> remapped_rows_uncorrectable;
  std::vector<uint64_t> xids;  // XID events since the previous sample, in order
  bool lost = false;  // NVML answered GPU_IS_LOST: off the bus, or no longer answering
  // NVML's error when it answered none of the GPU's reads, every one failing with an error other
  // than NOT_SUPPORTED or GPU_IS_LOST (the first: "NVML_ERROR_UNKNOWN", as after an XID 79 on
  // some drivers); empty when any read answered. GpuHealth quarantines a GPU after
  // GpuHealth::kUnansweredInARow such samples.
  std::string unanswered;
  // NVML's perf-policy violation counters (nvmlDeviceGetFieldValues, NVML_FI_DEV_PERF_POLICY_*):
  // cumulative seconds since the driver loaded that each policy held the clocks below the
  // application clocks (below the base clocks for "total_base_clocks"), keyed by
  // ViolationPolicies(). Only the counters the device supports are present; empty when none is.
  std::map<std::string, double> violation_seconds;
};

// The keys of GpuSample::violation_seconds, in NVML's order (NVML_FI_DEV_PERF_POLICY_POWER ..
// _TOTAL_BASE_CLOCKS): "power", "thermal", "sync_boost", "board_limit", "low_utilization",
// "reliability", "total_app_clocks", "total_base_clocks".
const std::vector<std::string>& ViolationPolicies();

// Where samples come from. Sample() is called from one thread, with the time since the
// telemetry started.
class GpuSource {
 public:
  virtual ~GpuSource() = default;
  virtual std::string Describe() const = 0;  // "NVML 580.65.06 (2 GPUs)", "trace f.jsonl"
  virtual std::vector<GpuSample> Sample(std::chrono::milliseconds since_start) = 0;
};

// NVML through dlopen (libnvidia-ml.so.1), kept initialized while the source lives. Every
// device NVML shows is sampled (inside a container: the ones it was given); with
// CUDA_VISIBLE_DEVICES as a list of indices, those devices only, in that order. XIDs come
// from an NVML event set where the driver supports one. A MIG device (MIG-<uuid>) is read
// through its parent GPU: temperature, clocks, power, ECC and XIDs are the whole board's.
// Fails when NVML cannot be loaded or initialized or shows no GPU.
StatusOr<std::unique_ptr<GpuSource>> OpenNvmlSource(const ProbeEnvironment& env);

// A JSON-lines trace: one object per line, {"t_ms": N, "gpu": N, "uuid", "temperature_c",
// "sm_clock_mhz", "mem_clock_mhz", "utilization_ratio", "memory_used_bytes",
// "memory_total_bytes", "power_w", "power_limit_w", "clocks_event_reasons",
// "ecc_uncorrected_volatile", "remapped_rows_uncorrectable", "violation_s", "xid", "lost",
// "unanswered"}
// ("violation_s": {"thermal": 12.5, ...}, GpuSample::violation_seconds, its keys among
// ViolationPolicies()); only t_ms is
// required (gpu defaults to 0), a field left out is unsupported (but "uuid", once given,
// holds for the GPU's later lines), a line's "xid" is one XID event at that moment, and
// "lost": true is NVML answering GPU_IS_LOST, "unanswered": "NVML_ERROR_UNKNOWN" NVML
// answering none of the reads (GpuSample::unanswered). Played against the time since start: each
// GPU's sample is its last line with t_ms <= that time. A line that is not such an object (unknown
// field, wrong type, t_ms going backwards for its GPU) fails the whole file with the line's number.
StatusOr<std::unique_ptr<GpuSource>> OpenTraceSource(const std::filesystem::path& file);

// One sample as trace lines (what doctor --record-gpu-trace writes): one line, or one per
// XID when the sample has several, each with the whole sample; no final newline.
std::string SampleToTraceLines(const GpuSample& sample, std::chrono::milliseconds t);

// The XIDs that are the application's fault, not the GPU's, and never quarantine: the
// Kubernetes device plugin's list (13 graphics engine exception, 31 MMU fault, 43 GPU
// stopped processing, 45 preemptive cleanup, 68 NVDEC0 exception, 109 context switch timeout).
std::set<uint64_t> DefaultIgnoredXids();
// "13,31,..." -> the set; InvalidArgument naming the item that is not a number.
StatusOr<std::set<uint64_t>> ParseXidList(const std::string& text);

// What the samples of one GPU add up to.
struct GpuStatus {
  int gpu = 0;
  GpuSample last;  // the latest sample
  std::chrono::milliseconds last_sample_at{0};  // since start
  // Seconds each reason bit was active (bit -> seconds), integrated between samples: the
  // reasons of a sample hold until the next. Bits never seen active are absent.
  std::map<int, double> throttle_seconds;
  // The same per cause of slowdown (ThrottleCauses): seconds in which any of its reasons held.
  // Where two samples in a row carry NVML's violation counter for a cause (CauseCounter), the
  // cause grows by the counter's increase instead, which sees episodes shorter than the
  // sampling interval; see GpuHealth::Add.
  std::map<std::string, double> cause_seconds;
  std::map<uint64_t, uint64_t> xid_counts;  // XID -> events seen
  int unanswered_in_a_row = 0;              // samples, up to the latest (GpuSample::unanswered)
  std::chrono::milliseconds unanswered_since{0};  // the first of them
  // Why the GPU must be drained; empty while it is healthy. Never cleared: only a restart
  // (a new GPU reset, a new driver) can tell it is healthy again.
  std::string quarantined;
};

// Folds samples into statuses. Not thread-safe: the owner locks.
class GpuHealth {
 public:
  // Samples in a row in which NVML answered none of a GPU's reads (GpuSample::unanswered),
  // over at least kUnansweredFor, that quarantine it. One could be a hiccup; three over two
  // seconds (at the default 1 s sampling) are a GPU that stopped answering, whose
  // temperature, clocks, ECC and XIDs nobody can see. Time as well as samples, so that fast
  // sampling does not turn a short NVML hiccup into a quarantine.
  static constexpr int kUnansweredInARow = 3;
  static constexpr std::chrono::milliseconds kUnansweredFor{2000};

  explicit GpuHealth(std::set<uint64_t> ignored_xids = DefaultIgnoredXids())
      : ignored_xids_(std::move(ignored_xids)) {}
  // Adds one pass of samples taken at `at` (since start). Returns the GPUs that this pass
  // put into quarantine, with the reason in their status.
  //
  // Throttle time between a GPU's previous sample and this one: every reason bit set in the
  // previous sample gets the whole interval (throttle_seconds), and so does each of their
  // causes, except a cause whose NVML counter (CauseCounter) both samples carry: it gets the
  // counter's increase, never negative (a counter going back, as after a driver reload,
  // adds nothing) and not capped at the interval (a coarsely updated counter moves in larger
  // steps). The counters do not see every reason of their cause (thermal's
  // counter is SW thermal slowdown's, power's is SW power cap's), so while the previous
  // sample shows a reason the counter misses (HW thermal slowdown, HW power brake) the cause
  // gets the whole interval, as without a counter.
  std::vector<int> Add(const std::vector<GpuSample>& samples, std::chrono::milliseconds at);
  // Quarantines, for `why`, every GPU sampled so far that is not yet. Returns those. For
  // what no sample can say: a pass of reads that never returns.
  std::vector<int> QuarantineAll(const std::string& why);
  std::vector<GpuStatus> Statuses() const;  // by GPU index
  bool AnyQuarantined() const { return any_quarantined_; }

 private:
  std::set<uint64_t> ignored_xids_;
  std::map<int, GpuStatus> gpus_;
  bool any_quarantined_ = false;
};

// The causes of slowdown the clock-event reasons name, as the drift detector reports them:
// "thermal" (SW or HW thermal slowdown), "power" (SW power cap, HW power brake) and
// "reliability" (HW slowdown without HW thermal or power brake, which raise it too).
std::vector<std::string> ThrottleCauses(uint64_t reasons);

// The violation counter (a key of GpuSample::violation_seconds) that times a cause of
// ThrottleCauses, and the clock-event reason bits of that cause it does not time; nullopt for
// a cause no counter times ("reliability": HW slowdown is no NVML perf policy).
struct CauseCounter {
  std::string policy;
  uint64_t untimed_reasons = 0;
};
std::optional<CauseCounter> CounterOfCause(const std::string& cause);

// The name of a clock-event reason bit for metrics labels: "gpu_idle", "sw_power_cap",
// "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake", ...; "bit_N" for bits
// without a name.
std::string ClockEventReasonLabel(int bit);
// The bits with names, lowest first: what fastpath_gpu_clocks_event_active shows for each.
std::vector<int> NamedClockEventReasonBits();

// {"gpu", "uuid", "sampled_at_ms", "temperature_c", ..., "clocks_event_reasons":
//  ["HW thermal slowdown", ...], "throttle_seconds": {"hw_thermal": s, ...},
//  "violation_seconds": {"thermal": s, ...} (NVML's counters of the last sample; null when
//  it has none),
//  "xids": {"79": n}, "unanswered": "NVML_ERROR_UNKNOWN" | null, "quarantined": reason | null}; an
//  unsupported field is null, as in
// the capability snapshot.
std::string StatusToJson(const GpuStatus& status);

}  // namespace fastpath::gpu
