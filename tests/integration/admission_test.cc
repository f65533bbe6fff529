// Admission, black-box (issue 4 §2, §5, §6): the real `fastpath` binary refusing a node
// whose versions contradict the lock (the fake NVIDIA libraries from tests/fakes carry the
// versions), refusing or labelling a model that misses its start-up budget (an impossibly
// small 1 ns p95, so no timing can make it pass; an impossibly large one to pass), and the
// admission report on /v2/health/admission.
#include <gmock/gmock.h>

#include <fstream>
#include <sstream>

#include "fakes/run_command.h"
#include "integration_fixture.h"

namespace fastpath::integration {
namespace {

using ::testing::HasSubstr;

using ProcessRun = fastpath::testing::CommandRun;

// Runs `env <assignments> fastpath <args>` to its exit.
ProcessRun RunFastpath(const std::vector<std::string>& args,
                       std::vector<std::string> assignments = {}) {
  bool fake_node = false;
  for (const std::string& a : assignments) {
    fake_node |= a.rfind("LD_LIBRARY_PATH=" FASTPATH_FAKE_CUDA_LIB_DIR, 0) == 0;
  }
  // A node faked with the suite's NVIDIA libraries gets the suite's fake ORT EP as well, as
  // in doctor's tests: the real CUDA EP library needs the real CUDA libraries, and loading
  // it against stand-ins only to see it fail tells nothing (and under ASan its unload
  // leaves libstdc++'s emergency pool reported from an unknown module).
  if (fake_node) assignments.push_back("FASTPATH_ORT_EP_LIBRARY_DIR=" FASTPATH_FAKE_ORT_EP_DIR);
  std::vector<std::string> argv = {FastpathBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return fastpath::testing::RunCommand(argv, assignments);
}

std::string FakeLibraryPath() {
  std::string path = "LD_LIBRARY_PATH=";
  for (const char* dir : {"cuda", "nvml", "cudart", "cublas", "cudnn", "tensorrt", "nccl"}) {
    path += std::string(FASTPATH_FAKE_CUDA_LIB_DIR) + "/" + dir + ":";
  }
  return path;
}

// The `simple` model with a self-test budget.
std::string SimpleWithBudget(const std::string& p95_ms) {
  return std::string(testing::kSimpleConfig) +
         R"(parameters { key: "fastpath.slo.p95_ms" value { string_value: ")" + p95_ms +
         R"(" } }
parameters { key: "fastpath.slo.iterations" value { string_value: "5" } }
parameters { key: "fastpath.slo.batch_size" value { string_value: "2" } }
parameters { key: "fastpath.slo.seed" value { string_value: "7" } }
)";
}

void WriteSimple(testing::TempRepository& repo, const std::string& p95_ms) {
  repo.AddVersion("simple", 1, "simple");
  repo.WriteConfig("simple", SimpleWithBudget(p95_ms));
}

// ---- §5/§6: the start-up self-test ----

class SelfTestMissDevTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override { return {}; }
  void PrepareRepository(testing::TempRepository& repo) override { WriteSimple(repo, "0.000001"); }
  std::vector<std::string> ExtraArgs() override { return {"--profile", "dev"}; }
};

