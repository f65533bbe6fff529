// The probes against the fake NVIDIA libraries of tests/fakes/fake_cuda: the real dlopen,
// symbol lookup, error naming and decoding run; the fakes read FASTPATH_FAKE_* at call
// time, so each test describes its machine with environment variables.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "fastpath/gpu/capability_snapshot.h"
#include "fastpath/gpu/snapshot_json.h"

namespace fastpath::gpu {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string FakeLib(const std::string& relative) {
  return std::string(FASTPATH_FAKE_CUDA_LIB_DIR) + "/" + relative;
}

std::vector<FailureClass> Classes(const std::vector<Finding>& findings) {
  std::vector<FailureClass> classes;
  for (const Finding& f : findings) classes.push_back(f.failure);
  return classes;
}

class CapabilitySnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("fastpath_gpu_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    env_.root = root_.string();
    env_.getenv = [this](const std::string& name) -> std::optional<std::string> {
      auto it = process_env_.find(name);
      if (it == process_env_.end()) return std::nullopt;
      return it->second;
    };
    env_.driver = {FakeLib("cuda/libcuda.so.1")};
    env_.nvml = {FakeLib("nvml/libnvidia-ml.so.1")};
    env_.cudart = {FakeLib("cudart/libcudart.so.13")};
    env_.cublas = {FakeLib("cublas/libcublas.so.13")};
    env_.cudnn = {FakeLib("cudnn/libcudnn.so.9")};
    env_.tensorrt = {FakeLib("tensorrt/libnvinfer.so.10")};
    env_.nccl = {FakeLib("nccl/libnccl.so.2")};
  }

  void TearDown() override {
    for (const std::string& name : set_) ::unsetenv(name.c_str());
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // Configures the fakes (they read the real process environment).
  void Fake(const std::string& name, const std::string& value) {
    ::setenv(name.c_str(), value.c_str(), 1);
    set_.push_back(name);
  }

  void WriteFile(const std::string& relative, const std::string& content) {
    const fs::path path = root_ / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << content;
  }

  fs::path root_;
  ProbeEnvironment env_;
  std::map<std::string, std::string> process_env_;  // what the container probe sees
  std::vector<std::string> set_;
};

TEST_F(CapabilitySnapshotTest, HealthyMachineHasNoFindings) {
  const CapabilitySnapshot s = TakeSnapshot(env_);
  EXPECT_TRUE(s.driver.library_found);
  EXPECT_EQ(s.driver.library_path, FakeLib("cuda/libcuda.so.1"));
  EXPECT_TRUE(s.driver.initialized);
  EXPECT_EQ(s.driver.cuda_version.ToString(), "13.0");
  ASSERT_EQ(s.driver.devices.size(), 1u);
  EXPECT_EQ(s.driver.devices[0].name, "Fake GPU");
  EXPECT_TRUE(s.nvml.initialized);
  EXPECT_EQ(s.nvml.driver_version, "580.65.06");
  ASSERT_EQ(s.nvml.devices.size(), 1u);
  EXPECT_EQ(s.nvml.devices[0].power_limit_mw, 700000u);
  EXPECT_EQ(s.nvml.devices[0].sm_clock_mhz, 1980u);
  EXPECT_EQ(s.nvml.devices[0].mem_clock_mhz, 2619u);
  EXPECT_THAT(s.nvml.devices[0].clock_event_reason_names, ElementsAre("GPU idle"));
  EXPECT_THAT(s.compatibility.problems, IsEmpty());
  EXPECT_THAT(Assess(s), IsEmpty());
}

TEST_F(CapabilitySnapshotTest, NoDriverLibrary) {
  env_.driver = {FakeLib("absent/libcuda.so.1")};
  const CapabilitySnapshot s = TakeSnapshot(env_);
  EXPECT_FALSE(s.driver.library_found);
  EXPECT_THAT(s.driver.load_error, HasSubstr("absent/libcuda.so.1"));
  const std::vector<Finding> findings = Assess(s);
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings[0].failure, FailureClass::kNoDriverLibrary);
  EXPECT_THAT(findings[0].message, HasSubstr("libcuda.so.1 cannot be loaded"));
  EXPECT_THAT(findings[0].message, HasSubstr("No /dev/nvidia* device nodes"));
}

