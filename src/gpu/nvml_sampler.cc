// The NVML source of GPU telemetry (telemetry.h): libnvidia-ml.so.1 through dlopen, NVML's C
// ABI declared here as in nvml_probe.cc. Only nvmlInit_v2, nvmlShutdown and the device
// enumeration are required; a call the library lacks or that answers NOT_SUPPORTED (a MIG
// slice asked for its temperature) leaves its field unsupported.
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "fastpath/gpu/telemetry.h"
#include "nvml_errors.h"
#include "shared_library.h"

namespace fastpath::gpu {
namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = struct NvmlDeviceOpaque*;
using nvmlEventSet_t = struct NvmlEventSetOpaque*;

struct NvmlUtilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct NvmlEventData {  // nvmlEventData_t
  nvmlDevice_t device;
  unsigned long long event_type;
  unsigned long long event_data;  // the XID for nvmlEventTypeXidCriticalError
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

// nvmlValue_t: what a field value holds, by nvmlValueType_t.
union NvmlValue {
  double d;                // NVML_VALUE_TYPE_DOUBLE = 0
  int si;                  // NVML_VALUE_TYPE_SIGNED_INT = 5
  unsigned int ui;         // NVML_VALUE_TYPE_UNSIGNED_INT = 1
  unsigned long ul;        // NVML_VALUE_TYPE_UNSIGNED_LONG = 2
  unsigned long long ull;  // NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3
  signed long long sll;    // NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4
  unsigned short us;       // NVML_VALUE_TYPE_UNSIGNED_SHORT = 6
};
struct NvmlFieldValue {      // nvmlFieldValue_t
  unsigned int field_id;     // in: an NVML_FI_* id
  unsigned int scope_id;     // in: 0 (a link or other scope for the fields that have one)
  long long timestamp;       // microseconds since 1970
  long long latency_usec;
  int value_type;            // nvmlValueType_t
  nvmlReturn_t nvml_return;  // this field's own answer: `value` holds only on NVML_SUCCESS
  NvmlValue value;
};
static_assert(sizeof(NvmlFieldValue) == 40, "nvmlFieldValue_t is 40 bytes on LP64");

constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kNotSupported = 3;  // NVML_ERROR_NOT_SUPPORTED
constexpr nvmlReturn_t kGpuIsLost = 15;  // NVML_ERROR_GPU_IS_LOST
constexpr int kClockSm = 1;                         // NVML_CLOCK_SM
constexpr int kClockMem = 2;                        // NVML_CLOCK_MEM
constexpr int kTemperatureGpu = 0;                  // NVML_TEMPERATURE_GPU
constexpr int kMemoryErrorUncorrected = 1;          // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatileEcc = 0;                     // NVML_VOLATILE_ECC
constexpr unsigned long long kEventXid = 0x8;       // nvmlEventTypeXidCriticalError
constexpr int kMaxEventsPerPass = 64;

// The perf-policy violation counters, read with nvmlDeviceGetFieldValues: nanoseconds since
// the driver loaded that each policy held the clocks below the application clocks (below the
// base clocks for TOTAL_BASE_CLOCKS). The unit is nvml.h's: nvmlViolationTime_t's
// violationTime "in Nanoseconds" for the same policies, and "All counters are in
// nanoseconds" over the NVML_FI_DEV_CLOCKS_EVENT_REASON_* fields, of which
// NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP is defined as NVML_FI_DEV_PERF_POLICY_POWER.
struct ViolationField {
  unsigned int id;
  const char* policy;  // the key in GpuSample::violation_seconds
};
constexpr std::array<ViolationField, 8> kViolationFields = {{
    {74, "power"},              // NVML_FI_DEV_PERF_POLICY_POWER (nvml.h)
    {75, "thermal"},            // NVML_FI_DEV_PERF_POLICY_THERMAL (nvml.h)
    {76, "sync_boost"},         // NVML_FI_DEV_PERF_POLICY_SYNC_BOOST (nvml.h)
    {77, "board_limit"},        // NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT (nvml.h)
    {78, "low_utilization"},    // NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION (nvml.h)
    {79, "reliability"},        // NVML_FI_DEV_PERF_POLICY_RELIABILITY (nvml.h)
    {80, "total_app_clocks"},   // NVML_FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS (nvml.h)
    {81, "total_base_clocks"},  // NVML_FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS (nvml.h)
}};
constexpr double kNanosecondsPerSecond = 1e9;

// A field value as a non-negative number; nullopt for a negative value or a type NVML did
// not have when this was written.
std::optional<double> FieldNumber(const NvmlFieldValue& f) {
  switch (f.value_type) {
    case 0:
      if (std::isfinite(f.value.d) && f.value.d >= 0) return f.value.d;
      return std::nullopt;
    case 1: return static_cast<double>(f.value.ui);
    case 2: return static_cast<double>(f.value.ul);
    case 3: return static_cast<double>(f.value.ull);
    case 4:
      if (f.value.sll >= 0) return static_cast<double>(f.value.sll);
      return std::nullopt;
    case 5:
      if (f.value.si >= 0) return static_cast<double>(f.value.si);
      return std::nullopt;
    case 6: return static_cast<double>(f.value.us);
    default: return std::nullopt;
  }
}

struct Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned int) = nullptr;
  nvmlReturn_t (*count)(unsigned int*) = nullptr;
  nvmlReturn_t (*by_index)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*by_uuid)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, NvmlUtilization*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, NvmlMemory*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*ecc)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*remapped_rows)(nvmlDevice_t, unsigned int*, unsigned int*, unsigned int*,
                                unsigned int*) = nullptr;
  nvmlReturn_t (*event_set_create)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*event_set_free)(nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*register_events)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*event_wait)(nvmlEventSet_t, NvmlEventData*, unsigned int) = nullptr;
  nvmlReturn_t (*mig_parent)(nvmlDevice_t, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*field_values)(nvmlDevice_t, int, NvmlFieldValue*) = nullptr;
};