TEST_F(SelfTestMissDevTest, ServesButEveryViewSaysDegraded) {
  EXPECT_EQ(http().Get("/v2/health/ready").status, 200);
  EXPECT_EQ(http().Get("/v2/models/simple/ready").status, 200);
  HttpResponse report = http().Get("/v2/health/admission");
  ASSERT_EQ(report.status, 200) << report.Describe();
  auto doc = ParseJson(report.body);
  EXPECT_STREQ(doc["profile"].GetString(), "dev");
  ASSERT_EQ(doc["models"].Size(), 1u) << report.body;
  const auto& model = doc["models"][0];
  EXPECT_STREQ(model["name"].GetString(), "simple");
  EXPECT_STREQ(model["state"].GetString(), "DEGRADED");
  EXPECT_THAT(model["reasons"][0].GetString(), HasSubstr("self-test missed its budget: p95 "));
  EXPECT_FALSE(model["self_test"]["passed"].GetBool());
  EXPECT_DOUBLE_EQ(model["self_test"]["budget"]["p95_ms"].GetDouble(), 0.000001);
  EXPECT_EQ(model["self_test"]["measured"]["batch_size"].GetUint(), 2u);
  EXPECT_EQ(model["self_test"]["measured"]["iterations"].GetUint(), 5u);
  EXPECT_GT(model["self_test"]["measured"]["p95_ms"].GetDouble(), 0.000001);
  EXPECT_TRUE(doc["capability_snapshot"].IsObject());
  EXPECT_TRUE(doc["capability_snapshot"]["ort_version"].IsString());
  // The same ONNX Runtime probe as doctor's: the provider libraries and what they enumerate.
  const auto& ort = doc["capability_snapshot"]["onnxruntime"];
  ASSERT_TRUE(ort.IsObject()) << report.body;
  ASSERT_TRUE(ort["execution_providers"].IsArray()) << report.body;
  EXPECT_EQ(ort["execution_providers"].Size(), 2u) << report.body;
  EXPECT_STREQ(ort["execution_providers"][0]["provider"].GetString(), "cuda");
  EXPECT_THAT(server().LogTail(), HasSubstr("model 'simple' version 1 is DEGRADED"));
  ASSERT_GT(server().metrics_port(), 0);
  HttpResponse metrics = HttpClient(server().metrics_port()).Get("/metrics");
  ASSERT_EQ(metrics.status, 200) << metrics.Describe();
  EXPECT_THAT(metrics.body, HasSubstr("fastpath_model_state{model=\"simple\",version=\"1\","
                                      "state=\"DEGRADED\"} 1"));
  EXPECT_THAT(metrics.body, HasSubstr("fastpath_model_state{model=\"simple\",version=\"1\","
                                      "state=\"READY\"} 0"));
  EXPECT_THAT(metrics.body, HasSubstr("fastpath_server_ready 1"));
  ExpectStillServing();
}

class SelfTestPassProductionTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override { return {}; }
  void PrepareRepository(testing::TempRepository& repo) override {
    WriteSimple(repo, "1000000000");
  }
  std::vector<std::string> ExtraArgs() override { return {"--profile", "production"}; }
};

TEST_F(SelfTestPassProductionTest, ReadyWithTheFiguresInTheReport) {
  EXPECT_EQ(http().Get("/v2/health/ready").status, 200);
  HttpResponse report = http().Get("/v2/health/admission");
  ASSERT_EQ(report.status, 200) << report.Describe();
  auto doc = ParseJson(report.body);
  EXPECT_STREQ(doc["profile"].GetString(), "production");
  EXPECT_TRUE(doc["ready"].GetBool());
  EXPECT_TRUE(doc["reasons"].Empty()) << report.body;
  EXPECT_STREQ(doc["models"][0]["state"].GetString(), "READY");
  EXPECT_TRUE(doc["models"][0]["self_test"]["passed"].GetBool());
  // The placement audit of the one CPU instance, as the backend recorded it.
  const auto& placement = doc["models"][0]["placement"];
  ASSERT_TRUE(placement.IsObject()) << report.body;
  ASSERT_EQ(placement["instances"].Size(), 1u) << report.body;
  EXPECT_STREQ(placement["instances"][0]["providers"][0]["provider"].GetString(),
               "CPUExecutionProvider");
  EXPECT_STREQ(placement["instances"][0]["degraded_reason"].GetString(), "");
  // A CPU instance does not stage its inputs (IO binding is for GPU instances).
  EXPECT_FALSE(placement["instances"][0]["staged"].GetBool());
  EXPECT_EQ(placement["instances"][0]["staged_runs"].GetUint64(), 0u);
  EXPECT_EQ(http().Post("/v2/health/admission", "").status, 405);
  EXPECT_THAT(server().LogTail(), HasSubstr("passed its start-up self-test"));
}

TEST(AdmissionBinary, ProductionRefusesAModelThatMissesItsBudget) {
  testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  WriteSimple(repo, "0.000001");
  const ProcessRun run =
      RunFastpath({"serve", "--model-repository", repo.root().string(), "--http-port", "0",
                   "--grpc-port", "0", "--allow-metrics", "false", "--profile", "production"});
  EXPECT_EQ(run.exit_code, 22) << run.err;
  EXPECT_THAT(run.err,
              HasSubstr("production profile: a model missed its start-up self-test budget; "
                        "refusing to serve:"));
  EXPECT_THAT(run.err, HasSubstr("model 'simple' version 1: self-test missed its budget: p95 "));
  EXPECT_THAT(run.err, HasSubstr("> budget 1e-06 ms"));
  EXPECT_THAT(run.err, HasSubstr("measured p95 "));
  EXPECT_THAT(run.err, HasSubstr("(budget 1e-06 ms), throughput "));
}