TEST_F(CapabilitySnapshotTest, DriverButNoDevice) {
  Fake("FASTPATH_FAKE_CUDA_DEVICES", "0");
  process_env_["CUDA_VISIBLE_DEVICES"] = "";
  const CapabilitySnapshot s = TakeSnapshot(env_);
  EXPECT_TRUE(s.driver.library_found);
  EXPECT_FALSE(s.driver.initialized);
  EXPECT_EQ(s.driver.init_result, 100);
  EXPECT_EQ(s.driver.init_error, "CUDA_ERROR_NO_DEVICE");
  EXPECT_EQ(s.driver.cuda_version.ToString(), "13.0");  // known even without a device
  const std::vector<Finding> findings = Assess(s);
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings[0].failure, FailureClass::kNoDevice);
  EXPECT_THAT(findings[0].message, HasSubstr("cuInit failed with CUDA_ERROR_NO_DEVICE"));
  EXPECT_THAT(findings[0].message, HasSubstr("CUDA_VISIBLE_DEVICES='' hides every device"));
}

TEST_F(CapabilitySnapshotTest, CuInitErrorsAreNamedAndClassified) {
  struct Case {
    const char* code;
    const char* name;
    FailureClass failure;
  };
  for (const Case& c : {Case{"35", "CUDA_ERROR_INSUFFICIENT_DRIVER", FailureClass::kDriverTooOld},
                        Case{"804", "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", FailureClass::kDriverTooOld},
                        Case{"34", "CUDA_ERROR_STUB_LIBRARY", FailureClass::kDriverInitFailed},
                        // Unknown to cuGetErrorName: the probe's own fallback names it.
                        Case{"12345", "CUresult 12345", FailureClass::kDriverInitFailed}}) {
    SCOPED_TRACE(c.code);
    Fake("FASTPATH_FAKE_CUDA_INIT_ERROR", c.code);
    const DriverInfo driver = ProbeDriver(env_);
    EXPECT_EQ(driver.init_error, c.name);
    CapabilitySnapshot s;
    s.driver = driver;
    s.nvml.library_found = s.nvml.initialized = true;
    const std::vector<Finding> findings = Assess(s);
    ASSERT_FALSE(findings.empty());
    EXPECT_EQ(findings[0].failure, c.failure);
    EXPECT_THAT(findings[0].message, HasSubstr(c.name));
  }
}

TEST_F(CapabilitySnapshotTest, DriverTooOldForTheRuntime) {
  Fake("FASTPATH_FAKE_CUDA_DRIVER_VERSION", "12040");
  Fake("FASTPATH_FAKE_CUDART_VERSION", "13000");
  Fake("FASTPATH_FAKE_CUBLAS_VERSION", "12.4.5");
  Fake("FASTPATH_FAKE_CUDNN_CUDART", "12040");
  const CapabilitySnapshot s = TakeSnapshot(env_);
  EXPECT_TRUE(s.driver.initialized);
  EXPECT_EQ(s.driver.cuda_version.ToString(), "12.4");
  ASSERT_EQ(s.compatibility.problems.size(), 1u);
  EXPECT_THAT(s.compatibility.problems[0],
              HasSubstr("cudart 13.0 needs CUDA 13.0 but the driver supports CUDA 12.4"));
  EXPECT_THAT(s.compatibility.problems[0], HasSubstr("CUDA driver version is insufficient"));
  const std::vector<Finding> findings = Assess(s);
  EXPECT_THAT(Classes(findings), ElementsAre(FailureClass::kDriverTooOld));
  EXPECT_THAT(findings[0].message, HasSubstr("Upgrade the driver, or install the cuda-compat package"));
}