template <typename F>
void Bind(const SharedLibrary& lib, F* out, const char* name) {
  *out = lib.Function<F>(name);
}

Api BindApi(const SharedLibrary& lib) {
  Api a;
  Bind(lib, &a.init, "nvmlInit_v2");
  Bind(lib, &a.shutdown, "nvmlShutdown");
  Bind(lib, &a.driver_version, "nvmlSystemGetDriverVersion");
  Bind(lib, &a.count, "nvmlDeviceGetCount_v2");
  Bind(lib, &a.by_index, "nvmlDeviceGetHandleByIndex_v2");
  Bind(lib, &a.by_uuid, "nvmlDeviceGetHandleByUUID");
  Bind(lib, &a.uuid, "nvmlDeviceGetUUID");
  Bind(lib, &a.temperature, "nvmlDeviceGetTemperature");
  Bind(lib, &a.clock, "nvmlDeviceGetClockInfo");
  Bind(lib, &a.utilization, "nvmlDeviceGetUtilizationRates");
  Bind(lib, &a.memory, "nvmlDeviceGetMemoryInfo");
  Bind(lib, &a.power, "nvmlDeviceGetPowerUsage");
  Bind(lib, &a.power_limit, "nvmlDeviceGetEnforcedPowerLimit");
  if (a.power_limit == nullptr) Bind(lib, &a.power_limit, "nvmlDeviceGetPowerManagementLimit");
  // Renamed in CUDA 12.2's NVML; drivers before that only have the throttle name.
  Bind(lib, &a.reasons, "nvmlDeviceGetCurrentClocksEventReasons");
  if (a.reasons == nullptr) Bind(lib, &a.reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  Bind(lib, &a.ecc, "nvmlDeviceGetTotalEccErrors");
  Bind(lib, &a.remapped_rows, "nvmlDeviceGetRemappedRows");
  Bind(lib, &a.event_set_create, "nvmlEventSetCreate");
  Bind(lib, &a.event_set_free, "nvmlEventSetFree");
  Bind(lib, &a.register_events, "nvmlDeviceRegisterEvents");
  Bind(lib, &a.event_wait, "nvmlEventSetWait_v2");
  Bind(lib, &a.mig_parent, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
  Bind(lib, &a.field_values, "nvmlDeviceGetFieldValues");
  return a;
}

// The devices CUDA_VISIBLE_DEVICES names, as NVML indices or UUIDs; nullopt when it is unset.
// Like CUDA, the list ends at the first item that is neither.
std::optional<std::vector<std::string>> VisibleDevices(const ProbeEnvironment& env) {
  if (!env.getenv) return std::nullopt;
  std::optional<std::string> value = env.getenv("CUDA_VISIBLE_DEVICES");
  if (!value) return std::nullopt;
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= value->size()) {
    size_t comma = value->find(',', start);
    if (comma == std::string::npos) comma = value->size();
    std::string item = value->substr(start, comma - start);
    const bool index = !item.empty() && std::all_of(item.begin(), item.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c)) != 0;
    });
    if (!index && item.rfind("GPU-", 0) != 0 && item.rfind("MIG-", 0) != 0) break;
    items.push_back(std::move(item));
    start = comma + 1;
  }
  return items;
}

