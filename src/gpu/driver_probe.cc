// The driver probe: libcuda.so.1 through the driver API's C ABI, declared here so that
// building fastpath never needs the CUDA toolkit.
#include <array>
#include <string>

#include "fastpath/gpu/capability_snapshot.h"
#include "shared_library.h"

namespace fastpath::gpu {
namespace {

// The documented C ABI (cuda.h): CUresult is an enum, CUdevice an int.
using CUresult = int;
using CUdevice = int;
using CuInitFn = CUresult (*)(unsigned int);
using CuDriverGetVersionFn = CUresult (*)(int*);
using CuDeviceGetCountFn = CUresult (*)(int*);
using CuDeviceGetFn = CUresult (*)(CUdevice*, int);
using CuDeviceGetNameFn = CUresult (*)(char*, int, CUdevice);
using CuDeviceGetAttributeFn = CUresult (*)(int*, int, CUdevice);
using CuDeviceTotalMemFn = CUresult (*)(size_t*, CUdevice);
using CuGetErrorNameFn = CUresult (*)(CUresult, const char**);

constexpr int kAttributeComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttributeComputeCapabilityMinor = 76;

// The results a driver probe meets in practice, for drivers old enough to lack
// cuGetErrorName (and for fakes that omit it).
std::string KnownCudaErrorName(CUresult result) {
  switch (result) {
    case 0: return "CUDA_SUCCESS";
    case 1: return "CUDA_ERROR_INVALID_VALUE";
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 4: return "CUDA_ERROR_DEINITIALIZED";
    case 34: return "CUDA_ERROR_STUB_LIBRARY";
    case 35: return "CUDA_ERROR_INSUFFICIENT_DRIVER";
    case 46: return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 101: return "CUDA_ERROR_INVALID_DEVICE";
    case 802: return "CUDA_ERROR_SYSTEM_NOT_READY";
    case 803: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case 804: return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    case 999: return "CUDA_ERROR_UNKNOWN";
    default: return "CUresult " + std::to_string(result);
  }
}

class CudaErrorNamer {
 public:
  explicit CudaErrorNamer(const SharedLibrary& lib)
      : get_error_name_(lib.Function<CuGetErrorNameFn>("cuGetErrorName")) {}
  std::string operator()(CUresult result) const {
    const char* name = nullptr;
    if (get_error_name_ != nullptr && get_error_name_(result, &name) == 0 && name != nullptr) {
      return name;
    }
    return KnownCudaErrorName(result);
  }

 private:
  CuGetErrorNameFn get_error_name_;
};

}  // namespace

DriverInfo ProbeDriver(const ProbeEnvironment& env) {
  DriverInfo info;
  SharedLibrary lib = SharedLibrary::OpenFirst(env.driver);
  if (!lib.loaded()) {
    info.load_error = lib.error();
    return info;
  }
  info.library_found = true;
  info.library_path = lib.path();
  const CudaErrorNamer error_name(lib);

  auto cu_init = lib.Function<CuInitFn>("cuInit");
  auto driver_get_version = lib.Function<CuDriverGetVersionFn>("cuDriverGetVersion");
  auto device_get_count = lib.Function<CuDeviceGetCountFn>("cuDeviceGetCount");
  auto device_get = lib.Function<CuDeviceGetFn>("cuDeviceGet");
  auto device_get_name = lib.Function<CuDeviceGetNameFn>("cuDeviceGetName");
  auto device_get_attribute = lib.Function<CuDeviceGetAttributeFn>("cuDeviceGetAttribute");
  auto device_total_mem = lib.Function<CuDeviceTotalMemFn>("cuDeviceTotalMem_v2");
  if (cu_init == nullptr || driver_get_version == nullptr || device_get_count == nullptr) {
    info.error = info.library_path + " lacks cuInit, cuDriverGetVersion or cuDeviceGetCount";
    return info;
  }

  // cuDriverGetVersion works before cuInit, and tells "too old" apart from "no device".
  int encoded_version = 0;
  if (CUresult r = driver_get_version(&encoded_version); r == 0) {
    info.cuda_version = CudaVersion::FromEncoded(encoded_version);
  } else {
    info.error = "cuDriverGetVersion: " + error_name(r);
  }

  info.init_result = cu_init(0);
  if (info.init_result != 0) {
    info.init_error = error_name(info.init_result);
    return info;
  }
  info.initialized = true;

  if (CUresult r = device_get_count(&info.device_count); r != 0) {
    info.error = "cuDeviceGetCount: " + error_name(r);
    info.device_count = 0;
    return info;
  }
  for (int ordinal = 0; ordinal < info.device_count; ++ordinal) {
    DriverDevice device;
    device.ordinal = ordinal;
    CUdevice handle = ordinal;
    auto fail = [&](const char* call, CUresult r) {
      if (!device.error.empty()) device.error += "; ";
      device.error += std::string(call) + ": " + error_name(r);
    };
    if (device_get != nullptr) {
      if (CUresult r = device_get(&handle, ordinal); r != 0) {
        fail("cuDeviceGet", r);
        info.devices.push_back(std::move(device));
        continue;
      }
    }
    if (device_get_name != nullptr) {
      std::array<char, 256> name{};
      if (CUresult r = device_get_name(name.data(), static_cast<int>(name.size()), handle); r == 0) {
        name.back() = '\0';
        device.name = name.data();
      } else {
        fail("cuDeviceGetName", r);
      }
    }
    if (device_get_attribute != nullptr) {
      if (CUresult r = device_get_attribute(&device.compute_capability_major,
                                            kAttributeComputeCapabilityMajor, handle);
          r != 0) {
        fail("cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)", r);
      }
      if (CUresult r = device_get_attribute(&device.compute_capability_minor,
                                            kAttributeComputeCapabilityMinor, handle);
          r != 0) {
        fail("cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)", r);
      }
    }
    if (device_total_mem != nullptr) {
      size_t bytes = 0;
      if (CUresult r = device_total_mem(&bytes, handle); r == 0) {
        device.total_memory_bytes = bytes;
      } else {
        fail("cuDeviceTotalMem_v2", r);
      }
    }
    info.devices.push_back(std::move(device));
  }
  return info;
}

}  // namespace fastpath::gpu
