// The real `fastpath doctor` binary, black-box: on this machine as it is, and with the fake
// NVIDIA libraries put first on LD_LIBRARY_PATH (they carry the real sonames), so the
// dlopen-by-soname path of the shipped binary is the one exercised.
#include <dlfcn.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fakes/run_command.h"
#include "fastpath/gpu/telemetry.h"

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
  // Nothing to compare the libraries with: not "ok".
  EXPECT_THAT(run.out,
              ::testing::ContainsRegex("driver vs libraries +not checked \\(no driver\\)"));
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

// --require-gpu with --lock: no lock from a node without its fast path, and the finding's
// exit code (the lock was written and doctor exited 0).
TEST(DoctorBinary, RequireGpuKeepsALockFromANodeWithoutItsFastPath) {
  const std::string lock =
      (std::filesystem::temp_directory_path() / ("fastpath-lock-" + std::to_string(getpid())))
          .string();
  std::filesystem::remove(lock);
  const DoctorRun run = RunDoctor({"--require-gpu", "--lock", lock},
                                  {FakePath(kAllFakes), "FASTPATH_FAKE_CUDA_DEVICES=0",
                                   "FASTPATH_ORT_EP_LIBRARY_DIR=" FASTPATH_FAKE_ORT_EP_DIR});
  EXPECT_EQ(run.exit_code, 11) << run.out << run.err;
  EXPECT_THAT(run.err, HasSubstr("no version lock written"));
  EXPECT_FALSE(std::filesystem::exists(lock));
}