// The silent CPU fallback, end to end: a KIND_GPU model on a node whose driver (the fake
// libcuda) is there but whose CUDA execution provider enumerates no device. ORT would run
// the model on its CPU provider; fastpath refuses it, and production refuses to serve.
TEST(AdmissionBinary, ProductionRefusesAGpuModelWhoseProviderSeesNoGpu) {
  testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  repo.AddVersion("simple", 1, "simple");
  // The simple model with a GPU instance group instead of its CPU one.
  std::string config = testing::kSimpleConfig;
  const std::string cpu_group = "{ kind: KIND_CPU count: 1 }";
  config.replace(config.find(cpu_group), cpu_group.size(),
                 "{ kind: KIND_GPU count: 1 gpus: [ 0 ] }");
  repo.WriteConfig("simple", config);
  const ProcessRun run =
      RunFastpath({"serve", "--model-repository", repo.root().string(), "--http-port", "0",
                   "--grpc-port", "0", "--allow-metrics", "false", "--profile", "production"},
                  {FakeLibraryPath(), "FASTPATH_FAKE_EP_DEVICES=0"});
  EXPECT_EQ(run.exit_code, 23) << run.err;
  EXPECT_THAT(
      run.err,
      HasSubstr("production profile: a model is not READY; refusing to serve:\n  model 'simple'"));
  EXPECT_THAT(run.err, HasSubstr("loaded, but CUDAExecutionProvider enumerated no device: ONNX "
                                 "Runtime sees no usable NVIDIA GPU"));
}

TEST(AdmissionBinary, ProductionRefusesAModelThatDoesNotLoad) {
  testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  WriteSimple(repo, "1000000000");
  repo.WriteConfig("broken", "name: \"broken\"\nmax_batch_size: -3\n");
  const ProcessRun run =
      RunFastpath({"serve", "--model-repository", repo.root().string(), "--http-port", "0",
                   "--grpc-port", "0", "--allow-metrics", "false", "--profile", "production"});
  EXPECT_EQ(run.exit_code, 23) << run.err;
  EXPECT_THAT(
      run.err,
      HasSubstr("production profile: a model is not READY; refusing to serve:\n  model 'broken'"));
}

TEST(AdmissionBinary, BadBudgetIsAClearReason) {
  testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  WriteSimple(repo, "fast");
  const ProcessRun run =
      RunFastpath({"serve", "--model-repository", repo.root().string(), "--http-port", "0",
                   "--grpc-port", "0", "--allow-metrics", "false", "--profile", "production"});
  EXPECT_EQ(run.exit_code, 23) << run.err;
  EXPECT_THAT(run.err,
              HasSubstr("self-test budget: parameters: 'fastpath.slo.p95_ms' is 'fast'; it must "
                        "be a number greater than 0"));
}

// The FP16 accuracy guard (issue 4 §4): Y = X + 0.1 in FP16 against its FP32 twin, with a
// tolerance no FP16 rounding can meet.
TEST(AdmissionBinary, ProductionRefusesAnFp16ModelOutsideItsTolerance) {
  testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  repo.AddVersion("fp16", 1, "fp16_add");
  std::filesystem::copy_file(std::filesystem::path(FASTPATH_TEST_MODELS_DIR) / "fp32_add.onnx",
                             repo.root() / "fp16" / "1" / "model_fp32.onnx");
  repo.WriteConfig("fp16", R"(name: "fp16"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
parameters { key: "fastpath.slo.p95_ms" value { string_value: "1000000000" } }
parameters { key: "fastpath.slo.batch_size" value { string_value: "4" } }
parameters { key: "fastpath.accuracy.reference_model" value { string_value: "model_fp32.onnx" } }
parameters { key: "fastpath.accuracy.tolerance" value { string_value: "1e-7" } }
)");
  const ProcessRun run =
      RunFastpath({"serve", "--model-repository", repo.root().string(), "--http-port", "0",
                   "--grpc-port", "0", "--allow-metrics", "false", "--profile", "production"});
  EXPECT_EQ(run.exit_code, 23) << run.err;
  EXPECT_THAT(run.err, HasSubstr("model 'fp16' version 1: accuracy guard: outputs differ from the "
                                 "FP32 reference: output 'Y' element "));
  EXPECT_THAT(run.err, HasSubstr(" from the FP32 reference 'model_fp32.onnx'; |difference| "));
  EXPECT_THAT(run.err, HasSubstr("> tolerance 1e-07 (warm-up 'self-test')"));
}

