#include "fastpath/gpu/node_snapshot.h"

#include <utility>

#include "fastpath/onnxruntime/ort_backend.h"

namespace fastpath::gpu {
namespace {

EpDeviceInfo ToEpDeviceInfo(const onnxruntime::EpDeviceReport& report) {
  EpDeviceInfo info;
  info.ep_name = report.ep_name;
  info.ep_vendor = report.ep_vendor;
  info.device_type = report.device_type;
  info.vendor = report.vendor;
  info.vendor_id = report.vendor_id;
  info.device_id = report.device_id;
  info.cuda_device_id = report.cuda_device_id;
  info.metadata = report.metadata;
  return info;
}

// The ORT half: registers the CUDA and TensorRT EP libraries exactly as `serve` would, so
// what the snapshot says about them is what a GPU model will meet.
OnnxRuntimeInfo ProbeOnnxRuntime() {
  const onnxruntime::OrtRuntimeReport report = onnxruntime::ProbeOrtRuntime();
  OnnxRuntimeInfo info;
  info.probed = true;
  info.version = report.version;
  info.ep_library_dir = report.ep_library_dir;
  info.error = report.error;
  for (const auto& library : report.libraries) {
    EpLibraryInfo out;
    out.provider = library.provider;
    out.path = library.path;
    out.registered = library.registered;
    out.interface = library.interface;
    out.error = library.error;
    for (const auto& device : library.devices) out.devices.push_back(ToEpDeviceInfo(device));
    info.libraries.push_back(std::move(out));
  }
  for (const auto& device : report.devices) info.devices.push_back(ToEpDeviceInfo(device));
  return info;
}

}  // namespace

CapabilitySnapshot TakeNodeSnapshot(const std::string& fastpath_version) {
  CapabilitySnapshot snapshot = TakeSnapshot(ProbeEnvironment::Host());
  snapshot.fastpath_version = fastpath_version;
  snapshot.ort_version = onnxruntime::OrtVersion();
  snapshot.onnxruntime = ProbeOnnxRuntime();
  return snapshot;
}

}  // namespace fastpath::gpu
