// The probes that read the host rather than the driver: CUDA libraries on the library
// path, container plumbing, and the driver/library compatibility check.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "fastpath/gpu/capability_snapshot.h"
#include "shared_library.h"

namespace fastpath::gpu {
namespace {

namespace fs = std::filesystem;

using CudaRuntimeGetVersionFn = int (*)(int*);       // cudaError_t cudaRuntimeGetVersion(int*)
using CublasGetPropertyFn = int (*)(int, int*);      // cublasStatus_t cublasGetProperty(libraryPropertyType, int*)
using CudnnGetVersionFn = size_t (*)();              // size_t cudnnGetVersion(void)
using CudnnGetCudartVersionFn = size_t (*)();        // size_t cudnnGetCudartVersion(void)
using GetInferLibVersionFn = int32_t (*)();          // int32_t getInferLibVersion(void)
using NcclGetVersionFn = int (*)(int*);              // ncclResult_t ncclGetVersion(int*)

// Splits a version encoded as major*scale + minor*100 + patch.
std::string Dotted(int64_t encoded, int64_t scale) {
  return std::to_string(encoded / scale) + "." + std::to_string((encoded % scale) / 100) + "." +
         std::to_string(encoded % 100);
}

fs::path UnderRoot(const ProbeEnvironment& env, const std::string& absolute) {
  return fs::path(env.root) / fs::path(absolute).relative_path();
}

std::optional<std::string> ReadFirstLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

std::optional<uint64_t> ParseU64(const std::string& text) {
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

LibraryInfo ProbeOne(const std::string& name, const std::vector<std::string>& candidates,
                     const std::function<void(const SharedLibrary&, LibraryInfo&)>& read_version) {
  LibraryInfo info;
  info.name = name;
  SharedLibrary lib = SharedLibrary::OpenFirst(candidates);
  if (!lib.loaded()) {
    info.error = lib.error();
    return info;
  }
  info.found = true;
  info.soname = lib.candidate();
  info.path = lib.path();
  read_version(lib, info);
  return info;
}

}  // namespace

std::string CudaVersion::ToString() const {
  if (!known()) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

ProbeEnvironment ProbeEnvironment::Host() {
  ProbeEnvironment env;
  env.getenv = [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
  return env;
}

std::vector<LibraryInfo> ProbeLibraries(const ProbeEnvironment& env) {
  std::vector<LibraryInfo> libraries;
  libraries.push_back(ProbeOne("cudart", env.cudart, [](const SharedLibrary& lib, LibraryInfo& info) {
    auto get = lib.Function<CudaRuntimeGetVersionFn>("cudaRuntimeGetVersion");
    int encoded = 0;
    if (get == nullptr) {
      info.error = "lacks cudaRuntimeGetVersion";
    } else if (int r = get(&encoded); r != 0) {
      info.error = "cudaRuntimeGetVersion: cudaError " + std::to_string(r);
    } else {
      info.requires_cuda = CudaVersion::FromEncoded(encoded);
      info.version = info.requires_cuda.ToString();
    }
  }));
  libraries.push_back(ProbeOne("cublas", env.cublas, [](const SharedLibrary& lib, LibraryInfo& info) {
    auto get = lib.Function<CublasGetPropertyFn>("cublasGetProperty");
    int major = 0, minor = 0, patch = 0;  // MAJOR_VERSION = 0, MINOR_VERSION = 1, PATCH_LEVEL = 2
    if (get == nullptr) {
      info.error = "lacks cublasGetProperty";
    } else if (get(0, &major) != 0 || get(1, &minor) != 0 || get(2, &patch) != 0) {
      info.error = "cublasGetProperty failed";
    } else {
      info.version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
      // cuBLAS's major is its CUDA major, but its minor is not the toolkit's (CUDA 13.0
      // ships cuBLAS 13.1), and it relies on minor-version compatibility: only the major binds.
      info.requires_cuda = {major, 0};
    }
  }));
  libraries.push_back(ProbeOne("cudnn", env.cudnn, [](const SharedLibrary& lib, LibraryInfo& info) {
    auto get = lib.Function<CudnnGetVersionFn>("cudnnGetVersion");
    if (get == nullptr) {
      info.error = "lacks cudnnGetVersion";
      return;
    }
    const auto v = static_cast<int64_t>(get());
    info.version = Dotted(v, v >= 90000 ? 10000 : 1000);  // cuDNN 9: M*10000+m*100+p; 8: M*1000+...
    // cudnnGetCudartVersion is the CUDA cuDNN was built with (9.19 for CUDA 13 says 13.1);
    // cuDNN supports every driver of that CUDA major, so only the major binds.
    if (auto cudart = lib.Function<CudnnGetCudartVersionFn>("cudnnGetCudartVersion")) {
      info.requires_cuda = {CudaVersion::FromEncoded(static_cast<int>(cudart())).major, 0};
    }
  }));
  libraries.push_back(ProbeOne("tensorrt", env.tensorrt, [](const SharedLibrary& lib, LibraryInfo& info) {
    auto get = lib.Function<GetInferLibVersionFn>("getInferLibVersion");
    if (get == nullptr) {
      info.error = "lacks getInferLibVersion";
      return;
    }
    const int64_t v = get();
    info.version = Dotted(v, v >= 100000 ? 10000 : 1000);  // TensorRT 10: M*10000+m*100+p; 8: M*1000+...
  }));
  libraries.push_back(ProbeOne("nccl", env.nccl, [](const SharedLibrary& lib, LibraryInfo& info) {
    auto get = lib.Function<NcclGetVersionFn>("ncclGetVersion");
    int v = 0;
    if (get == nullptr) {
      info.error = "lacks ncclGetVersion";
    } else if (int r = get(&v); r != 0) {
      info.error = "ncclGetVersion: ncclResult " + std::to_string(r);
    } else {
      info.version = Dotted(v, v >= 20900 ? 10000 : 1000);  // NCCL 2.9+: M*10000+m*100+p
    }
  }));
  return libraries;
}

ContainerInfo ProbeContainer(const ProbeEnvironment& env) {
  ContainerInfo info;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(UnderRoot(env, "/dev"), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("nvidia", 0) == 0) info.device_nodes.push_back("/dev/" + name);
  }
  std::sort(info.device_nodes.begin(), info.device_nodes.end());

  if (env.getenv) {
    info.nvidia_visible_devices = env.getenv("NVIDIA_VISIBLE_DEVICES");
    info.cuda_visible_devices = env.getenv("CUDA_VISIBLE_DEVICES");
  }
  for (const auto& selection : {info.cuda_visible_devices, info.nvidia_visible_devices}) {
    if (!selection || info.mig_device) continue;
    std::stringstream list(*selection);
    std::string item;
    while (std::getline(list, item, ',')) {
      if (item.rfind("MIG-", 0) == 0) {
        info.mig_device = item;
        break;
      }
    }
  }

  // The affinity mask: "0-3,8-11".
  {
    std::ifstream in(UnderRoot(env, "/proc/self/status"));
    std::string line;
    const std::string key = "Cpus_allowed_list:";
    while (std::getline(in, line)) {
      if (line.rfind(key, 0) != 0) continue;
      std::stringstream ranges(line.substr(key.size()));
      std::string range;
      uint32_t count = 0;
      bool valid = true;
      while (std::getline(ranges, range, ',')) {
        range.erase(0, range.find_first_not_of(" \t"));
        const size_t dash = range.find('-');
        const auto first = ParseU64(range.substr(0, dash));
        const auto last = dash == std::string::npos ? first : ParseU64(range.substr(dash + 1));
        if (!first || !last || *last < *first) {
          valid = false;
          break;
        }
        count += static_cast<uint32_t>(*last - *first + 1);
      }
      if (valid && count > 0) info.allowed_cpus = count;
    }
  }

  // The process's own cgroup, from /proc/self/cgroup ("0::/path" for v2,
  // "N:...memory...:/path" for v1), then the root of the hierarchy as seen from a
  // container with its own cgroup namespace.
  std::string v2_path, v1_path, v1_cpu_path;
  {
    std::ifstream in(UnderRoot(env, "/proc/self/cgroup"));
    std::string line;
    while (std::getline(in, line)) {
      const size_t first = line.find(':');
      const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
      if (second == std::string::npos) continue;
      const std::string controllers = line.substr(first + 1, second - first - 1);
      const std::string path = line.substr(second + 1);
      if (line.rfind("0::", 0) == 0) v2_path = path;
      std::stringstream names(controllers);
      std::string controller;
      while (std::getline(names, controller, ',')) {
        if (controller == "memory") v1_path = path;
        if (controller == "cpu") v1_cpu_path = path;
      }
    }
  }
  for (const std::string& dir : {"/sys/fs/cgroup" + v2_path, std::string("/sys/fs/cgroup")}) {
    if (auto text = ReadFirstLine(UnderRoot(env, dir + "/memory.max"))) {
      info.cgroup_version = "v2";
      if (*text != "max") info.cgroup_memory_limit_bytes = ParseU64(*text);
      // "max 100000" (no quota) or "<quota> <period>" in microseconds.
      if (auto cpu = ReadFirstLine(UnderRoot(env, dir + "/cpu.max"))) {
        std::stringstream fields(*cpu);
        std::string quota, period;
        fields >> quota >> period;
        const auto q = ParseU64(quota), p = ParseU64(period);
        if (q && p && *p > 0) info.cgroup_cpu_quota = static_cast<double>(*q) / *p;
      }
      return info;
    }
  }
  for (const std::string& dir :
       {"/sys/fs/cgroup/cpu" + v1_cpu_path, "/sys/fs/cgroup/cpu,cpuacct" + v1_cpu_path,
        std::string("/sys/fs/cgroup/cpu")}) {
    // -1: no quota (ParseU64 refuses it).
    const auto q = ParseU64(ReadFirstLine(UnderRoot(env, dir + "/cpu.cfs_quota_us")).value_or(""));
    const auto p =
        ParseU64(ReadFirstLine(UnderRoot(env, dir + "/cpu.cfs_period_us")).value_or(""));
    if (q && p && *p > 0) {
      info.cgroup_cpu_quota = static_cast<double>(*q) / *p;
      break;
    }
  }
  for (const std::string& dir : {"/sys/fs/cgroup/memory" + v1_path, std::string("/sys/fs/cgroup/memory")}) {
    if (auto text = ReadFirstLine(UnderRoot(env, dir + "/memory.limit_in_bytes"))) {
      info.cgroup_version = "v1";
      // v1 says "unlimited" with the largest page-aligned value, 0x7FFFFFFFFFFFF000.
      if (auto bytes = ParseU64(*text); bytes && *bytes < (uint64_t{1} << 62)) {
        info.cgroup_memory_limit_bytes = bytes;
      }
      return info;
    }
  }
  return info;
}

uint32_t UsableCores(const ContainerInfo& container) {
  uint32_t cores = container.allowed_cpus.value_or(0);
  if (container.cgroup_cpu_quota) {
    const auto quota = static_cast<uint32_t>(std::max(1.0, std::ceil(*container.cgroup_cpu_quota)));
    cores = cores == 0 ? quota : std::min(cores, quota);
  }
  return cores;
}

CompatibilityInfo CheckCompatibility(const ProbeEnvironment& env, const DriverInfo& driver,
                                     const std::vector<LibraryInfo>& libraries) {
  CompatibilityInfo info;
  std::error_code ec;
  for (const std::string dir : {"/usr/local/cuda/compat", "/usr/local/cuda/compat/lib"}) {
    for (const auto& entry : fs::directory_iterator(UnderRoot(env, dir), ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("libcuda.so", 0) == 0) info.compat_libraries.push_back(dir + "/" + name);
    }
  }
  std::sort(info.compat_libraries.begin(), info.compat_libraries.end());
  info.compat_driver_loaded =
      driver.library_found && driver.library_path.find("compat") != std::string::npos;

  if (!driver.library_found || !driver.cuda_version.known()) return info;
  for (const LibraryInfo& lib : libraries) {
    if (!lib.found || !lib.requires_cuda.known() || lib.requires_cuda <= driver.cuda_version) continue;
    std::string problem = lib.name + " " + lib.version + " needs CUDA " + lib.requires_cuda.ToString() +
                          " but the driver supports CUDA " + driver.cuda_version.ToString();
    if (lib.requires_cuda.major > driver.cuda_version.major) {
      problem += ": \"CUDA driver version is insufficient for CUDA runtime version\"";
    } else {
      problem += ": it runs only under minor-version compatibility (no PTX JIT, newer APIs fail)";
    }
    info.problems.push_back(std::move(problem));
  }
  return info;
}

CapabilitySnapshot TakeSnapshot(const ProbeEnvironment& env) {
  CapabilitySnapshot snapshot;
  snapshot.driver = ProbeDriver(env);
  snapshot.nvml = ProbeNvml(env);
  snapshot.libraries = ProbeLibraries(env);
  snapshot.container = ProbeContainer(env);
  snapshot.compatibility = CheckCompatibility(env, snapshot.driver, snapshot.libraries);
  return snapshot;
}

}  // namespace fastpath::gpu