TEST(AdmissionBinary, CpuFallbackIsRefusedInProduction) {
  const ProcessRun run = RunFastpath(
      {"serve", "--model-repository", "/tmp", "--profile", "production", "--allow-cpu-fallback"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--allow-cpu-fallback is refused with --profile production"));
  const ProcessRun bad =
      RunFastpath({"serve", "--model-repository", "/tmp", "--profile", "staging"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--profile must be production or dev, not 'staging'"));
}

// ---- §2: the version lock ----

class VersionLockTest : public ::testing::Test {
 protected:
  std::filesystem::path Write(const std::string& name, const std::string& text) {
    const auto path = dir_.root() / name;
    std::ofstream(path) << text;
    return path;
  }
  ProcessRun Serve(const std::filesystem::path& lock, const std::vector<std::string>& env) {
    std::vector<std::string> assignments = {FakeLibraryPath()};
    assignments.insert(assignments.end(), env.begin(), env.end());
    return RunFastpath(
        {"serve", "--model-repository", repo_.root().string(), "--http-port", "0", "--grpc-port",
         "0", "--allow-metrics", "false", "--version-lock", lock.string()},
        assignments);
  }
  testing::TempRepository dir_{FASTPATH_TEST_MODELS_DIR};
  testing::TempRepository repo_{FASTPATH_TEST_MODELS_DIR};
};

TEST_F(VersionLockTest, DoctorLockWritesWhatTheNodeHas) {
  const auto lock = dir_.root() / "fastpath.lock.json";
  const ProcessRun run = RunFastpath({"doctor", "--lock", lock.string()}, {FakeLibraryPath()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(
      run.out,
      HasSubstr("wrote version lock " + lock.string() +
                " pinning driver_branch, cuda_driver, "
                "cuda_runtime, cudnn, tensorrt, onnxruntime, gpu_name, compute_capability"));
  std::ifstream in(lock);
  std::stringstream text;
  text << in.rdbuf();
  auto doc = ParseJson(text.str());
  EXPECT_EQ(doc["fastpath_lock"].GetInt(), 1);
  EXPECT_STREQ(doc["driver_branch"].GetString(), "580");
  EXPECT_STREQ(doc["cuda_driver"].GetString(), "13.0");
  EXPECT_STREQ(doc["cudnn"].GetString(), "9.10.2");
  EXPECT_STREQ(doc["tensorrt"].GetString(), "10.13.0");
  EXPECT_STREQ(doc["gpu_name"].GetString(), "Fake GPU");
}

TEST_F(VersionLockTest, DriverTooOldForTheLockIsRefused) {
  const auto lock = dir_.root() / "lock.json";
  ASSERT_EQ(RunFastpath({"doctor", "--lock", lock.string()}, {FakeLibraryPath()}).exit_code, 0);
  const ProcessRun run = Serve(lock, {"FASTPATH_FAKE_CUDA_DRIVER_VERSION=12040"});
  EXPECT_EQ(run.exit_code, 20) << run.err;
  EXPECT_THAT(
      run.err,
      HasSubstr("this node does not match the version lock " + lock.string() +
                "; refusing to start:\n  cuda_driver: expected 13.0, found 12.4\n(exit 20"));
}

TEST_F(VersionLockTest, LibraryVersionContradictingTheLockIsRefused) {
  const auto lock = dir_.root() / "lock.json";
  ASSERT_EQ(RunFastpath({"doctor", "--lock", lock.string()}, {FakeLibraryPath()}).exit_code, 0);
  const ProcessRun run =
      Serve(lock, {"FASTPATH_FAKE_CUDNN_VERSION=90800", "FASTPATH_FAKE_NVML_DRIVER=575.51.03"});
  EXPECT_EQ(run.exit_code, 20) << run.err;
  EXPECT_THAT(run.err, HasSubstr("  driver_branch: expected 580, found 575\n"
                                 "  cudnn: expected 9.10.2, found 9.8.0\n"));
}

TEST_F(VersionLockTest, MissingLibraryIsNamed) {
  const auto lock = Write("lock.json", R"({"fastpath_lock": 1, "tensorrt": "10.13.0"})");
  std::vector<std::string> assignments = {
      "LD_LIBRARY_PATH=" + std::string(FASTPATH_FAKE_CUDA_LIB_DIR) + "/cuda"};
  const ProcessRun run =
      RunFastpath({"serve", "--model-repository", repo_.root().string(), "--http-port", "0",
                   "--grpc-port", "0", "--version-lock", lock.string()},
                  assignments);
  if (run.err.find("tensorrt: expected 10.13.0, found not found") == std::string::npos &&
      run.exit_code == 20) {
    GTEST_SKIP() << "this machine has a real libnvinfer.so.10";
  }
  EXPECT_EQ(run.exit_code, 20) << run.err;
  EXPECT_THAT(
      run.err,
      HasSubstr("tensorrt: expected 10.13.0, found not found (no libnvinfer on the library path)"));
}

TEST_F(VersionLockTest, UnreadableOrMalformedLockHasItsOwnCode) {
  ProcessRun run = Serve(dir_.root() / "missing.json", {});
  EXPECT_EQ(run.exit_code, 21) << run.err;
  EXPECT_THAT(run.err, HasSubstr("cannot read version lock"));
  run = Serve(Write("bad.json", R"({"fastpath_lock": 1, "cuda": "13.0"})"), {});
  EXPECT_EQ(run.exit_code, 21) << run.err;
  EXPECT_THAT(run.err, HasSubstr("unknown key \"cuda\""));
}

TEST_F(VersionLockTest, MatchingLockStartsAndIsShownInTheReport) {
  // Written and checked on this machine as it is (no fakes): it must admit itself.
  const auto lock = dir_.root() / "lock.json";
  ASSERT_EQ(RunFastpath({"doctor", "--lock", lock.string()}).exit_code, 0);
  WriteSimple(repo_, "1000000000");
  ServerProcess server(dir_.root());
  ASSERT_TRUE(
      server.Start({repo_.root(), {"--version-lock", lock.string(), "--profile", "production"}}));
  HttpClient http(server.http_port());
  auto doc = ParseJson(http.Get("/v2/health/admission").body);
  EXPECT_STREQ(doc["version_lock"]["file"].GetString(), lock.c_str());
  EXPECT_THAT(server.LogTail(), HasSubstr("node admitted (pins"));
  EXPECT_TRUE(server.Stop());
}

TEST_F(VersionLockTest, DoctorDiffNamesWhatChanged) {
  const auto a = dir_.root() / "a.json";
  const auto b = dir_.root() / "b.json";
  ProcessRun snap = RunFastpath({"doctor", "--json"}, {FakeLibraryPath()});
  ASSERT_EQ(snap.exit_code, 0);
  std::ofstream(a) << snap.out;
  snap = RunFastpath({"doctor", "--json"},
                     {FakeLibraryPath(), "FASTPATH_FAKE_CUDA_DRIVER_VERSION=12040"});
  std::ofstream(b) << snap.out;

  ProcessRun same = RunFastpath({"doctor", "--diff", a.string(), a.string()});
  EXPECT_EQ(same.exit_code, 0) << same.err;
  EXPECT_THAT(same.out, HasSubstr("no differences"));
  ProcessRun diff = RunFastpath({"doctor", "--diff", a.string(), b.string()});
  EXPECT_EQ(diff.exit_code, 1) << diff.err;
  EXPECT_THAT(diff.out, HasSubstr("changed  driver.cuda_version"));
  EXPECT_THAT(diff.out, HasSubstr("\"13.0\" -> \"12.4\""));
  ProcessRun bad = RunFastpath({"doctor", "--diff", a.string(), Write("x.json", "{").string()});
  EXPECT_EQ(bad.exit_code, 21);
  EXPECT_THAT(bad.err, HasSubstr("x.json is not valid JSON"));
}

}  // namespace
}  // namespace fastpath::integration