TEST_F(CapabilitySnapshotTest, OlderMinorVersionIsNamedAsMinorVersionCompatibility) {
  Fake("FASTPATH_FAKE_CUDA_DRIVER_VERSION", "12040");
  Fake("FASTPATH_FAKE_CUDART_VERSION", "12080");
  Fake("FASTPATH_FAKE_CUBLAS_VERSION", "12.8.4");
  Fake("FASTPATH_FAKE_CUDNN_CUDART", "12080");
  const CapabilitySnapshot s = TakeSnapshot(env_);
  // cuBLAS and cuDNN bind only the CUDA major; cudart binds its major.minor.
  ASSERT_EQ(s.compatibility.problems.size(), 1u);
  EXPECT_THAT(s.compatibility.problems[0], HasSubstr("cudart 12.8 needs CUDA 12.8"));
  EXPECT_THAT(s.compatibility.problems[0], HasSubstr("minor-version compatibility"));

  // A CUDA 13 cuBLAS or cuDNN on a CUDA 12 driver is a major mismatch.
  Fake("FASTPATH_FAKE_CUDART_VERSION", "12040");
  Fake("FASTPATH_FAKE_CUBLAS_VERSION", "13.1.0");
  Fake("FASTPATH_FAKE_CUDNN_CUDART", "13010");
  const CapabilitySnapshot major = TakeSnapshot(env_);
  ASSERT_EQ(major.compatibility.problems.size(), 2u);
  EXPECT_THAT(major.compatibility.problems[0], HasSubstr("cublas 13.1.0 needs CUDA 13.0"));
  EXPECT_THAT(major.compatibility.problems[1], HasSubstr("cudnn 9.10.2 needs CUDA 13.0"));
}

TEST_F(CapabilitySnapshotTest, CudaCompatPackageDetected) {
  Fake("FASTPATH_FAKE_CUDA_DRIVER_VERSION", "12040");
  WriteFile("usr/local/cuda/compat/libcuda.so.580.65.06", "");
  CapabilitySnapshot s = TakeSnapshot(env_);
  EXPECT_THAT(s.compatibility.compat_libraries,
              ElementsAre("/usr/local/cuda/compat/libcuda.so.580.65.06"));
  EXPECT_FALSE(s.compatibility.compat_driver_loaded);
  std::vector<Finding> findings = Assess(s);
  ASSERT_FALSE(findings.empty());
  EXPECT_THAT(findings[0].message, HasSubstr("cuda-compat is installed"));
  EXPECT_THAT(findings[0].message, HasSubstr("not loaded"));

  // The same driver loaded from a compat directory is recognised as the compat driver.
  const fs::path compat = root_ / "usr/local/cuda/compat/libcuda.so.1";
  fs::copy_file(FakeLib("cuda/libcuda.so.1"), compat);
  env_.driver = {compat.string()};
  Fake("FASTPATH_FAKE_CUDA_DRIVER_VERSION", "13000");
  s = TakeSnapshot(env_);
  EXPECT_TRUE(s.compatibility.compat_driver_loaded);
  EXPECT_THAT(Assess(s), IsEmpty());
}

