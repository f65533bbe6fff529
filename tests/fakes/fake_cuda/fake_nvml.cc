// A fake libnvidia-ml.so.1 for the NVML probe, configured by environment variables:
//   FASTPATH_FAKE_NVML_INIT_ERROR         nvmlReturn_t of nvmlInit_v2 (default 0)
//   FASTPATH_FAKE_NVML_DRIVER             driver version string (default "580.65.06")
//   FASTPATH_FAKE_NVML_DEVICES            device count (default FASTPATH_FAKE_CUDA_DEVICES, else 1)
//   FASTPATH_FAKE_CUDA_DEVICE_NAMES       names, shared with the fake libcuda (default "Fake GPU")
//   FASTPATH_FAKE_NVML_MIG                MIG mode of every device (default 0)
//   FASTPATH_FAKE_NVML_MIG_INSTANCES      MIG devices present when MIG is on (default 0)
//   FASTPATH_FAKE_NVML_ECC                ECC mode (default 1)
//   FASTPATH_FAKE_NVML_ECC_CORRECTED      volatile corrected count (default 0)
//   FASTPATH_FAKE_NVML_ECC_UNCORRECTED    volatile uncorrected count (default 0)
//   FASTPATH_FAKE_NVML_POWER_LIMIT_MW     power limit (default 700000)
//   FASTPATH_FAKE_NVML_SM_CLOCK / _MEM_CLOCK  MHz (default 1980 / 2619)
//   FASTPATH_FAKE_NVML_THROTTLE           clock event reason mask, e.g. 0x40 (default 0x1)
//   FASTPATH_FAKE_NVML_NOT_SUPPORTED      comma-separated calls that answer NOT_SUPPORTED
//   FASTPATH_FAKE_NVML_READ_ERROR         nvmlReturn_t every device call answers, e.g. 999
//                                         (NVML_ERROR_UNKNOWN) for a GPU that stopped
//                                         answering (default 0: each answers for itself)
//   FASTPATH_FAKE_NVML_TEMPERATURE        degrees C (default 45)
//   FASTPATH_FAKE_NVML_UTILIZATION        percent (default 30)
//   FASTPATH_FAKE_NVML_MEMORY_TOTAL / _MEMORY_USED  bytes (default 80 GiB / 1 GiB)
//   FASTPATH_FAKE_NVML_POWER_MW           power draw (default 250000)
//   FASTPATH_FAKE_NVML_REMAPPED_UNCORRECTABLE  rows (default 0)
//   FASTPATH_FAKE_NVML_XIDS               XIDs an event set delivers on device 0, each once
//                                         (comma-separated; default none)
//   FASTPATH_FAKE_NVML_VIOLATION_NS       perf-policy violation counters that
//                                         nvmlDeviceGetFieldValues answers for every device, in
//                                         ns, as policy=ns pairs: "thermal=2500000000,power=0"
//                                         (policies: power, thermal, sync_boost, board_limit,
//                                         low_utilization, reliability, total_app_clocks,
//                                         total_base_clocks); a field not listed answers
//                                         NOT_SUPPORTED in its own nvmlReturn (default: all)
// Every device's UUID is "GPU-fake-<index>".
// Built twice: FASTPATH_FAKE_NVML_MINIMAL leaves out the optional symbols an old driver
// lacks (nvmlErrorString, MIG, ECC, power, UUIDs, temperature, utilization, memory,
// remapped rows, events, field values, and the clock *event* reasons: only the pre-12.2
// nvmlDeviceGetCurrentClocksThrottleReasons is exported).
#include <cstdint>
#include <string>

#include "fake_env.h"

using fastpath::fakes::EnvInt;
using fastpath::fakes::EnvListHas;
using fastpath::fakes::EnvString;

namespace {

constexpr int kSuccess = 0;
constexpr int kUninitialized = 1;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr int kNotFound = 6;
constexpr int kInsufficientSize = 7;

constexpr int kMaxDevices = 16;
constexpr int kMaxMig = 7;
char device_handles[kMaxDevices];
#ifndef FASTPATH_FAKE_NVML_MINIMAL
char mig_handles[kMaxDevices * kMaxMig];
#endif
int init_count = 0;

int DeviceCount() {
  return static_cast<int>(EnvInt("FASTPATH_FAKE_NVML_DEVICES", EnvInt("FASTPATH_FAKE_CUDA_DEVICES", 1)));
}

// The device index behind a handle, or -1.
int IndexOf(void* handle) {
  const char* p = static_cast<const char*>(handle);
  if (p < device_handles || p >= device_handles + kMaxDevices) return -1;
  const int index = static_cast<int>(p - device_handles);
  return index < DeviceCount() ? index : -1;
}

// Common entry check; `call` may be listed in FASTPATH_FAKE_NVML_NOT_SUPPORTED.
int Enter(const char* call, void* handle, const void* out) {
  if (init_count == 0) return kUninitialized;
  if (out == nullptr || IndexOf(handle) < 0) return kInvalidArgument;
  if (const int error = static_cast<int>(EnvInt("FASTPATH_FAKE_NVML_READ_ERROR", 0)); error != 0) {
    return error;
  }
  if (EnvListHas("FASTPATH_FAKE_NVML_NOT_SUPPORTED", call)) return kNotSupported;
  return kSuccess;
}

}  // namespace

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_EXPORT int nvmlInit_v2() {
  const int error = static_cast<int>(EnvInt("FASTPATH_FAKE_NVML_INIT_ERROR", 0));
  if (error != 0) return error;
  ++init_count;
  return kSuccess;
}

