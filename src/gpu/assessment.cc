#include <string>

#include "fastpath/gpu/capability_snapshot.h"

namespace fastpath::gpu {
namespace {

constexpr uint64_t kHardwareSlowdownReasons = 0x8 | 0x40 | 0x80;  // HW slowdown, HW thermal, HW power brake

std::string DeviceNodesHint(const ContainerInfo& container) {
  if (container.device_nodes.empty()) {
    return " No /dev/nvidia* device nodes are present: in a container, request the GPU "
           "(--gpus, the nvidia runtime class, a nvidia.com/gpu resource).";
  }
  return "";
}

std::string VisibleDevicesHint(const ContainerInfo& container) {
  if (container.cuda_visible_devices &&
      (container.cuda_visible_devices->empty() || *container.cuda_visible_devices == "-1" ||
       *container.cuda_visible_devices == "NoDevFiles")) {
    return " CUDA_VISIBLE_DEVICES='" + *container.cuda_visible_devices + "' hides every device.";
  }
  if (container.nvidia_visible_devices &&
      (*container.nvidia_visible_devices == "void" || *container.nvidia_visible_devices == "none")) {
    return " NVIDIA_VISIBLE_DEVICES='" + *container.nvidia_visible_devices + "' mounts no device.";
  }
  return "";
}

}  // namespace

const char* FailureClassName(FailureClass failure) {
  switch (failure) {
    case FailureClass::kNone: return "none";
    case FailureClass::kNoDriverLibrary: return "no-driver-library";
    case FailureClass::kNoDevice: return "no-device";
    case FailureClass::kDriverTooOld: return "driver-too-old";
    case FailureClass::kNvmlUnavailable: return "nvml-unavailable";
    case FailureClass::kDriverInitFailed: return "driver-init-failed";
    case FailureClass::kNoCudaRuntime: return "no-cuda-runtime";
    case FailureClass::kDeviceUnhealthy: return "device-unhealthy";
    case FailureClass::kNoGpuExecutionProvider: return "no-gpu-execution-provider";
  }
  return "unknown";
}

std::vector<Finding> Assess(const CapabilitySnapshot& s) {
  std::vector<Finding> findings;
  auto add = [&](FailureClass failure, std::string message) {
    findings.push_back({failure, std::move(message)});
  };
  const DriverInfo& driver = s.driver;

  if (!driver.library_found) {
    add(FailureClass::kNoDriverLibrary,
        "the CUDA driver library libcuda.so.1 cannot be loaded (" + driver.load_error +
            "): no NVIDIA driver is installed, or the container toolkit did not mount it." +
            DeviceNodesHint(s.container));
  } else if (!driver.initialized && driver.init_result == 0) {
    add(FailureClass::kDriverInitFailed, "the CUDA driver at " + driver.library_path +
                                             " cannot be used: " + driver.error);
  } else if (!driver.initialized) {
    const std::string call = "cuInit failed with " + driver.init_error + " (driver at " +
                             driver.library_path + ", supports CUDA " + driver.cuda_version.ToString() + ")";
    switch (driver.init_result) {
      case 100:  // CUDA_ERROR_NO_DEVICE
        add(FailureClass::kNoDevice,
            call + ": the driver sees no GPU." + VisibleDevicesHint(s.container) + DeviceNodesHint(s.container));
        break;
      case 35:   // CUDA_ERROR_INSUFFICIENT_DRIVER
      case 804:  // CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE
        add(FailureClass::kDriverTooOld,
            call + ": the kernel driver is too old for this libcuda" +
                (driver.init_result == 804 ? ", and this GPU does not support the cuda-compat package"
                                           : "; upgrade the driver or install cuda-compat") + ".");
        break;
      case 34:  // CUDA_ERROR_STUB_LIBRARY
        add(FailureClass::kDriverInitFailed,
            call + ": this is the CUDA toolkit's stub library, not a driver; remove its directory "
                   "(lib64/stubs) from the library path.");
        break;
      default:
        add(FailureClass::kDriverInitFailed, call + ".");
    }
  } else if (driver.device_count == 0) {
    add(FailureClass::kNoDevice, "the CUDA driver initialized but reports 0 devices." +
                                     VisibleDevicesHint(s.container) + DeviceNodesHint(s.container));
  }

  for (const std::string& problem : s.compatibility.problems) {
    std::string message = problem + ".";
    if (!s.compatibility.compat_driver_loaded) {
      message += s.compatibility.compat_libraries.empty()
                     ? " Upgrade the driver, or install the cuda-compat package."
                     : " cuda-compat is installed (" + s.compatibility.compat_libraries.front() +
                           ") but not loaded: put its directory first on LD_LIBRARY_PATH.";
    }
    add(FailureClass::kDriverTooOld, std::move(message));
  }

  if (!s.nvml.library_found) {
    add(FailureClass::kNvmlUnavailable,
        "NVML (libnvidia-ml.so.1) cannot be loaded (" + s.nvml.load_error +
            "): no clocks, throttle reasons, ECC or MIG information.");
  } else if (!s.nvml.initialized) {
    add(FailureClass::kNvmlUnavailable,
        "NVML at " + s.nvml.library_path + " did not initialize: " +
            (s.nvml.init_error.empty() ? s.nvml.error : s.nvml.init_error) + ".");
  }

  for (const LibraryInfo& lib : s.libraries) {
    if (lib.name == "cudart" && !lib.found) {
      add(FailureClass::kNoCudaRuntime,
          "no CUDA runtime (libcudart.so.13 or .12) on the library path: ONNX Runtime's CUDA "
          "execution provider cannot load.");
    }
  }

  for (const NvmlDevice& device : s.nvml.devices) {
    const std::string who = "GPU " + std::to_string(device.index) + " (" + device.name + ")";
    if (device.ecc_uncorrected_volatile.value_or(0) > 0) {
      add(FailureClass::kDeviceUnhealthy, who + " has " + std::to_string(*device.ecc_uncorrected_volatile) +
                                              " uncorrected ECC errors since the driver loaded: drain the node.");
    }
    if (device.clock_event_reasons.value_or(0) & kHardwareSlowdownReasons) {
      std::string reasons;
      for (const std::string& name : DecodeClockEventReasons(*device.clock_event_reasons & kHardwareSlowdownReasons)) {
        reasons += (reasons.empty() ? "" : ", ") + name;
      }
      add(FailureClass::kDeviceUnhealthy,
          who + " is slowed by hardware (" + reasons + "): check cooling and power delivery.");
    }
  }
  // ORT's CUDA EP library is what KIND_GPU models run through; when it cannot be used, every
  // GPU model is refused even if the driver is fine (a missing cuDNN or cuBLAS, a wrong
  // ORT package). TensorRT is optional, so its library is reported but is not a finding.
  if (s.onnxruntime.probed) {
    if (!s.onnxruntime.error.empty()) {
      add(FailureClass::kNoGpuExecutionProvider,
          "ONNX Runtime could not be probed: " + s.onnxruntime.error);
    }
    for (const EpLibraryInfo& library : s.onnxruntime.libraries) {
      if (library.provider == "cuda" && !library.error.empty()) {
        add(FailureClass::kNoGpuExecutionProvider,
            "ONNX Runtime's CUDA execution provider cannot be used, so KIND_GPU models are "
            "refused: " + library.error);
      }
    }
  }
  return findings;
}

}  // namespace fastpath::gpu
