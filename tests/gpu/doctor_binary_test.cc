// The real `fastpath doctor` binary, black-box: on this machine as it is, and with the fake
// NVIDIA libraries put first on LD_LIBRARY_PATH (they carry the real sonames), so the
// dlopen-by-soname path of the shipped binary is the one exercised.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <filesystem>
#include <string>
#include <vector>

#include "fakes/run_command.h"

namespace {

using ::testing::HasSubstr;

using DoctorRun = fastpath::testing::CommandRun;

// Runs `env <assignments> fastpath doctor <args>`; assignments are NAME=value strings.
DoctorRun RunDoctor(const std::vector<std::string>& args,
                    const std::vector<std::string>& assignments = {}) {
  std::vector<std::string> argv = {FASTPATH_BINARY, "doctor"};
  argv.insert(argv.end(), args.begin(), args.end());
  return fastpath::testing::RunCommand(argv, assignments);
}

// LD_LIBRARY_PATH with the named fake library directories only.
std::string FakePath(const std::vector<std::string>& dirs) {
  std::string path = "LD_LIBRARY_PATH=";
  for (const std::string& dir : dirs)
    path += std::string(FASTPATH_FAKE_CUDA_LIB_DIR) + "/" + dir + ":";
  return path;
}

// Whether the host itself has the library (a GPU machine has libnvidia-ml.so.1), in which
// case leaving a fake off LD_LIBRARY_PATH does not make it missing.
bool HostHas(const char* soname) {
  void* handle = ::dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) return false;
  ::dlclose(handle);
  return true;
}

const std::vector<std::string> kAllFakes = {"cuda",  "nvml",     "cudart", "cublas",
                                            "cudnn", "tensorrt", "nccl"};

TEST(DoctorBinary, JsonOnThisMachineNamesWhatIsMissingAndExitsZero) {
  const DoctorRun run = RunDoctor({"--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  rapidjson::Document doc;
  ASSERT_FALSE(doc.Parse(run.out.c_str()).HasParseError()) << run.out;
  EXPECT_FALSE(std::string(doc["ort_version"].GetString()).empty());
  ASSERT_TRUE(doc["findings"].IsArray());
  const int expected = doc["findings"].Empty() ? 0 : doc["findings"][0]["exit_code"].GetInt();
  if (!doc["driver"]["library_found"].GetBool()) {
    // A machine without a driver (CI, this one): the first finding names libcuda.
    ASSERT_FALSE(doc["findings"].Empty());
    EXPECT_EQ(expected, 10);
    EXPECT_THAT(doc["findings"][0]["message"].GetString(), HasSubstr("libcuda.so.1"));
  }

  const DoctorRun required = RunDoctor({"--json", "--require-gpu"});
  EXPECT_EQ(required.exit_code, expected) << required.err;
}

TEST(DoctorBinary, TableSaysWhatIsMissing) {
  const DoctorRun run =
      RunDoctor({}, {FakePath({"nvml", "cudart", "cublas", "cudnn", "tensorrt", "nccl"})});
  if (run.out.find("NOT FOUND: libcuda.so.1") == std::string::npos) {
    GTEST_SKIP() << "this machine has a real libcuda.so.1";
  }
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("GPU fast path: NOT usable"));
  EXPECT_THAT(run.out, HasSubstr("[10 no-driver-library]"));
  EXPECT_THAT(run.out, HasSubstr("With --require-gpu, doctor exits 10."));
}

TEST(DoctorBinary, RequireGpuExitCodesWithFakeLibraries) {
  struct Case {
    const char* name;
    std::vector<std::string> assignments;
    int exit_code;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"healthy", {FakePath(kAllFakes)}, 0, "GPU fast path: usable."},
      {"no device",
       {FakePath(kAllFakes), "FASTPATH_FAKE_CUDA_DEVICES=0"},
       11,
       "CUDA_ERROR_NO_DEVICE"},
      {"driver too old",
       {FakePath(kAllFakes), "FASTPATH_FAKE_CUDA_DRIVER_VERSION=12040"},
       12,
       "cudart 13.0 needs CUDA 13.0 but the driver supports CUDA 12.4"},
      {"nvml missing",
       {FakePath({"cuda", "cudart", "cublas", "cudnn", "tensorrt", "nccl"})},
       13,
       "NVML"},
      {"stub driver",
       {FakePath(kAllFakes), "FASTPATH_FAKE_CUDA_INIT_ERROR=34"},
       14,
       "stub library"},
      {"unhealthy",
       {FakePath(kAllFakes), "FASTPATH_FAKE_NVML_ECC_UNCORRECTED=1"},
       16,
       "uncorrected ECC"},
      // The driver is fine, but ORT's CUDA EP sees no device: every KIND_GPU model would be
      // refused, so the GPU fast path is not usable.
      {"no CUDA EP device",
       {FakePath(kAllFakes), "FASTPATH_FAKE_EP_DEVICES=0"},
       17,
       "[17 no-gpu-execution-provider] ONNX Runtime's CUDA execution provider cannot be used"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    if (c.exit_code == 13 && HostHas("libnvidia-ml.so.1")) continue;
    // ORT's EP libraries from the fake folder: the real ones need the real CUDA libraries.
    std::vector<std::string> assignments = c.assignments;
    assignments.push_back("FASTPATH_ORT_EP_LIBRARY_DIR=" FASTPATH_FAKE_ORT_EP_DIR);
    const DoctorRun run = RunDoctor({"--require-gpu"}, assignments);
    EXPECT_EQ(run.exit_code, c.exit_code) << run.out << run.err;
    EXPECT_THAT(run.out, HasSubstr(c.message));
    const DoctorRun report_only = RunDoctor({}, assignments);
    EXPECT_EQ(report_only.exit_code, 0) << report_only.err;
  }
}

TEST(DoctorBinary, BadFlagIsAUsageError) {
  const DoctorRun run = RunDoctor({"--no-such-flag"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("unknown flag --no-such-flag"));
}

}  // namespace
