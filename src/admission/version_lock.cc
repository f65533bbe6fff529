#include "fastpath/admission/version_lock.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "fastpath/common/json.h"

namespace fastpath::admission {
namespace {

constexpr const char* kFormatKey = "fastpath_lock";
constexpr int kFormat = 1;

// The components in check order, with their member: one table for reading, writing and
// comparing, so a new component cannot be forgotten in one of them.
struct Component {
  const char* key;
  std::optional<std::string> VersionLock::*member;
};
constexpr Component kComponents[] = {
    {"driver_branch", &VersionLock::driver_branch},
    {"cuda_driver", &VersionLock::cuda_driver},
    {"cuda_runtime", &VersionLock::cuda_runtime},
    {"cudnn", &VersionLock::cudnn},
    {"tensorrt", &VersionLock::tensorrt},
    {"onnxruntime", &VersionLock::onnxruntime},
    {"gpu_name", &VersionLock::gpu_name},
    {"compute_capability", &VersionLock::compute_capability},
};

const gpu::LibraryInfo* FindLibrary(const gpu::CapabilitySnapshot& s, const std::string& name) {
  for (const gpu::LibraryInfo& lib : s.libraries) {
    if (lib.name == name) return &lib;
  }
  return nullptr;
}

std::optional<std::string> LibraryVersion(const gpu::CapabilitySnapshot& s,
                                          const std::string& name) {
  const gpu::LibraryInfo* lib = FindLibrary(s, name);
  if (lib == nullptr || !lib->found || lib->version.empty()) return std::nullopt;
  return lib->version;
}

std::string ComputeCapability(const gpu::DriverDevice& device) {
  return std::to_string(device.compute_capability_major) + "." +
         std::to_string(device.compute_capability_minor);
}

// Why the machine has no value for `key`, for the "found" column.
std::string WhyMissing(const std::string& key, const gpu::CapabilitySnapshot& s) {
  if (key == "driver_branch") {
    if (!s.nvml.library_found) return "not found (libnvidia-ml.so.1 cannot be loaded)";
    if (!s.nvml.initialized)
      return "not found (NVML failed to initialize: " + s.nvml.init_error + ")";
    return "not found (NVML reports no driver version)";
  }
  if (key == "cuda_driver") {
    if (!s.driver.library_found) return "not found (libcuda.so.1 cannot be loaded)";
    return "not found (the driver reports no CUDA version)";
  }
  if (key == "gpu_name" || key == "compute_capability") {
    if (!s.driver.library_found) return "not found (libcuda.so.1 cannot be loaded)";
    if (!s.driver.initialized) return "not found (cuInit failed: " + s.driver.init_error + ")";
    return "not found (no device)";
  }
  if (key == "onnxruntime") return "not found";
  const std::string lib = key == "cuda_runtime" ? "cudart" : key;
  const gpu::LibraryInfo* info = FindLibrary(s, lib);
  if (info != nullptr && info->found)
    return "unknown (" + info->path + " does not report its version)";
  return "not found (no lib" + (lib == "tensorrt" ? std::string("nvinfer") : lib) +
         " on the library path)";
}

}  // namespace

VersionLock LockFromSnapshot(const gpu::CapabilitySnapshot& s) {
  VersionLock lock;
  if (!s.nvml.driver_version.empty()) {
    lock.driver_branch = s.nvml.driver_version.substr(0, s.nvml.driver_version.find('.'));
  }
  if (s.driver.library_found && s.driver.cuda_version.known()) {
    lock.cuda_driver = s.driver.cuda_version.ToString();
  }
  lock.cuda_runtime = LibraryVersion(s, "cudart");
  lock.cudnn = LibraryVersion(s, "cudnn");
  lock.tensorrt = LibraryVersion(s, "tensorrt");
  if (!s.ort_version.empty()) lock.onnxruntime = s.ort_version;
  if (s.driver.initialized && !s.driver.devices.empty()) {
    lock.gpu_name = s.driver.devices.front().name;
    lock.compute_capability = ComputeCapability(s.driver.devices.front());
  }
  return lock;
}

std::string LockToJson(const VersionLock& lock) {
  rapidjson::StringBuffer buffer;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key(kFormatKey);
  w.Int(kFormat);
  for (const Component& c : kComponents) {
    w.Key(c.key);
    const std::optional<std::string>& value = lock.*c.member;
    if (value) {
      w.String(value->c_str(), static_cast<rapidjson::SizeType>(value->size()));
    } else {
      w.Null();
    }
  }
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

StatusOr<VersionLock> ParseLock(const std::string& text, const std::string& source) {
  rapidjson::Document doc;
  if (const std::string error = json::ParseBounded(&doc, text); !error.empty()) {
    return InvalidArgument("version lock " + source + " is not valid JSON: " + error);
  }
  if (!doc.IsObject()) return InvalidArgument("version lock " + source + " must be a JSON object");
  auto format = doc.FindMember(kFormatKey);
  if (format == doc.MemberEnd() || !format->value.IsInt() || format->value.GetInt() != kFormat) {
    return InvalidArgument("version lock " + source + ": \"" + kFormatKey + "\" must be " +
                           std::to_string(kFormat) +
                           " (write the file with `fastpath doctor --lock`)");
  }
  VersionLock lock;
  std::set<std::string> seen;
  for (auto it = doc.MemberBegin(); it != doc.MemberEnd(); ++it) {
    const std::string key(it->name.GetString(), it->name.GetStringLength());
    // A key written twice pins whichever a reader keeps: refused, as doctor --diff does.
    if (!seen.insert(key).second) {
      return InvalidArgument("version lock " + source + ": \"" + key + "\" appears twice");
    }
    if (key == kFormatKey) continue;
    const Component* component = nullptr;
    for (const Component& c : kComponents) {
      if (key == c.key) component = &c;
    }
    if (component == nullptr) {
      std::string known;
      for (const Component& c : kComponents)
        known += (known.empty() ? "" : ", ") + std::string(c.key);
      return InvalidArgument("version lock " + source + ": unknown key \"" + key +
                             "\" (known: " + known + ")");
    }
    if (it->value.IsNull()) continue;
    if (!it->value.IsString() || it->value.GetStringLength() == 0) {
      return InvalidArgument("version lock " + source + ": \"" + key +
                             "\" must be a non-empty string, or null to leave it unpinned");
    }
    lock.*(component->member) = std::string(it->value.GetString(), it->value.GetStringLength());
  }
  return lock;
}

StatusOr<VersionLock> ReadLockFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read version lock " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return ParseLock(text.str(), path);
}

std::vector<LockMismatch> CheckLock(const VersionLock& lock, const gpu::CapabilitySnapshot& s) {
  const VersionLock found = LockFromSnapshot(s);
  std::vector<LockMismatch> out;
  for (const Component& c : kComponents) {
    const std::optional<std::string>& expected = lock.*c.member;
    if (!expected) continue;
    const std::string key = c.key;
    if (key == "gpu_name" || key == "compute_capability") {
      // Every device must match, not only the first: a mixed node is not the pinned node.
      if (!s.driver.initialized || s.driver.devices.empty()) {
        out.push_back({key, *expected, WhyMissing(key, s)});
        continue;
      }
      for (const gpu::DriverDevice& dev : s.driver.devices) {
        const std::string value = key == "gpu_name" ? dev.name : ComputeCapability(dev);
        if (value != *expected) {
          out.push_back(
              {key, *expected,
               value + (s.driver.devices.size() > 1 ? " (GPU " + std::to_string(dev.ordinal) + ")"
                                                    : "")});
        }
      }
      continue;
    }
    const std::optional<std::string>& value = found.*c.member;
    if (!value) {
      out.push_back({key, *expected, WhyMissing(key, s)});
    } else if (*value != *expected) {
      out.push_back({key, *expected, *value});
    }
  }
  return out;
}

std::string DescribeMismatches(const std::vector<LockMismatch>& mismatches) {
  std::string out;
  for (const LockMismatch& m : mismatches) {
    out += "  " + m.component + ": expected " + m.expected + ", found " + m.found + "\n";
  }
  return out;
}

std::vector<std::string> PinnedComponents(const VersionLock& lock) {
  std::vector<std::string> out;
  for (const Component& c : kComponents) {
    if (lock.*c.member) out.push_back(c.key);
  }
  return out;
}

}  // namespace fastpath::admission