FAKE_EXPORT int nvmlShutdown() {
  if (init_count == 0) return kUninitialized;
  --init_count;
  return kSuccess;
}

FAKE_EXPORT int nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (init_count == 0) return kUninitialized;
  if (version == nullptr) return kInvalidArgument;
  const std::string value = EnvString("FASTPATH_FAKE_NVML_DRIVER", "580.65.06");
  if (value.size() + 1 > length) return kInsufficientSize;
  fastpath::fakes::CopyOut(value, version, length);
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetCount_v2(unsigned int* count) {
  if (init_count == 0) return kUninitialized;
  if (count == nullptr) return kInvalidArgument;
  *count = static_cast<unsigned int>(DeviceCount());
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (init_count == 0) return kUninitialized;
  if (device == nullptr || index >= static_cast<unsigned int>(DeviceCount()) || index >= kMaxDevices) {
    return kInvalidArgument;
  }
  *device = &device_handles[index];
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetName(void* device, char* name, unsigned int length) {
  if (int r = Enter("nvmlDeviceGetName", device, name); r != kSuccess) return r;
  fastpath::fakes::CopyOut(
      fastpath::fakes::ListItem(EnvString("FASTPATH_FAKE_CUDA_DEVICE_NAMES", "Fake GPU"), IndexOf(device)),
      name, length);
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetClockInfo(void* device, int type, unsigned int* clock) {
  if (int r = Enter("nvmlDeviceGetClockInfo", device, clock); r != kSuccess) return r;
  if (type == 1) {  // NVML_CLOCK_SM
    *clock = static_cast<unsigned int>(EnvInt("FASTPATH_FAKE_NVML_SM_CLOCK", 1980));
  } else if (type == 2) {  // NVML_CLOCK_MEM
    *clock = static_cast<unsigned int>(EnvInt("FASTPATH_FAKE_NVML_MEM_CLOCK", 2619));
  } else {
    return kInvalidArgument;
  }
  return kSuccess;
}

static int ClockReasons(const char* call, void* device, unsigned long long* reasons) {
  if (int r = Enter(call, device, reasons); r != kSuccess) return r;
  *reasons = static_cast<unsigned long long>(EnvInt("FASTPATH_FAKE_NVML_THROTTLE", 0x1));
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetCurrentClocksThrottleReasons(void* device, unsigned long long* reasons) {
  return ClockReasons("nvmlDeviceGetCurrentClocksThrottleReasons", device, reasons);
}

#ifndef FASTPATH_FAKE_NVML_MINIMAL

FAKE_EXPORT const char* nvmlErrorString(int result) {
  switch (result) {
    case kSuccess: return "Success";
    case kUninitialized: return "Uninitialized";
    case kNotSupported: return "Not Supported";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}

FAKE_EXPORT int nvmlDeviceGetCurrentClocksEventReasons(void* device, unsigned long long* reasons) {
  return ClockReasons("nvmlDeviceGetCurrentClocksEventReasons", device, reasons);
}

FAKE_EXPORT int nvmlDeviceGetMigMode(void* device, unsigned int* current, unsigned int* pending) {
  if (int r = Enter("nvmlDeviceGetMigMode", device, current); r != kSuccess) return r;
  if (pending == nullptr) return kInvalidArgument;
  *current = *pending = static_cast<unsigned int>(EnvInt("FASTPATH_FAKE_NVML_MIG", 0));
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetMaxMigDeviceCount(void* device, unsigned int* count) {
  if (int r = Enter("nvmlDeviceGetMaxMigDeviceCount", device, count); r != kSuccess) return r;
  *count = EnvInt("FASTPATH_FAKE_NVML_MIG", 0) != 0 ? kMaxMig : 0;
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetMigDeviceHandleByIndex(void* device, unsigned int index, void** mig) {
  if (int r = Enter("nvmlDeviceGetMigDeviceHandleByIndex", device, mig); r != kSuccess) return r;
  if (index >= kMaxMig) return kInvalidArgument;
  if (index >= static_cast<unsigned int>(EnvInt("FASTPATH_FAKE_NVML_MIG_INSTANCES", 0))) return kNotFound;
  *mig = &mig_handles[IndexOf(device) * kMaxMig + index];
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetEccMode(void* device, int* current, int* pending) {
  if (int r = Enter("nvmlDeviceGetEccMode", device, current); r != kSuccess) return r;
  if (pending == nullptr) return kInvalidArgument;
  *current = *pending = static_cast<int>(EnvInt("FASTPATH_FAKE_NVML_ECC", 1));
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetTotalEccErrors(void* device, int error_type, int counter_type,
                                            unsigned long long* count) {
  if (int r = Enter("nvmlDeviceGetTotalEccErrors", device, count); r != kSuccess) return r;
  if (counter_type != 0 && counter_type != 1) return kInvalidArgument;
  if (error_type == 0) {
    *count = static_cast<unsigned long long>(EnvInt("FASTPATH_FAKE_NVML_ECC_CORRECTED", 0));
  } else if (error_type == 1) {
    *count = static_cast<unsigned long long>(EnvInt("FASTPATH_FAKE_NVML_ECC_UNCORRECTED", 0));
  } else {
    return kInvalidArgument;
  }
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetPowerManagementLimit(void* device, unsigned int* limit) {
  if (int r = Enter("nvmlDeviceGetPowerManagementLimit", device, limit); r != kSuccess) return r;
  *limit = static_cast<unsigned int>(EnvInt("FASTPATH_FAKE_NVML_POWER_LIMIT_MW", 700000));
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetUUID(void* device, char* uuid, unsigned int length) {
  if (int r = Enter("nvmlDeviceGetUUID", device, uuid); r != kSuccess) return r;
  fastpath::fakes::CopyOut("GPU-fake-" + std::to_string(IndexOf(device)), uuid, length);
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetHandleByUUID(const char* uuid, void** device) {
  if (init_count == 0) return kUninitialized;
  if (uuid == nullptr || device == nullptr) return kInvalidArgument;
  for (int i = 0; i < DeviceCount() && i < kMaxDevices; ++i) {
    if ("GPU-fake-" + std::to_string(i) == uuid) {
      *device = &device_handles[i];
      return kSuccess;
    }
  }
  return kNotFound;
}

FAKE_EXPORT int nvmlDeviceGetTemperature(void* device, int sensor, unsigned int* temperature) {
  if (int r = Enter("nvmlDeviceGetTemperature", device, temperature); r != kSuccess) return r;
  if (sensor != 0) return kInvalidArgument;  // NVML_TEMPERATURE_GPU
  *temperature = static_cast<unsigned int>(EnvInt("FASTPATH_FAKE_NVML_TEMPERATURE", 45));
  return kSuccess;
}

struct FakeUtilization {
  unsigned int gpu;
  unsigned int memory;
};

FAKE_EXPORT int nvmlDeviceGetUtilizationRates(void* device, FakeUtilization* utilization) {
  if (int r = Enter("nvmlDeviceGetUtilizationRates", device, utilization); r != kSuccess) return r;
  utilization->gpu = static_cast<unsigned int>(EnvInt("FASTPATH_FAKE_NVML_UTILIZATION", 30));
  utilization->memory = utilization->gpu / 2;
  return kSuccess;
}

struct FakeMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

FAKE_EXPORT int nvmlDeviceGetMemoryInfo(void* device, FakeMemory* memory) {
  if (int r = Enter("nvmlDeviceGetMemoryInfo", device, memory); r != kSuccess) return r;
  memory->total = static_cast<unsigned long long>(
      EnvInt("FASTPATH_FAKE_NVML_MEMORY_TOTAL", 80LL << 30));
  memory->used = static_cast<unsigned long long>(EnvInt("FASTPATH_FAKE_NVML_MEMORY_USED", 1LL << 30));
  memory->free = memory->total - memory->used;
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetPowerUsage(void* device, unsigned int* milliwatts) {
  if (int r = Enter("nvmlDeviceGetPowerUsage", device, milliwatts); r != kSuccess) return r;
  *milliwatts = static_cast<unsigned int>(EnvInt("FASTPATH_FAKE_NVML_POWER_MW", 250000));
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetRemappedRows(void* device, unsigned int* corrected,
                                          unsigned int* uncorrectable, unsigned int* pending,
                                          unsigned int* failed) {
  if (int r = Enter("nvmlDeviceGetRemappedRows", device, corrected); r != kSuccess) return r;
  if (uncorrectable == nullptr || pending == nullptr || failed == nullptr) return kInvalidArgument;
  *corrected = *pending = *failed = 0;
  *uncorrectable =
      static_cast<unsigned int>(EnvInt("FASTPATH_FAKE_NVML_REMAPPED_UNCORRECTABLE", 0));
  return kSuccess;
}

// One event set at a time: it delivers FASTPATH_FAKE_NVML_XIDS on device 0, each once.
struct FakeEventData {
  void* device;
  unsigned long long event_type;
  unsigned long long event_data;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
char event_set;
bool xid_registered = false;
int xids_delivered = 0;
constexpr int kTimeout = 10;  // NVML_ERROR_TIMEOUT

FAKE_EXPORT int nvmlEventSetCreate(void** set) {
  if (init_count == 0) return kUninitialized;
  if (set == nullptr) return kInvalidArgument;
  *set = &event_set;
  xid_registered = false;
  xids_delivered = 0;
  return kSuccess;
}

FAKE_EXPORT int nvmlEventSetFree(void* set) { return set == &event_set ? kSuccess : kInvalidArgument; }

FAKE_EXPORT int nvmlDeviceRegisterEvents(void* device, unsigned long long types, void* set) {
  if (int r = Enter("nvmlDeviceRegisterEvents", device, set); r != kSuccess) return r;
  if (set != &event_set) return kInvalidArgument;
  if (IndexOf(device) == 0 && (types & 0x8) != 0) xid_registered = true;
  return kSuccess;
}

FAKE_EXPORT int nvmlEventSetWait_v2(void* set, FakeEventData* data, unsigned int /*timeout_ms*/) {
  if (init_count == 0) return kUninitialized;
  if (set != &event_set || data == nullptr) return kInvalidArgument;
  if (!xid_registered) return kTimeout;
  const std::string xids = EnvString("FASTPATH_FAKE_NVML_XIDS", "");
  int count = xids.empty() ? 0 : 1;
  for (char c : xids) count += c == ',' ? 1 : 0;
  if (xids_delivered >= count) return kTimeout;
  data->device = &device_handles[0];
  data->event_type = 0x8;  // nvmlEventTypeXidCriticalError
  data->event_data = std::stoull(fastpath::fakes::ListItem(xids, xids_delivered++));
  data->gpu_instance_id = data->compute_instance_id = 0xFFFFFFFF;
  return kSuccess;
}

// nvmlFieldValue_t (nvml.h): the perf-policy violation counters only.
union FakeValue {
  double d;
  int si;
  unsigned int ui;
  unsigned long ul;
  unsigned long long ull;
  signed long long sll;
  unsigned short us;
};
struct FakeFieldValue {
  unsigned int field_id;
  unsigned int scope_id;
  long long timestamp;
  long long latency_usec;
  int value_type;
  int nvml_return;
  FakeValue value;
};

// The value of `policy` in FASTPATH_FAKE_NVML_VIOLATION_NS ("policy=ns,..."), or -1.
long long ScriptedViolation(const std::string& policy) {
  const std::string list = EnvString("FASTPATH_FAKE_NVML_VIOLATION_NS", "");
  size_t start = 0;
  while (start < list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string item = list.substr(start, comma - start);
    const size_t equals = item.find('=');
    if (equals != std::string::npos && item.compare(0, equals, policy) == 0) {
      return std::strtoll(item.c_str() + equals + 1, nullptr, 0);
    }
    start = comma + 1;
  }
  return -1;
}

FAKE_EXPORT int nvmlDeviceGetFieldValues(void* device, int count, FakeFieldValue* values) {
  if (int r = Enter("nvmlDeviceGetFieldValues", device, values); r != kSuccess) return r;
  if (count < 0) return kInvalidArgument;
  // NVML_FI_DEV_PERF_POLICY_POWER (74) .. NVML_FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS (81).
  static const char* const kPolicies[] = {"power",           "thermal",     "sync_boost",
                                          "board_limit",     "low_utilization", "reliability",
                                          "total_app_clocks", "total_base_clocks"};
  for (int i = 0; i < count; ++i) {
    FakeFieldValue& v = values[i];
    v.timestamp = 0;
    v.latency_usec = 0;
    v.nvml_return = kNotSupported;
    if (v.field_id < 74 || v.field_id > 81) continue;
    const long long ns = ScriptedViolation(kPolicies[v.field_id - 74]);
    if (ns < 0) continue;
    v.value_type = 3;  // NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
    v.value.ull = static_cast<unsigned long long>(ns);
    v.nvml_return = kSuccess;
  }
  return kSuccess;
}

#endif  // FASTPATH_FAKE_NVML_MINIMAL