class NvmlSource final : public GpuSource {
 public:
  NvmlSource(SharedLibrary lib, Api api, std::vector<nvmlDevice_t> devices, std::string driver,
             std::string note)
      : lib_(std::move(lib)),
        api_(api),
        devices_(std::move(devices)),
        driver_(std::move(driver)),
        note_(std::move(note)) {
    for (nvmlDevice_t device : devices_) {
      std::array<char, 96> uuid{};
      if (api_.uuid != nullptr &&
          api_.uuid(device, uuid.data(), static_cast<unsigned>(uuid.size())) == kSuccess) {
        uuid.back() = '\0';
        uuids_.emplace_back(uuid.data());
      } else {
        uuids_.emplace_back();
      }
    }
    // XIDs: one event set over every device that lets itself be registered.
    if (api_.event_set_create != nullptr && api_.register_events != nullptr &&
        api_.event_wait != nullptr && api_.event_set_create(&events_) == kSuccess) {
      for (nvmlDevice_t device : devices_) {
        if (api_.register_events(device, kEventXid, events_) == kSuccess) xid_events_ = true;
      }
    }
  }

  ~NvmlSource() override {
    if (events_ != nullptr && api_.event_set_free != nullptr) (void)api_.event_set_free(events_);
    (void)api_.shutdown();
  }

  std::string Describe() const override {
    return "NVML " + driver_ + " (" + std::to_string(devices_.size()) + " GPU" +
           (devices_.size() == 1 ? "" : "s") + (xid_events_ ? ", XID events" : ", no XID events") +
           (note_.empty() ? "" : "; " + note_) + ")";
  }

  std::vector<GpuSample> Sample(std::chrono::milliseconds /*since_start*/) override {
    std::vector<GpuSample> out(devices_.size());
    // XIDs first: reading a failing GPU's fields may stall, and its XID says why.
    if (xid_events_) {
      for (int n = 0; n < kMaxEventsPerPass; ++n) {
        NvmlEventData event{};
        if (api_.event_wait(events_, &event, 0) != kSuccess) break;  // TIMEOUT: none waiting
        if ((event.event_type & kEventXid) == 0) continue;
        for (size_t i = 0; i < devices_.size(); ++i) {
          if (devices_[i] == event.device) out[i].xids.push_back(event.event_data);
        }
      }
    }
    for (size_t i = 0; i < devices_.size(); ++i) {
      GpuSample& s = out[i];
      nvmlDevice_t d = devices_[i];
      s.gpu = static_cast<int>(i);
      s.uuid = uuids_[i];
      // True when the call answered; a lost GPU is noted, any other error leaves the field
      // unsupported, and a GPU that answers none of its reads is noted too.
      bool answered = false;
      std::string error;
      const auto ok = [&](nvmlReturn_t r) {
        if (r == kGpuIsLost) s.lost = true;
        if (r == kSuccess) answered = true;
        if (r != kSuccess && r != kNotSupported && r != kGpuIsLost && error.empty()) {
          error = NvmlErrorName(r);
        }
        return r == kSuccess;
      };
      unsigned int value = 0;
      if (api_.temperature != nullptr && ok(api_.temperature(d, kTemperatureGpu, &value))) {
        s.temperature_c = value;
      }
      if (api_.clock != nullptr && ok(api_.clock(d, kClockSm, &value))) s.sm_clock_mhz = value;
      if (api_.clock != nullptr && ok(api_.clock(d, kClockMem, &value))) s.mem_clock_mhz = value;
      if (NvmlUtilization u{}; api_.utilization != nullptr && ok(api_.utilization(d, &u))) {
        s.utilization_ratio = u.gpu / 100.0;
      }
      if (NvmlMemory m{}; api_.memory != nullptr && ok(api_.memory(d, &m))) {
        s.memory_used_bytes = m.used;
        s.memory_total_bytes = m.total;
      }
      if (api_.power != nullptr && ok(api_.power(d, &value))) s.power_w = value / 1000.0;
      if (api_.power_limit != nullptr && ok(api_.power_limit(d, &value))) {
        s.power_limit_w = value / 1000.0;
      }
      if (unsigned long long r = 0; api_.reasons != nullptr && ok(api_.reasons(d, &r))) {
        s.clocks_event_reasons = r;
      }
      // NOT_SUPPORTED where ECC is off: unsupported, not zero.
      if (unsigned long long n = 0;
          api_.ecc != nullptr && ok(api_.ecc(d, kMemoryErrorUncorrected, kVolatileEcc, &n))) {
        s.ecc_uncorrected_volatile = n;
      }
      if (unsigned int corrected = 0, uncorrectable = 0, pending = 0, failed = 0;
          api_.remapped_rows != nullptr &&
          ok(api_.remapped_rows(d, &corrected, &uncorrectable, &pending, &failed))) {
        s.remapped_rows_uncorrectable = uncorrectable;
      }
      // One call for every counter; each field answers for itself, and one that does not
      // answer SUCCESS (NOT_SUPPORTED on a GPU without the counter) is left out.
      if (api_.field_values != nullptr) {
        std::array<NvmlFieldValue, kViolationFields.size()> fields{};
        for (size_t f = 0; f < fields.size(); ++f) {
          fields[f].field_id = kViolationFields[f].id;
          fields[f].nvml_return = kNotSupported;  // until the library says otherwise
        }
        if (ok(api_.field_values(d, static_cast<int>(fields.size()), fields.data()))) {
          for (size_t f = 0; f < fields.size(); ++f) {
            if (!ok(fields[f].nvml_return)) continue;
            if (const std::optional<double> ns = FieldNumber(fields[f])) {
              s.violation_seconds[kViolationFields[f].policy] = *ns / kNanosecondsPerSecond;
            }
          }
        }
      }
      if (!answered && !s.lost) s.unanswered = error;
    }
    return out;
  }