TEST(DoctorBinary, BadFlagIsAUsageError) {
  const DoctorRun run = RunDoctor({"--no-such-flag"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("unknown flag --no-such-flag"));
}

// --- doctor --record-gpu-trace ---

// A fresh temporary folder, removed with what is in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "fastpath-doctor-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// The fake NVML: two GPUs at 87 C in HW thermal slowdown (0x40), and XID 79 on GPU 0.
const std::vector<std::string> kThrottledPair = {
    FakePath({"nvml"}), "FASTPATH_FAKE_NVML_DEVICES=2", "FASTPATH_FAKE_NVML_TEMPERATURE=87",
    "FASTPATH_FAKE_NVML_THROTTLE=0x40", "FASTPATH_FAKE_NVML_XIDS=79"};

TEST(DoctorRecordGpuTrace, RecordsEveryGpuFromNvmlAndReplays) {
  const TempDir dir;
  const std::string file = dir.File("gpu.jsonl");
  const DoctorRun run = RunDoctor(
      {"--record-gpu-trace", file, "--seconds", "2", "--interval-ms", "200"}, kThrottledPair);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_FALSE(std::filesystem::exists(file + ".tmp"));

  // Every line is one GPU's sample, with what the fake NVML reports.
  std::map<int, int> lines_of_gpu;
  std::map<int, int64_t> last_t;
  int xid_lines = 0;
  for (const std::string& line : Lines(ReadAll(file))) {
    SCOPED_TRACE(line);
    rapidjson::Document doc;
    ASSERT_FALSE(doc.Parse(line.c_str()).HasParseError());
    ASSERT_TRUE(doc.IsObject());
    const int gpu = doc["gpu"].GetInt();
    EXPECT_TRUE(gpu == 0 || gpu == 1);
    ++lines_of_gpu[gpu];
    const int64_t t = doc["t_ms"].GetInt64();
    if (last_t.count(gpu) != 0) {
      EXPECT_GE(t, last_t[gpu]);
    }
    last_t[gpu] = t;
    EXPECT_EQ(doc["uuid"].GetString(), "GPU-fake-" + std::to_string(gpu));
    EXPECT_EQ(doc["temperature_c"].GetDouble(), 87.0);
    EXPECT_EQ(doc["clocks_event_reasons"].GetUint64(), 0x40u);
    EXPECT_EQ(doc["ecc_uncorrected_volatile"].GetUint64(), 0u);
    if (doc.HasMember("xid")) {
      ++xid_lines;
      EXPECT_EQ(gpu, 0);
      EXPECT_EQ(doc["xid"].GetUint64(), 79u);
    }
  }
  // Samples at 0, 200, ..., 2000 ms at most; a loaded machine may skip ticks, never add them.
  ASSERT_EQ(lines_of_gpu.size(), 2u);
  for (const auto& [gpu, count] : lines_of_gpu) {
    EXPECT_GE(count, 2) << "GPU " << gpu;
    EXPECT_LE(count, 11) << "GPU " << gpu;
  }
  EXPECT_EQ(lines_of_gpu[0], lines_of_gpu[1]);
  EXPECT_EQ(xid_lines, 1);  // the event, once

  EXPECT_THAT(run.out, HasSubstr("wrote GPU trace " + file));
  EXPECT_THAT(run.out, HasSubstr("of 2 GPUs"));
  EXPECT_THAT(run.out, HasSubstr("XIDs: 79 (GPU 0)"));
  EXPECT_THAT(run.out, HasSubstr("clock-event reasons: HW thermal slowdown"));
  EXPECT_THAT(run.out, ::testing::Not(HasSubstr("ended early")));

  // What serve --gpu-trace reads: past the end, each GPU's last sample, the XID once.
  auto trace = fastpath::gpu::OpenTraceSource(file);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  const std::vector<fastpath::gpu::GpuSample> samples = (*trace)->Sample(std::chrono::hours(1));
  ASSERT_EQ(samples.size(), 2u);
  for (const fastpath::gpu::GpuSample& sample : samples) {
    EXPECT_EQ(sample.temperature_c, 87.0);
    EXPECT_EQ(sample.clocks_event_reasons, 0x40u);
    EXPECT_EQ(sample.xids, (sample.gpu == 0 ? std::vector<uint64_t>{79} : std::vector<uint64_t>{}));
  }
}

// Starts `env <assignments> fastpath doctor <args>` with stdout and stderr in files; the
// test signals and reaps it.
pid_t SpawnDoctor(const std::vector<std::string>& args, const std::vector<std::string>& assignments,
                  const std::string& out, const std::string& err) {
  std::vector<std::string> words = {"env"};
  words.insert(words.end(), assignments.begin(), assignments.end());
  words.push_back(FASTPATH_BINARY);
  words.push_back("doctor");
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, "env", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

TEST(DoctorRecordGpuTrace, SigintEndsTheRecordingWithWhatItHas) {
  const TempDir dir;
  const std::string file = dir.File("gpu.jsonl");
  const pid_t pid =
      SpawnDoctor({"--record-gpu-trace", file, "--seconds", "600", "--interval-ms", "100"},
                  kThrottledPair, dir.File("out"), dir.File("err"));
  ASSERT_GT(pid, 0);
  // The signal goes in once the first pass is in FILE.tmp (flushed as it is written).
  bool recording = false;
  for (int i = 0; i < 600 && !recording; ++i) {
    recording = !Lines(ReadAll(file + ".tmp")).empty();
    if (!recording) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(pid, recording ? SIGINT : SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(recording) << ReadAll(dir.File("err"));
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << ReadAll(dir.File("err"));
  EXPECT_FALSE(std::filesystem::exists(file + ".tmp"));
  const std::string out = ReadAll(dir.File("out"));
  EXPECT_THAT(out, HasSubstr("wrote GPU trace " + file));
  EXPECT_THAT(out, HasSubstr("ended early by a signal"));
  auto trace = fastpath::gpu::OpenTraceSource(file);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_EQ((*trace)->Sample(std::chrono::hours(1)).size(), 2u);
}

TEST(DoctorRecordGpuTrace, WithoutNvmlExits13SayingWhy) {
  const TempDir dir;
  const std::string file = dir.File("gpu.jsonl");
  const std::vector<std::string> args = {"--record-gpu-trace", file, "--seconds", "1"};
  // NVML that does not initialize: the fake answers nvmlInit_v2 with NVML_ERROR_DRIVER_NOT_LOADED.
  const DoctorRun init_fails =
      RunDoctor(args, {FakePath({"nvml"}), "FASTPATH_FAKE_NVML_INIT_ERROR=9"});
  EXPECT_EQ(init_fails.exit_code, 13) << init_fails.out << init_fails.err;
  EXPECT_THAT(init_fails.err, HasSubstr("nvmlInit_v2 failed"));
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_FALSE(std::filesystem::exists(file + ".tmp"));

  if (HostHas("libnvidia-ml.so.1")) GTEST_SKIP() << "this machine has a real libnvidia-ml.so.1";
  const DoctorRun missing = RunDoctor(args, {FakePath({"cuda", "cudart"})});
  EXPECT_EQ(missing.exit_code, 13) << missing.out << missing.err;
  EXPECT_THAT(missing.err, HasSubstr("NVML cannot be loaded"));
  EXPECT_THAT(missing.err, HasSubstr("libnvidia-ml.so.1"));
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_FALSE(std::filesystem::exists(file + ".tmp"));
}

TEST(DoctorRecordGpuTrace, BadFlagsAreUsageErrorsNamingTheFlag) {
  const TempDir dir;
  const std::string file = dir.File("gpu.jsonl");
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{"--record-gpu-trace", file, "--seconds", "0"},
       "--seconds must be an integer in [1, 86400]"},
      {{"--record-gpu-trace", file, "--seconds", "86401"}, "--seconds must be an integer"},
      {{"--record-gpu-trace", file, "--seconds", "2s"}, "--seconds must be an integer"},
      {{"--record-gpu-trace", file}, "--record-gpu-trace needs --seconds"},
      {{"--record-gpu-trace", file, "--seconds", "1", "--interval-ms", "0"},
       "--interval-ms must be an integer in [10, 3600000]"},
      {{"--record-gpu-trace", file, "--seconds", "1", "--interval-ms", "fast"}, "--interval-ms"},
      {{"--seconds", "1"}, "--seconds requires --record-gpu-trace"},
      {{"--interval-ms", "100"}, "--interval-ms requires --record-gpu-trace"},
      {{"--record-gpu-trace", file, "--seconds", "1", "--json"}, "--record-gpu-trace"},
      {{"--record-gpu-trace", file, "--seconds", "1", "--lock", dir.File("lock")},
       "--record-gpu-trace"},
      {{"--record-gpu-trace", file, "--seconds", "1", "--diff", "a", "b"}, "--record-gpu-trace"},
      {{"--record-gpu-trace", file, "--seconds", "1", "--require-gpu"}, "--record-gpu-trace"},
  };
  for (const Case& c : cases) {
    std::string joined;
    for (const std::string& a : c.args) joined += a + " ";
    SCOPED_TRACE(joined);
    // With the fake NVML, so that only the command line can make it fail.
    const DoctorRun run = RunDoctor(c.args, kThrottledPair);
    EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
    EXPECT_THAT(run.err, HasSubstr(c.message));
    EXPECT_FALSE(std::filesystem::exists(file));
  }
}

}  // namespace
