#include "fastpath/admission/version_lock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fastpath::admission {
namespace {

using ::testing::HasSubstr;

// A healthy H100 node as the probes would record it.
gpu::CapabilitySnapshot Node() {
  gpu::CapabilitySnapshot s;
  s.ort_version = "1.29.0";
  s.driver.library_found = true;
  s.driver.initialized = true;
  s.driver.cuda_version = {13, 0};
  s.driver.device_count = 1;
  s.driver.devices.push_back({0, "NVIDIA H100 80GB HBM3", 9, 0, 80ull << 30, ""});
  s.nvml.library_found = true;
  s.nvml.initialized = true;
  s.nvml.driver_version = "580.65.06";
  s.libraries = {{"cudart", true, "libcudart.so.13", "/x/libcudart.so.13", "13.0", {13, 0}, ""},
                 {"cublas", true, "libcublas.so.13", "/x/libcublas.so.13", "13.0.2", {13, 0}, ""},
                 {"cudnn", true, "libcudnn.so.9", "/x/libcudnn.so.9", "9.10.2", {13, 0}, ""},
                 {"tensorrt", true, "libnvinfer.so.10", "/x/libnvinfer.so.10", "10.13.0", {}, ""},
                 {"nccl", false, "", "", "", {}, ""}};
  return s;
}

TEST(VersionLock, FromSnapshotPinsEveryComponent) {
  const VersionLock lock = LockFromSnapshot(Node());
  EXPECT_EQ(lock.driver_branch, "580");
  EXPECT_EQ(lock.cuda_driver, "13.0");
  EXPECT_EQ(lock.cuda_runtime, "13.0");
  EXPECT_EQ(lock.cudnn, "9.10.2");
  EXPECT_EQ(lock.tensorrt, "10.13.0");
  EXPECT_EQ(lock.onnxruntime, "1.29.0");
  EXPECT_EQ(lock.gpu_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(lock.compute_capability, "9.0");
  EXPECT_TRUE(CheckLock(lock, Node()).empty());
}

TEST(VersionLock, CpuOnlyMachinePinsOnlyOrt) {
  gpu::CapabilitySnapshot s;
  s.ort_version = "1.29.0";
  const VersionLock lock = LockFromSnapshot(s);
  EXPECT_EQ(PinnedComponents(lock), std::vector<std::string>{"onnxruntime"});
  const std::string json = LockToJson(lock);
  EXPECT_THAT(json, HasSubstr("\"cudnn\": null"));
}

TEST(VersionLock, JsonRoundTrip) {
  const VersionLock lock = LockFromSnapshot(Node());
  auto parsed = ParseLock(LockToJson(lock), "lock.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(LockToJson(*parsed), LockToJson(lock));
}

TEST(VersionLock, MalformedFilesAreClearErrors) {
  auto error = [](const std::string& text) { return ParseLock(text, "f.json").status().message(); };
  EXPECT_THAT(error("{"), HasSubstr("version lock f.json is not valid JSON"));
  EXPECT_THAT(error("[]"), HasSubstr("must be a JSON object"));
  EXPECT_THAT(error("{\"cudnn\": \"9\"}"), HasSubstr("\"fastpath_lock\" must be 1"));
  EXPECT_THAT(error("{\"fastpath_lock\": 2}"), HasSubstr("\"fastpath_lock\" must be 1"));
  EXPECT_THAT(error("{\"fastpath_lock\": 1, \"cudnnn\": \"9\"}"),
              HasSubstr("unknown key \"cudnnn\""));
  EXPECT_THAT(error("{\"fastpath_lock\": 1, \"cudnn\": 9}"),
              HasSubstr("\"cudnn\" must be a non-empty string"));
  EXPECT_THAT(error("{\"fastpath_lock\": 1, \"cudnn\": \"\"}"),
              HasSubstr("\"cudnn\" must be a non-empty string"));
  EXPECT_THAT(error("{\"fastpath_lock\": 1, \"cudnn\": \"8.0\", \"cudnn\": \"9.19.0\"}"),
              HasSubstr("\"cudnn\" appears twice"));
  EXPECT_FALSE(ReadLockFile("/nonexistent/lock.json").ok());
}

TEST(VersionLock, NullLeavesAComponentUnpinned) {
  auto lock = ParseLock(R"({"fastpath_lock": 1, "cudnn": null, "onnxruntime": "1.29.0"})", "f");
  ASSERT_TRUE(lock.ok());
  EXPECT_FALSE(lock->cudnn.has_value());
  gpu::CapabilitySnapshot s;  // nothing at all but ORT
  s.ort_version = "1.29.0";
  EXPECT_TRUE(CheckLock(*lock, s).empty());
}

TEST(VersionLock, EveryMismatchIsNamedWithExpectedAndFound) {
  VersionLock lock = LockFromSnapshot(Node());
  gpu::CapabilitySnapshot other = Node();
  other.nvml.driver_version = "575.51.03";
  other.driver.cuda_version = {12, 9};
  other.libraries[2].version = "9.8.0";
  other.ort_version = "1.28.0";
  const auto mismatches = CheckLock(lock, other);
  ASSERT_EQ(mismatches.size(), 4u);
  EXPECT_EQ(DescribeMismatches(mismatches),
            "  driver_branch: expected 580, found 575\n"
            "  cuda_driver: expected 13.0, found 12.9\n"
            "  cudnn: expected 9.10.2, found 9.8.0\n"
            "  onnxruntime: expected 1.29.0, found 1.28.0\n");
}

TEST(VersionLock, MissingComponentsSayWhy) {
  const VersionLock lock = LockFromSnapshot(Node());
  gpu::CapabilitySnapshot bare;
  bare.ort_version = "1.29.0";
  bare.libraries = {{"cudart", false, "", "", "", {}, ""}, {"cudnn", false, "", "", "", {}, ""}};
  const std::string text = DescribeMismatches(CheckLock(lock, bare));
  EXPECT_THAT(
      text,
      HasSubstr(
          "driver_branch: expected 580, found not found (libnvidia-ml.so.1 cannot be loaded)"));
  EXPECT_THAT(
      text,
      HasSubstr("cuda_driver: expected 13.0, found not found (libcuda.so.1 cannot be loaded)"));
  EXPECT_THAT(
      text,
      HasSubstr("cuda_runtime: expected 13.0, found not found (no libcudart on the library path)"));
  EXPECT_THAT(
      text,
      HasSubstr("tensorrt: expected 10.13.0, found not found (no libnvinfer on the library path)"));
  EXPECT_THAT(text,
              HasSubstr("gpu_name: expected NVIDIA H100 80GB HBM3, found not found (libcuda.so.1"));
}

TEST(VersionLock, EveryDeviceMustMatchTheGpuPin) {
  const VersionLock lock = LockFromSnapshot(Node());
  gpu::CapabilitySnapshot mixed = Node();
  mixed.driver.devices.push_back({1, "NVIDIA A100-SXM4-80GB", 8, 0, 80ull << 30, ""});
  EXPECT_EQ(DescribeMismatches(CheckLock(lock, mixed)),
            "  gpu_name: expected NVIDIA H100 80GB HBM3, found NVIDIA A100-SXM4-80GB (GPU 1)\n"
            "  compute_capability: expected 9.0, found 8.0 (GPU 1)\n");
}

}  // namespace
}  // namespace fastpath::admission