 private:
  SharedLibrary lib_;
  Api api_;
  std::vector<nvmlDevice_t> devices_;
  std::vector<std::string> uuids_;
  std::string driver_;
  std::string note_;
  nvmlEventSet_t events_ = nullptr;
  bool xid_events_ = false;
};

}  // namespace

StatusOr<std::unique_ptr<GpuSource>> OpenNvmlSource(const ProbeEnvironment& env) {
  SharedLibrary lib = SharedLibrary::OpenFirst(env.nvml);
  if (!lib.loaded()) return Unavailable("NVML cannot be loaded: " + lib.error());
  const Api api = BindApi(lib);
  if (api.init == nullptr || api.shutdown == nullptr || api.count == nullptr ||
      api.by_index == nullptr) {
    return Unavailable(lib.path() + " lacks nvmlInit_v2, nvmlShutdown or the device enumeration");
  }
  if (nvmlReturn_t r = api.init(); r != kSuccess) {
    return Unavailable("nvmlInit_v2 failed: nvmlReturn_t " + std::to_string(r));
  }
  auto fail = [&](const std::string& why) {
    (void)api.shutdown();
    return Unavailable(why);
  };
  unsigned int count = 0;
  if (nvmlReturn_t r = api.count(&count); r != kSuccess) {
    return fail("nvmlDeviceGetCount_v2 failed: nvmlReturn_t " + std::to_string(r));
  }
  std::vector<nvmlDevice_t> devices;
  std::string note;  // where CUDA_VISIBLE_DEVICES was cut, and why
  if (auto visible = VisibleDevices(env)) {
    for (const std::string& item : *visible) {
      nvmlDevice_t device = nullptr;
      const nvmlReturn_t r =
          std::isdigit(static_cast<unsigned char>(item[0])) != 0
              ? api.by_index(static_cast<unsigned>(std::strtoul(item.c_str(), nullptr, 10)), &device)
              : (api.by_uuid != nullptr ? api.by_uuid(item.c_str(), &device) : 3);
      // Like CUDA, the list ends at an item it cannot resolve: the devices before it are still
      // the process's, and are watched. It ends too at one naming a GPU named before (two
      // MIG slices of one board, an index and its UUID), which would be watched twice.
      if (r != kSuccess) {
        const std::string why = "CUDA_VISIBLE_DEVICES names " + item +
                                ", which NVML cannot find (nvmlReturn_t " + std::to_string(r) + ")";
        if (devices.empty()) return fail(why);
        note = why + ": the list ends there, as CUDA's does";
        break;
      }
      // A MIG device is read through its parent: the board's temperature, clocks, ECC, XIDs.
      if (nvmlDevice_t parent = nullptr; item.rfind("MIG-", 0) == 0 && api.mig_parent != nullptr &&
                                         api.mig_parent(device, &parent) == kSuccess) {
        device = parent;
      }
      if (std::find(devices.begin(), devices.end(), device) != devices.end()) {
        note = "CUDA_VISIBLE_DEVICES names " + item +
               ", a GPU named before it, which is watched once: the list ends there";
        break;
      }
      devices.push_back(device);
    }
  } else {
    for (unsigned int i = 0; i < count; ++i) {
      nvmlDevice_t device = nullptr;
      if (nvmlReturn_t r = api.by_index(i, &device); r != kSuccess) {
        return fail("nvmlDeviceGetHandleByIndex_v2(" + std::to_string(i) +
                    ") failed: nvmlReturn_t " + std::to_string(r));
      }
      devices.push_back(device);
    }
  }
  if (devices.empty()) return fail("NVML shows no GPU");
  std::string driver = "driver unknown";
  if (api.driver_version != nullptr) {
    std::array<char, 96> version{};
    if (api.driver_version(version.data(), static_cast<unsigned>(version.size())) == kSuccess) {
      version.back() = '\0';
      driver = std::string("driver ") + version.data();
    }
  }
  return std::unique_ptr<GpuSource>(
      new NvmlSource(std::move(lib), api, std::move(devices), std::move(driver), std::move(note)));
}

}  // namespace fastpath::gpu
