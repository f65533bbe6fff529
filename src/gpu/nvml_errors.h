// NVML's result codes by name (nvml.h's nvmlReturn_t), for the probe and the sampler, which
// declare NVML's C ABI themselves rather than include nvml.h. Private to src/gpu.
#pragma once

#include <string>

namespace fastpath::gpu {

inline std::string NvmlErrorName(int result) {
  switch (result) {
    case 0:
      return "NVML_SUCCESS";
    case 1:
      return "NVML_ERROR_UNINITIALIZED";
    case 2:
      return "NVML_ERROR_INVALID_ARGUMENT";
    case 3:
      return "NVML_ERROR_NOT_SUPPORTED";
    case 4:
      return "NVML_ERROR_NO_PERMISSION";
    case 6:
      return "NVML_ERROR_NOT_FOUND";
    case 9:
      return "NVML_ERROR_DRIVER_NOT_LOADED";
    case 10:
      return "NVML_ERROR_TIMEOUT";
    case 11:
      return "NVML_ERROR_IRQ_ISSUE";
    case 12:
      return "NVML_ERROR_LIBRARY_NOT_FOUND";
    case 14:
      return "NVML_ERROR_CORRUPTED_INFOROM";
    case 15:
      return "NVML_ERROR_GPU_IS_LOST";
    case 16:
      return "NVML_ERROR_RESET_REQUIRED";
    case 17:
      return "NVML_ERROR_OPERATING_SYSTEM";
    case 18:
      return "NVML_ERROR_LIB_RM_VERSION_MISMATCH";
    case 19:
      return "NVML_ERROR_IN_USE";
    case 20:
      return "NVML_ERROR_MEMORY";
    case 999:
      return "NVML_ERROR_UNKNOWN";
    default:
      return "nvmlReturn_t " + std::to_string(result);
  }
}

}  // namespace fastpath::gpu
