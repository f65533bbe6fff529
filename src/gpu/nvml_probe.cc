// The NVML probe: libnvidia-ml.so.1 through NVML's C ABI (nvml.h), declared here. Only
// nvmlInit_v2 and nvmlShutdown are required; every other call is optional, and a symbol
// the library lacks or a call that answers NVML_ERROR_NOT_SUPPORTED leaves its field
// unset ("not supported"), never a failure.
#include <array>
#include <cstdio>
#include <string>

#include "fastpath/gpu/capability_snapshot.h"
#include "nvml_errors.h"
#include "shared_library.h"

namespace fastpath::gpu {
namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = struct NvmlDeviceOpaque*;
using NvmlInitFn = nvmlReturn_t (*)();
using NvmlShutdownFn = nvmlReturn_t (*)();
using NvmlErrorStringFn = const char* (*)(nvmlReturn_t);
using NvmlSystemGetDriverVersionFn = nvmlReturn_t (*)(char*, unsigned int);
using NvmlDeviceGetCountFn = nvmlReturn_t (*)(unsigned int*);
using NvmlDeviceGetHandleByIndexFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using NvmlDeviceGetNameFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using NvmlDeviceGetMigModeFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, unsigned int*);
using NvmlDeviceGetMaxMigDeviceCountFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);
using NvmlDeviceGetMigDeviceHandleByIndexFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, nvmlDevice_t*);
using NvmlDeviceGetEccModeFn = nvmlReturn_t (*)(nvmlDevice_t, int*, int*);  // nvmlEnableState_t
using NvmlDeviceGetTotalEccErrorsFn = nvmlReturn_t (*)(nvmlDevice_t, int, int, unsigned long long*);
using NvmlDeviceGetPowerManagementLimitFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);
using NvmlDeviceGetClockInfoFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned int*);
using NvmlDeviceGetClockReasonsFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);

constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr int kMemoryErrorCorrected = 0;    // NVML_MEMORY_ERROR_TYPE_CORRECTED
constexpr int kMemoryErrorUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatileEcc = 0;             // NVML_VOLATILE_ECC
constexpr int kClockSm = 1;                 // NVML_CLOCK_SM
constexpr int kClockMem = 2;                // NVML_CLOCK_MEM

// The result name, with nvmlErrorString's text when the library has it.
class NvmlErrorNamer {
 public:
  explicit NvmlErrorNamer(const SharedLibrary& lib)
      : error_string_(lib.Function<NvmlErrorStringFn>("nvmlErrorString")) {}
  std::string operator()(nvmlReturn_t result) const {
    std::string name = NvmlErrorName(result);
    if (error_string_ != nullptr) {
      if (const char* text = error_string_(result); text != nullptr && text[0] != '\0') {
        name += std::string(" (") + text + ")";
      }
    }
    return name;
  }

 private:
  NvmlErrorStringFn error_string_;
};

constexpr std::array<const char*, 9> kClockEventReasonNames = {
    "GPU idle",                      // 0x1   nvmlClocksEventReasonGpuIdle
    "applications clocks setting",   // 0x2   nvmlClocksEventReasonApplicationsClocksSetting
    "SW power cap",                  // 0x4   nvmlClocksEventReasonSwPowerCap
    "HW slowdown",                   // 0x8   nvmlClocksThrottleReasonHwSlowdown
    "sync boost",                    // 0x10  nvmlClocksEventReasonSyncBoost
    "SW thermal slowdown",           // 0x20  nvmlClocksEventReasonSwThermalSlowdown
    "HW thermal slowdown",           // 0x40  nvmlClocksThrottleReasonHwThermalSlowdown
    "HW power brake slowdown",       // 0x80  nvmlClocksThrottleReasonHwPowerBrakeSlowdown
    "display clock setting",         // 0x100 nvmlClocksEventReasonDisplayClockSetting
};

}  // namespace

std::vector<std::string> DecodeClockEventReasons(uint64_t reasons) {
  std::vector<std::string> names;
  for (size_t bit = 0; bit < 64; ++bit) {
    const uint64_t mask = uint64_t{1} << bit;
    if ((reasons & mask) == 0) continue;
    if (bit < kClockEventReasonNames.size()) {
      names.emplace_back(kClockEventReasonNames[bit]);
    } else {
      char hex[32];
      std::snprintf(hex, sizeof(hex), "unknown (0x%llx)", static_cast<unsigned long long>(mask));
      names.emplace_back(hex);
    }
  }
  return names;
}