TEST_F(CapabilitySnapshotTest, TwoDevicesWithNamesComputeCapabilityAndMemory) {
  Fake("FASTPATH_FAKE_CUDA_DEVICES", "2");
  Fake("FASTPATH_FAKE_CUDA_DEVICE_NAMES", "NVIDIA H100 80GB HBM3,NVIDIA A100-SXM4-40GB");
  Fake("FASTPATH_FAKE_CUDA_CC", "9.0,8.0");
  Fake("FASTPATH_FAKE_CUDA_MEMORY_MIB", "81559,40960");
  const DriverInfo d = ProbeDriver(env_);
  ASSERT_TRUE(d.initialized) << d.init_error;
  EXPECT_EQ(d.device_count, 2);
  ASSERT_EQ(d.devices.size(), 2u);
  EXPECT_EQ(d.devices[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(d.devices[0].compute_capability_major, 9);
  EXPECT_EQ(d.devices[0].compute_capability_minor, 0);
  EXPECT_EQ(d.devices[0].total_memory_bytes, 81559ull << 20);
  EXPECT_EQ(d.devices[1].name, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(d.devices[1].compute_capability_major, 8);
  EXPECT_EQ(d.devices[1].total_memory_bytes, 40960ull << 20);
  EXPECT_TRUE(d.devices[1].error.empty()) << d.devices[1].error;
  const NvmlInfo n = ProbeNvml(env_);
  ASSERT_EQ(n.devices.size(), 2u);
  EXPECT_EQ(n.devices[1].name, "NVIDIA A100-SXM4-40GB");
}

TEST_F(CapabilitySnapshotTest, NvmlAbsentWhileTheDriverIsPresent) {
  env_.nvml = {FakeLib("absent/libnvidia-ml.so.1")};
  const CapabilitySnapshot s = TakeSnapshot(env_);
  EXPECT_TRUE(s.driver.initialized);
  EXPECT_FALSE(s.nvml.library_found);
  const std::vector<Finding> findings = Assess(s);
  EXPECT_THAT(Classes(findings), ElementsAre(FailureClass::kNvmlUnavailable));
  EXPECT_THAT(findings[0].message, HasSubstr("libnvidia-ml.so.1"));
}

TEST_F(CapabilitySnapshotTest, NvmlInitFailureIsNamed) {
  Fake("FASTPATH_FAKE_NVML_INIT_ERROR", "9");
  const NvmlInfo n = ProbeNvml(env_);
  EXPECT_TRUE(n.library_found);
  EXPECT_FALSE(n.initialized);
  EXPECT_EQ(n.init_error, "NVML_ERROR_DRIVER_NOT_LOADED (Driver Not Loaded)");
}

TEST_F(CapabilitySnapshotTest, ThrottleReasonsDecoded) {
  Fake("FASTPATH_FAKE_NVML_THROTTLE", "0x45");  // GPU idle | SW power cap | HW thermal
  const CapabilitySnapshot s = TakeSnapshot(env_);
  ASSERT_EQ(s.nvml.devices.size(), 1u);
  EXPECT_EQ(s.nvml.devices[0].clock_event_reasons, 0x45u);
  EXPECT_THAT(s.nvml.devices[0].clock_event_reason_names,
              ElementsAre("GPU idle", "SW power cap", "HW thermal slowdown"));
  const std::vector<Finding> findings = Assess(s);
  EXPECT_THAT(Classes(findings), ElementsAre(FailureClass::kDeviceUnhealthy));
  EXPECT_THAT(findings[0].message, HasSubstr("slowed by hardware (HW thermal slowdown)"));
}

TEST(ClockEventReasons, EveryKnownBitAndUnknownBits) {
  EXPECT_THAT(DecodeClockEventReasons(0x1FF),
              ElementsAre("GPU idle", "applications clocks setting", "SW power cap", "HW slowdown",
                          "sync boost", "SW thermal slowdown", "HW thermal slowdown",
                          "HW power brake slowdown", "display clock setting"));
  EXPECT_THAT(DecodeClockEventReasons(0x200), ElementsAre("unknown (0x200)"));
  EXPECT_THAT(DecodeClockEventReasons(0), IsEmpty());
}

TEST_F(CapabilitySnapshotTest, EccErrorsReported) {
  Fake("FASTPATH_FAKE_NVML_ECC_CORRECTED", "3");
  Fake("FASTPATH_FAKE_NVML_ECC_UNCORRECTED", "2");
  const CapabilitySnapshot s = TakeSnapshot(env_);
  ASSERT_EQ(s.nvml.devices.size(), 1u);
  EXPECT_EQ(s.nvml.devices[0].ecc_enabled, true);
  EXPECT_EQ(s.nvml.devices[0].ecc_corrected_volatile, 3u);
  EXPECT_EQ(s.nvml.devices[0].ecc_uncorrected_volatile, 2u);
  const std::vector<Finding> findings = Assess(s);
  EXPECT_THAT(Classes(findings), ElementsAre(FailureClass::kDeviceUnhealthy));
  EXPECT_THAT(findings[0].message, HasSubstr("has 2 uncorrected ECC errors"));

  Fake("FASTPATH_FAKE_NVML_ECC", "0");  // ECC off: no counters to read
  const NvmlInfo off = ProbeNvml(env_);
  EXPECT_EQ(off.devices[0].ecc_enabled, false);
  EXPECT_FALSE(off.devices[0].ecc_uncorrected_volatile.has_value());
}

TEST_F(CapabilitySnapshotTest, MigModeAndSlice) {
  Fake("FASTPATH_FAKE_NVML_MIG", "1");
  Fake("FASTPATH_FAKE_NVML_MIG_INSTANCES", "3");
  process_env_["CUDA_VISIBLE_DEVICES"] = "MIG-4f5c2a1e-6d7b-5c3a-9e8f-1a2b3c4d5e6f";
  process_env_["NVIDIA_VISIBLE_DEVICES"] = "0";
  const CapabilitySnapshot s = TakeSnapshot(env_);
  ASSERT_EQ(s.nvml.devices.size(), 1u);
  EXPECT_EQ(s.nvml.devices[0].mig_enabled, true);
  EXPECT_EQ(s.nvml.devices[0].mig_instances, 3);
  EXPECT_EQ(s.container.mig_device, "MIG-4f5c2a1e-6d7b-5c3a-9e8f-1a2b3c4d5e6f");
  EXPECT_EQ(s.container.nvidia_visible_devices, "0");
  EXPECT_THAT(Assess(s), IsEmpty());
}

TEST_F(CapabilitySnapshotTest, MissingOptionalNvmlSymbolsAreNotSupported) {
  env_.nvml = {FakeLib("nvml_minimal/libnvidia-ml.so.1")};
  Fake("FASTPATH_FAKE_NVML_THROTTLE", "0x4");
  const NvmlInfo n = ProbeNvml(env_);
  ASSERT_TRUE(n.initialized);
  ASSERT_EQ(n.devices.size(), 1u);
  const NvmlDevice& d = n.devices[0];
  EXPECT_EQ(d.name, "Fake GPU");
  EXPECT_FALSE(d.mig_enabled.has_value());
  EXPECT_FALSE(d.ecc_enabled.has_value());
  EXPECT_FALSE(d.power_limit_mw.has_value());
  EXPECT_EQ(d.sm_clock_mhz, 1980u);
  // Found through the pre-12.2 name nvmlDeviceGetCurrentClocksThrottleReasons.
  EXPECT_THAT(d.clock_event_reason_names, ElementsAre("SW power cap"));
  EXPECT_TRUE(d.error.empty()) << d.error;
  EXPECT_TRUE(n.error.empty()) << n.error;
}

TEST_F(CapabilitySnapshotTest, CallAnsweringNotSupportedIsNotAnError) {
  Fake("FASTPATH_FAKE_NVML_NOT_SUPPORTED", "nvmlDeviceGetPowerManagementLimit,nvmlDeviceGetEccMode");
  const NvmlInfo n = ProbeNvml(env_);
  ASSERT_EQ(n.devices.size(), 1u);
  EXPECT_FALSE(n.devices[0].power_limit_mw.has_value());
  EXPECT_FALSE(n.devices[0].ecc_enabled.has_value());
  EXPECT_TRUE(n.devices[0].mig_enabled.has_value());
  EXPECT_TRUE(n.devices[0].error.empty()) << n.devices[0].error;
}

TEST_F(CapabilitySnapshotTest, LibraryVersions) {
  Fake("FASTPATH_FAKE_CUDNN_VERSION", "8907");
  const std::vector<LibraryInfo> libs = ProbeLibraries(env_);
  ASSERT_EQ(libs.size(), 5u);
  std::map<std::string, LibraryInfo> by_name;
  for (const LibraryInfo& lib : libs) by_name[lib.name] = lib;
  EXPECT_EQ(by_name["cudart"].version, "13.0");
  EXPECT_EQ(by_name["cudart"].soname, FakeLib("cudart/libcudart.so.13"));
  EXPECT_EQ(by_name["cublas"].version, "13.0.2");
  EXPECT_EQ(by_name["cudnn"].version, "8.9.7");
  EXPECT_EQ(by_name["cudnn"].requires_cuda.ToString(), "13.0");
  EXPECT_EQ(by_name["cublas"].requires_cuda.ToString(), "13.0");
  EXPECT_EQ(by_name["tensorrt"].version, "10.13.0");
  EXPECT_FALSE(by_name["tensorrt"].requires_cuda.known());
  EXPECT_EQ(by_name["nccl"].version, "2.27.5");
  for (const LibraryInfo& lib : libs) EXPECT_TRUE(lib.error.empty()) << lib.name << ": " << lib.error;

  Fake("FASTPATH_FAKE_CUDNN_VERSION", "91002");
  env_.cudart = {FakeLib("absent/libcudart.so.13"), FakeLib("absent/libcudart.so.12")};
  const std::vector<LibraryInfo> again = ProbeLibraries(env_);
  EXPECT_EQ(again[2].version, "9.10.2");
  EXPECT_FALSE(again[0].found);
  EXPECT_THAT(again[0].error, HasSubstr("libcudart.so.12"));
}

TEST_F(CapabilitySnapshotTest, NoCudaRuntime) {
  env_.cudart = {FakeLib("absent/libcudart.so.13")};
  EXPECT_THAT(Classes(Assess(TakeSnapshot(env_))), ElementsAre(FailureClass::kNoCudaRuntime));
}

TEST_F(CapabilitySnapshotTest, ContainerDeviceNodesAndCgroupV2) {
  WriteFile("dev/nvidia0", "");
  WriteFile("dev/nvidiactl", "");
  WriteFile("dev/nvidia-uvm", "");
  WriteFile("dev/null", "");
  WriteFile("proc/self/cgroup", "0::/kubepods/pod1/abc\n");
  WriteFile("sys/fs/cgroup/kubepods/pod1/abc/memory.max", "8589934592\n");
  WriteFile("sys/fs/cgroup/memory.max", "max\n");
  ContainerInfo c = ProbeContainer(env_);
  EXPECT_THAT(c.device_nodes, ElementsAre("/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidiactl"));
  EXPECT_EQ(c.cgroup_version, "v2");
  EXPECT_EQ(c.cgroup_memory_limit_bytes, 8589934592u);
  EXPECT_FALSE(c.nvidia_visible_devices.has_value());

  fs::remove_all(root_ / "sys/fs/cgroup/kubepods");  // a cgroup namespace: the root is ours
  c = ProbeContainer(env_);
  EXPECT_EQ(c.cgroup_version, "v2");
  EXPECT_FALSE(c.cgroup_memory_limit_bytes.has_value());  // "max"
}

TEST_F(CapabilitySnapshotTest, ContainerCgroupV1) {
  WriteFile("proc/self/cgroup", "4:memory:/docker/xyz\n0::/\n");
  WriteFile("sys/fs/cgroup/memory/docker/xyz/memory.limit_in_bytes", "4294967296\n");
  ContainerInfo c = ProbeContainer(env_);
  EXPECT_EQ(c.cgroup_version, "v1");
  EXPECT_EQ(c.cgroup_memory_limit_bytes, 4294967296u);
  WriteFile("sys/fs/cgroup/memory/docker/xyz/memory.limit_in_bytes", "9223372036854771712\n");
  c = ProbeContainer(env_);
  EXPECT_FALSE(c.cgroup_memory_limit_bytes.has_value());  // v1's "unlimited"
  EXPECT_THAT(c.device_nodes, IsEmpty());
}

TEST_F(CapabilitySnapshotTest, UsableCoresAreTheAffinityMaskCappedByTheCgroupQuota) {
  WriteFile("proc/self/status", "Name:\tfastpath\nCpus_allowed_list:\t0-3,8-11\n");
  WriteFile("proc/self/cgroup", "0::/kubepods/pod1/abc\n");
  WriteFile("sys/fs/cgroup/kubepods/pod1/abc/memory.max", "max\n");
  WriteFile("sys/fs/cgroup/kubepods/pod1/abc/cpu.max", "max 100000\n");
  ContainerInfo c = ProbeContainer(env_);
  EXPECT_EQ(c.allowed_cpus, 8u);
  EXPECT_FALSE(c.cgroup_cpu_quota.has_value());
  EXPECT_EQ(UsableCores(c), 8u);
  // A pod limit of 2.5 CPUs: 3 threads, never more than the mask.
  WriteFile("sys/fs/cgroup/kubepods/pod1/abc/cpu.max", "250000 100000\n");
  c = ProbeContainer(env_);
  EXPECT_DOUBLE_EQ(*c.cgroup_cpu_quota, 2.5);
  EXPECT_EQ(UsableCores(c), 3u);
  // cgroup v1's cfs quota.
  fs::remove_all(root_ / "sys/fs/cgroup/kubepods");
  fs::remove(root_ / "sys/fs/cgroup/memory.max");
  WriteFile("proc/self/cgroup", "3:cpu,cpuacct:/docker/xyz\n");
  WriteFile("sys/fs/cgroup/cpu,cpuacct/docker/xyz/cpu.cfs_quota_us", "100000\n");
  WriteFile("sys/fs/cgroup/cpu,cpuacct/docker/xyz/cpu.cfs_period_us", "100000\n");
  c = ProbeContainer(env_);
  EXPECT_EQ(UsableCores(c), 1u);
  // Nothing known: 0, and the caller keeps its own default.
  EXPECT_EQ(UsableCores(ContainerInfo{}), 0u);
}

TEST_F(CapabilitySnapshotTest, JsonCarriesEverySectionAndNullForNotSupported) {
  env_.nvml = {FakeLib("nvml_minimal/libnvidia-ml.so.1")};
  Fake("FASTPATH_FAKE_CUDA_DEVICES", "0");
  Fake("FASTPATH_FAKE_NVML_DEVICES", "1");
  CapabilitySnapshot s = TakeSnapshot(env_);
  s.fastpath_version = "0.1.0";
  const std::string json = SnapshotToJson(s, Assess(s));
  rapidjson::Document doc;
  ASSERT_FALSE(doc.Parse(json.c_str()).HasParseError()) << json;
  EXPECT_EQ(std::string(doc["fastpath_version"].GetString()), "0.1.0");
  EXPECT_EQ(std::string(doc["driver"]["init_error"].GetString()), "CUDA_ERROR_NO_DEVICE");
  EXPECT_EQ(std::string(doc["driver"]["cuda_version"].GetString()), "13.0");
  ASSERT_EQ(doc["nvml"]["devices"].Size(), 1u);
  EXPECT_TRUE(doc["nvml"]["devices"][0]["power_limit_mw"].IsNull());
  EXPECT_EQ(doc["libraries"].Size(), 5u);
  EXPECT_TRUE(doc["container"]["cuda_visible_devices"].IsNull());
  ASSERT_GE(doc["findings"].Size(), 1u);
  EXPECT_EQ(std::string(doc["findings"][0]["class"].GetString()), "no-device");
  EXPECT_EQ(doc["findings"][0]["exit_code"].GetInt(), 11);
}

}  // namespace
}  // namespace fastpath::gpu
