// A fake libcuda.so.1: the driver API calls fastpath's driver probe makes, with the
// machine described by environment variables:
//   FASTPATH_FAKE_CUDA_INIT_ERROR      CUresult cuInit returns (default 0; 100 when 0 devices)
//   FASTPATH_FAKE_CUDA_DRIVER_VERSION  cuDriverGetVersion (default 13000 = CUDA 13.0)
//   FASTPATH_FAKE_CUDA_DEVICES         device count (default 1)
//   FASTPATH_FAKE_CUDA_DEVICE_NAMES    comma-separated names (default "Fake GPU")
//   FASTPATH_FAKE_CUDA_CC              comma-separated compute capabilities (default "9.0")
//   FASTPATH_FAKE_CUDA_MEMORY_MIB      comma-separated memory sizes (default 81920)
#include <cstddef>
#include <string>

#include "fake_env.h"

using fastpath::fakes::EnvInt;
using fastpath::fakes::EnvString;
using fastpath::fakes::ListItem;

namespace {

bool initialized = false;

int DeviceCount() { return static_cast<int>(EnvInt("FASTPATH_FAKE_CUDA_DEVICES", 1)); }

int Check(int device) {
  if (!initialized) return 3;  // CUDA_ERROR_NOT_INITIALIZED
  if (device < 0 || device >= DeviceCount()) return 101;  // CUDA_ERROR_INVALID_DEVICE
  return 0;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int cuInit(unsigned int flags) {
  if (flags != 0) return 1;  // CUDA_ERROR_INVALID_VALUE
  const int error = static_cast<int>(EnvInt("FASTPATH_FAKE_CUDA_INIT_ERROR", 0));
  if (error != 0) return error;
  if (DeviceCount() == 0) return 100;  // what the real driver answers: CUDA_ERROR_NO_DEVICE
  initialized = true;
  return 0;
}

__attribute__((visibility("default"))) int cuDriverGetVersion(int* version) {
  if (version == nullptr) return 1;
  *version = static_cast<int>(EnvInt("FASTPATH_FAKE_CUDA_DRIVER_VERSION", 13000));
  return 0;
}

__attribute__((visibility("default"))) int cuDeviceGetCount(int* count) {
  if (count == nullptr) return 1;
  if (!initialized) return 3;
  *count = DeviceCount();
  return 0;
}

__attribute__((visibility("default"))) int cuDeviceGet(int* device, int ordinal) {
  if (device == nullptr) return 1;
  if (int r = Check(ordinal); r != 0) return r;
  *device = ordinal;
  return 0;
}

__attribute__((visibility("default"))) int cuDeviceGetName(char* name, int len, int device) {
  if (name == nullptr || len <= 0) return 1;
  if (int r = Check(device); r != 0) return r;
  fastpath::fakes::CopyOut(ListItem(EnvString("FASTPATH_FAKE_CUDA_DEVICE_NAMES", "Fake GPU"), device),
                           name, static_cast<size_t>(len));
  return 0;
}

__attribute__((visibility("default"))) int cuDeviceGetAttribute(int* value, int attribute, int device) {
  if (value == nullptr) return 1;
  if (int r = Check(device); r != 0) return r;
  const std::string cc = ListItem(EnvString("FASTPATH_FAKE_CUDA_CC", "9.0"), device);
  const size_t dot = cc.find('.');
  if (attribute == 75) {  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    *value = std::stoi(cc.substr(0, dot));
  } else if (attribute == 76) {  // ..._MINOR
    *value = dot == std::string::npos ? 0 : std::stoi(cc.substr(dot + 1));
  } else {
    return 1;
  }
  return 0;
}

__attribute__((visibility("default"))) int cuDeviceTotalMem_v2(size_t* bytes, int device) {
  if (bytes == nullptr) return 1;
  if (int r = Check(device); r != 0) return r;
  *bytes = static_cast<size_t>(std::stoull(ListItem(EnvString("FASTPATH_FAKE_CUDA_MEMORY_MIB", "81920"), device))) << 20;
  return 0;
}

__attribute__((visibility("default"))) int cuGetErrorName(int error, const char** name) {
  if (name == nullptr) return 1;
  switch (error) {
    case 0: *name = "CUDA_SUCCESS"; return 0;
    case 1: *name = "CUDA_ERROR_INVALID_VALUE"; return 0;
    case 3: *name = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
    case 34: *name = "CUDA_ERROR_STUB_LIBRARY"; return 0;
    case 35: *name = "CUDA_ERROR_INSUFFICIENT_DRIVER"; return 0;
    case 100: *name = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 101: *name = "CUDA_ERROR_INVALID_DEVICE"; return 0;
    case 803: *name = "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"; return 0;
    case 804: *name = "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"; return 0;
    default: *name = nullptr; return 1;  // as the real driver does for unknown codes
  }
}

}  // extern "C"