NvmlInfo ProbeNvml(const ProbeEnvironment& env) {
  NvmlInfo info;
  SharedLibrary lib = SharedLibrary::OpenFirst(env.nvml);
  if (!lib.loaded()) {
    info.load_error = lib.error();
    return info;
  }
  info.library_found = true;
  info.library_path = lib.path();
  const NvmlErrorNamer error_name(lib);

  auto init = lib.Function<NvmlInitFn>("nvmlInit_v2");
  auto shutdown = lib.Function<NvmlShutdownFn>("nvmlShutdown");
  if (init == nullptr || shutdown == nullptr) {
    info.error = info.library_path + " lacks nvmlInit_v2 or nvmlShutdown";
    return info;
  }
  if (nvmlReturn_t r = init(); r != kNvmlSuccess) {
    info.init_error = error_name(r);
    return info;
  }
  info.initialized = true;

  if (auto get_driver = lib.Function<NvmlSystemGetDriverVersionFn>("nvmlSystemGetDriverVersion")) {
    std::array<char, 96> version{};  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE is 80
    if (nvmlReturn_t r = get_driver(version.data(), static_cast<unsigned>(version.size())); r == kNvmlSuccess) {
      version.back() = '\0';
      info.driver_version = version.data();
    } else {
      info.error = "nvmlSystemGetDriverVersion: " + error_name(r);
    }
  }

  auto get_count = lib.Function<NvmlDeviceGetCountFn>("nvmlDeviceGetCount_v2");
  auto get_handle = lib.Function<NvmlDeviceGetHandleByIndexFn>("nvmlDeviceGetHandleByIndex_v2");
  unsigned int count = 0;
  if (get_count == nullptr || get_handle == nullptr) {
    info.error = info.library_path + " lacks nvmlDeviceGetCount_v2 or nvmlDeviceGetHandleByIndex_v2";
  } else if (nvmlReturn_t r = get_count(&count); r != kNvmlSuccess) {
    info.error = "nvmlDeviceGetCount_v2: " + error_name(r);
    count = 0;
  }

  auto get_name = lib.Function<NvmlDeviceGetNameFn>("nvmlDeviceGetName");
  auto get_mig_mode = lib.Function<NvmlDeviceGetMigModeFn>("nvmlDeviceGetMigMode");
  auto get_max_mig = lib.Function<NvmlDeviceGetMaxMigDeviceCountFn>("nvmlDeviceGetMaxMigDeviceCount");
  auto get_mig_handle =
      lib.Function<NvmlDeviceGetMigDeviceHandleByIndexFn>("nvmlDeviceGetMigDeviceHandleByIndex");
  auto get_ecc_mode = lib.Function<NvmlDeviceGetEccModeFn>("nvmlDeviceGetEccMode");
  auto get_ecc_errors = lib.Function<NvmlDeviceGetTotalEccErrorsFn>("nvmlDeviceGetTotalEccErrors");
  auto get_power_limit =
      lib.Function<NvmlDeviceGetPowerManagementLimitFn>("nvmlDeviceGetPowerManagementLimit");
  auto get_clock = lib.Function<NvmlDeviceGetClockInfoFn>("nvmlDeviceGetClockInfo");
  // Renamed in CUDA 12.2's NVML; drivers before that only have the throttle name.
  auto get_reasons = lib.Function<NvmlDeviceGetClockReasonsFn>("nvmlDeviceGetCurrentClocksEventReasons");
  if (get_reasons == nullptr) {
    get_reasons = lib.Function<NvmlDeviceGetClockReasonsFn>("nvmlDeviceGetCurrentClocksThrottleReasons");
  }

  for (unsigned int index = 0; index < count; ++index) {
    NvmlDevice device;
    device.index = static_cast<int>(index);
    nvmlDevice_t handle = nullptr;
    if (nvmlReturn_t r = get_handle(index, &handle); r != kNvmlSuccess) {
      device.error = "nvmlDeviceGetHandleByIndex_v2: " + error_name(r);
      info.devices.push_back(std::move(device));
      continue;
    }
    auto note = [&](const char* call, nvmlReturn_t r) {
      if (r == 3) return;  // NVML_ERROR_NOT_SUPPORTED: the field stays "not supported"
      if (!device.error.empty()) device.error += "; ";
      device.error += std::string(call) + ": " + error_name(r);
    };
    if (get_name != nullptr) {
      std::array<char, 128> name{};  // NVML_DEVICE_NAME_V2_BUFFER_SIZE is 96
      if (nvmlReturn_t r = get_name(handle, name.data(), static_cast<unsigned>(name.size())); r == kNvmlSuccess) {
        name.back() = '\0';
        device.name = name.data();
      } else {
        note("nvmlDeviceGetName", r);
      }
    }
    if (get_mig_mode != nullptr) {
      unsigned int current = 0, pending = 0;
      if (nvmlReturn_t r = get_mig_mode(handle, &current, &pending); r == kNvmlSuccess) {
        device.mig_enabled = current != 0;
      } else {
        note("nvmlDeviceGetMigMode", r);
      }
    }
    if (device.mig_enabled.value_or(false) && get_max_mig != nullptr && get_mig_handle != nullptr) {
      unsigned int max_mig = 0;
      if (nvmlReturn_t r = get_max_mig(handle, &max_mig); r == kNvmlSuccess) {
        int present = 0;
        for (unsigned int slot = 0; slot < max_mig; ++slot) {
          nvmlDevice_t mig = nullptr;
          if (get_mig_handle(handle, slot, &mig) == kNvmlSuccess) ++present;  // NOT_FOUND: empty slot
        }
        device.mig_instances = present;
      } else {
        note("nvmlDeviceGetMaxMigDeviceCount", r);
      }
    }
    if (get_ecc_mode != nullptr) {
      int current = 0, pending = 0;
      if (nvmlReturn_t r = get_ecc_mode(handle, &current, &pending); r == kNvmlSuccess) {
        device.ecc_enabled = current != 0;
      } else {
        note("nvmlDeviceGetEccMode", r);
      }
    }
    if (get_ecc_errors != nullptr && device.ecc_enabled.value_or(false)) {
      unsigned long long n = 0;
      if (nvmlReturn_t r = get_ecc_errors(handle, kMemoryErrorCorrected, kVolatileEcc, &n); r == kNvmlSuccess) {
        device.ecc_corrected_volatile = n;
      } else {
        note("nvmlDeviceGetTotalEccErrors(corrected)", r);
      }
      if (nvmlReturn_t r = get_ecc_errors(handle, kMemoryErrorUncorrected, kVolatileEcc, &n); r == kNvmlSuccess) {
        device.ecc_uncorrected_volatile = n;
      } else {
        note("nvmlDeviceGetTotalEccErrors(uncorrected)", r);
      }
    }
    if (get_power_limit != nullptr) {
      unsigned int milliwatts = 0;
      if (nvmlReturn_t r = get_power_limit(handle, &milliwatts); r == kNvmlSuccess) {
        device.power_limit_mw = milliwatts;
      } else {
        note("nvmlDeviceGetPowerManagementLimit", r);
      }
    }
    if (get_clock != nullptr) {
      unsigned int mhz = 0;
      if (nvmlReturn_t r = get_clock(handle, kClockSm, &mhz); r == kNvmlSuccess) {
        device.sm_clock_mhz = mhz;
      } else {
        note("nvmlDeviceGetClockInfo(SM)", r);
      }
      if (nvmlReturn_t r = get_clock(handle, kClockMem, &mhz); r == kNvmlSuccess) {
        device.mem_clock_mhz = mhz;
      } else {
        note("nvmlDeviceGetClockInfo(MEM)", r);
      }
    }
    if (get_reasons != nullptr) {
      unsigned long long reasons = 0;
      if (nvmlReturn_t r = get_reasons(handle, &reasons); r == kNvmlSuccess) {
        device.clock_event_reasons = reasons;
        device.clock_event_reason_names = DecodeClockEventReasons(reasons);
      } else {
        note("nvmlDeviceGetCurrentClocksEventReasons", r);
      }
    }
    info.devices.push_back(std::move(device));
  }
  (void)shutdown();  // best effort: nothing to do about a failed shutdown
  return info;
}

}  // namespace fastpath::gpu
