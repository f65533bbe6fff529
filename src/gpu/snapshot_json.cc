#include "fastpath/gpu/snapshot_json.h"

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <optional>

namespace fastpath::gpu {
namespace {

using Writer = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

void Str(Writer& w, const char* key, const std::string& value) {
  w.Key(key);
  w.String(value.c_str(), static_cast<rapidjson::SizeType>(value.size()));
}

void OptStr(Writer& w, const char* key, const std::optional<std::string>& value) {
  w.Key(key);
  if (value) {
    w.String(value->c_str(), static_cast<rapidjson::SizeType>(value->size()));
  } else {
    w.Null();
  }
}

template <typename T>
void OptUint(Writer& w, const char* key, const std::optional<T>& value) {
  w.Key(key);
  if (value) {
    w.Uint64(static_cast<uint64_t>(*value));
  } else {
    w.Null();
  }
}

void OptBool(Writer& w, const char* key, const std::optional<bool>& value) {
  w.Key(key);
  if (value) {
    w.Bool(*value);
  } else {
    w.Null();
  }
}

void Strings(Writer& w, const char* key, const std::vector<std::string>& values) {
  w.Key(key);
  w.StartArray();
  for (const std::string& v : values) w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
  w.EndArray();
}

void Cuda(Writer& w, const char* key, const CudaVersion& version) {
  w.Key(key);
  if (version.known()) {
    const std::string text = version.ToString();
    w.String(text.c_str(), static_cast<rapidjson::SizeType>(text.size()));
  } else {
    w.Null();
  }
}

void WriteDriver(Writer& w, const DriverInfo& d) {
  w.StartObject();
  w.Key("library_found"); w.Bool(d.library_found);
  Str(w, "library_path", d.library_path);
  Str(w, "load_error", d.load_error);
  w.Key("initialized"); w.Bool(d.initialized);
  w.Key("init_result"); w.Int(d.init_result);
  Str(w, "init_error", d.init_error);
  Cuda(w, "cuda_version", d.cuda_version);
  w.Key("device_count"); w.Int(d.device_count);
  w.Key("devices");
  w.StartArray();
  for (const DriverDevice& dev : d.devices) {
    w.StartObject();
    w.Key("ordinal"); w.Int(dev.ordinal);
    Str(w, "name", dev.name);
    const std::string cc = std::to_string(dev.compute_capability_major) + "." +
                           std::to_string(dev.compute_capability_minor);
    Str(w, "compute_capability", cc);
    w.Key("total_memory_bytes"); w.Uint64(dev.total_memory_bytes);
    Str(w, "error", dev.error);
    w.EndObject();
  }
  w.EndArray();
  Str(w, "error", d.error);
  w.EndObject();
}

void WriteNvml(Writer& w, const NvmlInfo& n) {
  w.StartObject();
  w.Key("library_found"); w.Bool(n.library_found);
  Str(w, "library_path", n.library_path);
  Str(w, "load_error", n.load_error);
  w.Key("initialized"); w.Bool(n.initialized);
  Str(w, "init_error", n.init_error);
  Str(w, "driver_version", n.driver_version);
  w.Key("devices");
  w.StartArray();
  for (const NvmlDevice& dev : n.devices) {
    w.StartObject();
    w.Key("index"); w.Int(dev.index);
    Str(w, "name", dev.name);
    OptBool(w, "mig_enabled", dev.mig_enabled);
    OptUint(w, "mig_instances", dev.mig_instances);
    OptBool(w, "ecc_enabled", dev.ecc_enabled);
    OptUint(w, "ecc_corrected_volatile", dev.ecc_corrected_volatile);
    OptUint(w, "ecc_uncorrected_volatile", dev.ecc_uncorrected_volatile);
    OptUint(w, "power_limit_mw", dev.power_limit_mw);
    OptUint(w, "sm_clock_mhz", dev.sm_clock_mhz);
    OptUint(w, "mem_clock_mhz", dev.mem_clock_mhz);
    OptUint(w, "clock_event_reasons", dev.clock_event_reasons);
    Strings(w, "clock_event_reason_names", dev.clock_event_reason_names);
    Str(w, "error", dev.error);
    w.EndObject();
  }
  w.EndArray();
  Str(w, "error", n.error);
  w.EndObject();
}

void WriteEpDevice(Writer& w, const EpDeviceInfo& d) {
  w.StartObject();
  Str(w, "ep_name", d.ep_name);
  Str(w, "ep_vendor", d.ep_vendor);
  Str(w, "device_type", d.device_type);
  Str(w, "vendor", d.vendor);
  w.Key("vendor_id"); w.Uint(d.vendor_id);
  w.Key("device_id"); w.Uint(d.device_id);
  w.Key("cuda_device_id");
  if (d.cuda_device_id) {
    w.Int(*d.cuda_device_id);
  } else {
    w.Null();
  }
  w.Key("metadata");
  w.StartObject();
  for (const auto& [key, value] : d.metadata) Str(w, key.c_str(), value);
  w.EndObject();
  w.EndObject();
}

void WriteOnnxRuntime(Writer& w, const OnnxRuntimeInfo& o) {
  if (!o.probed) {
    w.Null();
    return;
  }
  w.StartObject();
  Str(w, "version", o.version);
  Str(w, "ep_library_dir", o.ep_library_dir);
  Str(w, "error", o.error);
  w.Key("execution_providers");
  w.StartArray();
  for (const EpLibraryInfo& library : o.libraries) {
    w.StartObject();
    Str(w, "provider", library.provider);
    Str(w, "path", library.path);
    w.Key("registered"); w.Bool(library.registered);
    Str(w, "interface", library.interface);
    Str(w, "error", library.error);
    w.Key("devices");
    w.StartArray();
    for (const EpDeviceInfo& device : library.devices) WriteEpDevice(w, device);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.Key("ep_devices");
  w.StartArray();
  for (const EpDeviceInfo& device : o.devices) WriteEpDevice(w, device);
  w.EndArray();
  w.EndObject();
}

}  // namespace

std::string SnapshotToJson(const CapabilitySnapshot& s, const std::vector<Finding>& findings) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  Str(w, "fastpath_version", s.fastpath_version);
  Str(w, "ort_version", s.ort_version);
  w.Key("driver");
  WriteDriver(w, s.driver);
  w.Key("nvml");
  WriteNvml(w, s.nvml);
  w.Key("libraries");
  w.StartArray();
  for (const LibraryInfo& lib : s.libraries) {
    w.StartObject();
    Str(w, "name", lib.name);
    w.Key("found"); w.Bool(lib.found);
    Str(w, "soname", lib.soname);
    Str(w, "path", lib.path);
    Str(w, "version", lib.version);
    Cuda(w, "requires_cuda", lib.requires_cuda);
    Str(w, "error", lib.error);
    w.EndObject();
  }
  w.EndArray();
  w.Key("container");
  w.StartObject();
  Strings(w, "device_nodes", s.container.device_nodes);
  OptStr(w, "nvidia_visible_devices", s.container.nvidia_visible_devices);
  OptStr(w, "cuda_visible_devices", s.container.cuda_visible_devices);
  OptStr(w, "mig_device", s.container.mig_device);
  Str(w, "cgroup_version", s.container.cgroup_version);
  OptUint(w, "cgroup_memory_limit_bytes", s.container.cgroup_memory_limit_bytes);
  OptUint(w, "allowed_cpus", s.container.allowed_cpus);
  w.Key("cgroup_cpu_quota");
  if (s.container.cgroup_cpu_quota) {
    w.Double(*s.container.cgroup_cpu_quota);
  } else {
    w.Null();
  }
  w.EndObject();
  w.Key("onnxruntime");
  WriteOnnxRuntime(w, s.onnxruntime);
  w.Key("compatibility");
  w.StartObject();
  Strings(w, "compat_libraries", s.compatibility.compat_libraries);
  w.Key("compat_driver_loaded"); w.Bool(s.compatibility.compat_driver_loaded);
  Strings(w, "problems", s.compatibility.problems);
  w.EndObject();
  w.Key("findings");
  w.StartArray();
  for (const Finding& f : findings) {
    w.StartObject();
    Str(w, "class", FailureClassName(f.failure));
    w.Key("exit_code"); w.Int(static_cast<int>(f.failure));
    Str(w, "message", f.message);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

}  // namespace fastpath::gpu
