// `fastpath preflight` (issue 12 §5) on the built binary, black-box: which checklist items
// pass, fail or are not checked, the exit codes (0 all pass, 1 one fails, 2 usage), the JSON
// fields and the failing items named on stderr. It runs on a machine without a GPU: the
// GPU cases run on the suite's fake NVIDIA libraries and fake CUDA plugin EP, so that the
// real probes, loading and placement code meet a node whose GPUs the test chooses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "fakes/run_command.h"
#include "fakes/temp_repository.h"

namespace fastpath::integration {
namespace {

namespace fs = std::filesystem;
using fastpath::testing::CommandRun;
using fastpath::testing::TempRepository;
using ::testing::HasSubstr;

// The shipped rule file, from the source tree: the one a deployment loads.
constexpr const char* kShippedRules = FASTPATH_SOURCE_DIR "/deploy/prometheus/fastpath-rules.yaml";

CommandRun Preflight(std::vector<std::string> args, std::vector<std::string> env = {}) {
  args.insert(args.begin(), {FASTPATH_BINARY, "preflight"});
  return fastpath::testing::RunCommand(args, env);
}

// A node with one fake GPU (or what `extra` makes of it): the fake driver, NVML and CUDA
// libraries first on the library path, and the fake CUDA EP that runs float MatMuls.
std::vector<std::string> FakeGpuNode(std::vector<std::string> extra = {}) {
  std::string path = "LD_LIBRARY_PATH=";
  for (const char* dir : {"cuda", "nvml", "cudart", "cublas", "cudnn", "tensorrt", "nccl"}) {
    path += std::string(FASTPATH_FAKE_CUDA_LIB_DIR) + "/" + dir + ":";
  }
  std::vector<std::string> env = {path, "FASTPATH_ORT_EP_LIBRARY_DIR=" FASTPATH_FAKE_ORT_EP_DIR,
                                  "FASTPATH_FAKE_EP_RUNS=1", "FASTPATH_FAKE_EP_DEVICES=1"};
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

rapidjson::Document Json(const CommandRun& run) {
  rapidjson::Document doc;
  doc.Parse(run.out.c_str());
  EXPECT_FALSE(doc.HasParseError()) << run.out << run.err;
  return doc;
}

// The item `id` of a --json report (a null value when it is not there).
const rapidjson::Value& ItemOf(const rapidjson::Document& doc, const std::string& id) {
  static const rapidjson::Value kNull;
  if (!doc.IsObject() || !doc.HasMember("items")) return kNull;
  for (const auto& item : doc["items"].GetArray()) {
    if (id == item["id"].GetString()) return item;
  }
  return kNull;
}

std::string VerdictOf(const rapidjson::Document& doc, const std::string& id) {
  const rapidjson::Value& item = ItemOf(doc, id);
  return item.IsObject() ? item["verdict"].GetString() : "(no item " + id + ")";
}

std::string SummaryOf(const rapidjson::Document& doc, const std::string& id) {
  const rapidjson::Value& item = ItemOf(doc, id);
  return item.IsObject() ? item["summary"].GetString() : "";
}

// The verdict and detail of `model` under item `id`.
std::pair<std::string, std::string> ModelOf(const rapidjson::Document& doc, const std::string& id,
                                            const std::string& model) {
  const rapidjson::Value& item = ItemOf(doc, id);
  if (item.IsObject()) {
    for (const auto& m : item["models"].GetArray()) {
      if (model == m["name"].GetString())
        return {m["verdict"].GetString(), m["detail"].GetString()};
    }
  }
  return {"(no model " + model + " under " + id + ")", ""};
}

std::vector<std::string> Ids(const rapidjson::Document& doc, const char* key) {
  std::vector<std::string> ids;
  for (const auto& id : doc[key].GetArray()) ids.push_back(id.GetString());
  return ids;
}

void Write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A `fastpath bench --soak` report (the fields bench writes and reads back) of `model`:
// `windows` windows of 60 s, `errors` failed requests in the last one, which runs at
// `last_throughput_ratio` the first's throughput; the ratios are stated unless
// `stated_ratios` is false (preflight computes them from the windows either way).
std::string SoakReport(const std::string& model, int windows, int errors = 0,
                       bool interrupted = false, double last_throughput_ratio = 1.0,
                       bool stated_ratios = true) {
  std::string out = R"({"runs": [{"label": "soak", "model": ")" + model +
                    R"(", "started_at": "2026-12-01T10:00:00Z", "points": [], "in_process": [],
    "soak": {"concurrency": 8, "duration_s": )" +
                    std::to_string(windows * 60) + R"(, "window_s": 60, "metrics_url": "",
    "interrupted": )" +
                    (interrupted ? "true" : "false") + R"(, "windows": [)";
  for (int i = 1; i <= windows; ++i) {
    const bool last = i == windows;
    out += std::string(i > 1 ? "," : "") + R"({"index": )" + std::to_string(i) +
           R"(, "start_s": )" + std::to_string((i - 1) * 60) + R"(, "end_s": )" +
           std::to_string(i * 60) +
           R"(, "measured_seconds": 60, "throughput_rps": 100, "throughput_ips": )" +
           std::to_string(last ? 100 * last_throughput_ratio : 100.0) + R"(,
      "latency_us": {"count": 6000, "p50": 900, "p95": 1500, "p99": 2000},
      "requests": 6000, "errors": )" +
           std::to_string(last ? errors : 0) + R"(, "errors_by_kind": {)" +
           (last && errors > 0 ? R"("http_503": )" + std::to_string(errors) : "") + "}" +
           (stated_ratios
                ? R"(, "throughput_ratio": )" + std::to_string(last ? last_throughput_ratio : 1.0) +
                      R"(, "p95_ratio": 1.0)"
                : "") +
           R"(, "gpus": null, "metrics_error": null})";
  }
  return out + "]}}]}\n";
}

// The `simple` model as a production repository would carry it: a memory cap (so its budget
// is measured), the rollout gate on, and version 1 kept beside version 2.
std::string ReadySimpleConfig() {
  return std::string(fastpath::testing::kSimpleConfig) +
         R"(parameters { key: "fastpath.memory.limit_bytes" value { string_value: "64Mi" } }
parameters { key: "fastpath.rollout.gate" value { string_value: "true" } }
)";
}

class PreflightTest : public ::testing::Test {
 protected:
  PreflightTest() : repo_(FASTPATH_TEST_MODELS_DIR), files_(FASTPATH_TEST_MODELS_DIR) {}

  // `simple`, one version, nothing of the checklist configured.
  void WritePlainRepository() {
    repo_.AddVersion("simple", 1, "simple");
    repo_.WriteConfig("simple", fastpath::testing::kSimpleConfig);
  }
  void WriteReadyRepository() {
    repo_.AddVersion("simple", 1, "simple");
    repo_.AddVersion("simple", 2, "simple");
    repo_.WriteConfig("simple", ReadySimpleConfig());
  }
  fs::path File(const std::string& name, const std::string& text) {
    const fs::path path = files_.root() / name;
    Write(path, text);
    return path;
  }
  std::vector<std::string> Args(std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"--model-repository", repo_.root().string(), "--json"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }

  TempRepository repo_;
  TempRepository files_;  // soak reports and rule files
};

TEST(PreflightCommandLine, BadCommandLinesExitTwo) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "--model-repository"},
      {{"--model-repository", "/nonexistent/models"}, "is not a directory"},
      {{"--model-repository", "/tmp", "--prometheus", "https://prom:9090"}, "--prometheus"},
      {{"--model-repository", "/tmp", "--prometheus", "http://prom:ninety"}, "--prometheus"},
      {{"--model-repository", "/tmp", "--bogus"}, "unknown flag --bogus"},
  };
  for (const auto& [args, named] : cases) {
    const CommandRun run = Preflight(args);
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_THAT(run.err, HasSubstr(named));
    EXPECT_EQ(run.out, "");
  }
  const CommandRun help = Preflight({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("usage: fastpath preflight --model-repository DIR"));
  for (const char* flag :
       {"--soak-report FILE", "--alert-rules FILE", "--prometheus URL", "--json", "--strict"}) {
    EXPECT_THAT(help.out, HasSubstr(flag));
  }
  EXPECT_THAT(help.out, HasSubstr("Exit codes: 0"));
}

TEST_F(PreflightTest, AnUnpreparedCpuRepositoryFailsNamingTheItems) {
  WritePlainRepository();
  const CommandRun run =
      Preflight(Args({"--alert-rules", kShippedRules}),
                FakeGpuNode({"FASTPATH_FAKE_CUDA_DEVICES=0", "FASTPATH_FAKE_EP_DEVICES=0"}));
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  const rapidjson::Document doc = Json(run);
  ASSERT_TRUE(doc.IsObject());
  EXPECT_FALSE(doc["passed"].GetBool());
  EXPECT_EQ(doc["items"].Size(), 9u);
  // A CPU-only repository needs no GPU, and this node has none.
  EXPECT_EQ(VerdictOf(doc, "driver"), "pass");
  EXPECT_THAT(SummaryOf(doc, "driver"), HasSubstr("no GPU model"));
  EXPECT_EQ(VerdictOf(doc, "partition"), "pass");
  EXPECT_THAT(SummaryOf(doc, "partition"), HasSubstr("no GPU model"));
  // No cap: no budget is asked for, by name; the arena is uncapped.
  EXPECT_EQ(VerdictOf(doc, "memory_budget"), "not_checked");
  EXPECT_EQ(ModelOf(doc, "memory_budget", "simple v1").first, "not_checked");
  EXPECT_THAT(ModelOf(doc, "memory_budget", "simple v1").second, HasSubstr("not asked for"));
  EXPECT_EQ(VerdictOf(doc, "arena"), "fail");
  EXPECT_THAT(ModelOf(doc, "arena", "simple").second, HasSubstr("no cap"));
  EXPECT_EQ(VerdictOf(doc, "oom_behaviour"), "pass");  // nothing it applies to
  EXPECT_EQ(ModelOf(doc, "oom_behaviour", "simple").first, "not_applicable");
  EXPECT_EQ(VerdictOf(doc, "soak"), "fail");
  EXPECT_THAT(SummaryOf(doc, "soak"),
              HasSubstr("no soak report: run fastpath bench --soak ... and pass --soak-report"));
  EXPECT_EQ(VerdictOf(doc, "alert_rules"), "pass");
  EXPECT_EQ(VerdictOf(doc, "metrics_collected"), "not_checked");
  EXPECT_EQ(VerdictOf(doc, "rollback"), "fail");
  EXPECT_THAT(ModelOf(doc, "rollback", "simple").second, HasSubstr("no rollout gate"));
  EXPECT_THAT(ModelOf(doc, "rollback", "simple").second, HasSubstr("no previous version"));
  EXPECT_THAT(Ids(doc, "failed"), ::testing::ElementsAre("arena", "soak", "rollback"));
  EXPECT_THAT(Ids(doc, "not_checked"),
              ::testing::ElementsAre("memory_budget", "metrics_collected"));
  EXPECT_FALSE(ItemOf(doc, "arena")["action"].IsNull());
  EXPECT_THAT(run.err, HasSubstr("failing: 3 arena (FAIL), 4 soak (FAIL), 8 rollback (FAIL)"));

  // The table says the same.
  const CommandRun table =
      Preflight({"--model-repository", repo_.root().string(), "--alert-rules", kShippedRules});
  EXPECT_EQ(table.exit_code, 1) << table.err;
  EXPECT_THAT(table.out, HasSubstr("4. soak of at least 30 minutes"));
  EXPECT_THAT(table.out, HasSubstr("NOT CHECKED"));
  EXPECT_THAT(table.out, HasSubstr("preflight: FAIL; failing: arena, soak, rollback; not checked: "
                                   "memory_budget, metrics_collected"));
}

TEST_F(PreflightTest, AProductionReadyCpuRepositoryPasses) {
  WriteReadyRepository();
  const fs::path soak = File("soak.json", SoakReport("simple", 31));
  const CommandRun run =
      Preflight(Args({"--soak-report", soak.string(), "--alert-rules", kShippedRules}));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const rapidjson::Document doc = Json(run);
  ASSERT_TRUE(doc.IsObject());
  EXPECT_TRUE(doc["passed"].GetBool());
  EXPECT_FALSE(doc["strict"].GetBool());
  for (const char* id : {"driver", "memory_budget", "arena", "soak", "alert_rules", "partition",
                         "oom_behaviour", "rollback"}) {
    EXPECT_EQ(VerdictOf(doc, id), "pass") << id << ": " << SummaryOf(doc, id);
    EXPECT_TRUE(ItemOf(doc, id)["action"].IsNull()) << id;
  }
  // The budget was measured against the cap.
  EXPECT_EQ(ModelOf(doc, "memory_budget", "simple v2").first, "pass");
  EXPECT_THAT(ModelOf(doc, "memory_budget", "simple v2").second, HasSubstr("limit 64.0 MiB"));
  EXPECT_THAT(ModelOf(doc, "arena", "simple").second, HasSubstr("capped at 64.0 MiB"));
  EXPECT_THAT(ModelOf(doc, "oom_behaviour", "simple").second, HasSubstr("seeded request"));
  EXPECT_THAT(ModelOf(doc, "rollback", "simple").second, HasSubstr("gate on"));
  EXPECT_THAT(ModelOf(doc, "rollback", "simple").second, HasSubstr("version 1 kept on disk"));
  EXPECT_THAT(SummaryOf(doc, "soak"), HasSubstr("soak of 'simple' at concurrency 8 for 31m"));
  // Not asked: listed plainly, not failing.
  EXPECT_EQ(VerdictOf(doc, "metrics_collected"), "not_checked");
  EXPECT_THAT(SummaryOf(doc, "metrics_collected"), HasSubstr("no --prometheus URL"));
  EXPECT_THAT(Ids(doc, "failed"), ::testing::IsEmpty());
  EXPECT_EQ(run.err, "");

  // --strict: what was not checked fails the run.
  const CommandRun strict =
      Preflight(Args({"--soak-report", soak.string(), "--alert-rules", kShippedRules, "--strict"}));
  EXPECT_EQ(strict.exit_code, 1) << strict.out;
  EXPECT_THAT(strict.err, HasSubstr("failing: 5b metrics_collected (NOT CHECKED)"));

  // Two versions served by the policy are a previous version kept, too.
  repo_.WriteConfig("simple",
                    ReadySimpleConfig() + "version_policy { latest { num_versions: 2 } }\n");
  const CommandRun both =
      Preflight(Args({"--soak-report", soak.string(), "--alert-rules", kShippedRules}));
  EXPECT_EQ(both.exit_code, 0) << both.out << both.err;
  EXPECT_THAT(ModelOf(Json(both), "rollback", "simple").second,
              HasSubstr("versions 1, 2 loaded by its version_policy"));
}

TEST_F(PreflightTest, ASoakThatIsShortFailedOrOfAnotherModelIsNotClean) {
  WriteReadyRepository();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {SoakReport("simple", 10), "less than 30m"},
      {SoakReport("simple", 31, /*errors=*/5), "5 of 186000 requests failed (http_503 5)"},
      {SoakReport("simple", 31, 0, /*interrupted=*/true), "it was interrupted"},
      {SoakReport("simple", 31, 0, false, /*last_throughput_ratio=*/0.5), "drift"},
      // The ratios left out of the file: computed from the windows, not skipped.
      {SoakReport("simple", 31, 0, false, 0.5, /*stated_ratios=*/false), "drift"},
      {SoakReport("other", 31), "model 'other' is not in this repository"},
      {R"({"runs": [{"model": "simple", "points": [], "soak": null}]})", "holds no soak run"},
      {"not json", "not a fastpath bench report"},
  };
  for (const auto& [report, why] : cases) {
    const fs::path soak = File("soak.json", report);
    const CommandRun run =
        Preflight(Args({"--soak-report", soak.string(), "--alert-rules", kShippedRules}));
    EXPECT_EQ(run.exit_code, 1) << why << ": " << run.out;
    const rapidjson::Document doc = Json(run);
    EXPECT_EQ(VerdictOf(doc, "soak"), "fail") << why;
    EXPECT_THAT(SummaryOf(doc, "soak"), HasSubstr(why));
    EXPECT_THAT(Ids(doc, "failed"), ::testing::ElementsAre("soak")) << why;
  }
  const CommandRun missing = Preflight(Args(
      {"--soak-report", (files_.root() / "none.json").string(), "--alert-rules", kShippedRules}));
  EXPECT_THAT(SummaryOf(Json(missing), "soak"), HasSubstr("cannot read the soak report"));
}

TEST_F(PreflightTest, AlertRulesAreParsedAndMustHoldTheRunbooksAlerts) {
  WritePlainRepository();
  const std::string shipped = ReadAll(kShippedRules);
  ASSERT_FALSE(shipped.empty()) << kShippedRules;
  // The shipped rules under a PrometheusRule object's spec.
  std::string object =
      "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\n"
      "metadata:\n  name: fastpath\nspec:\n";
  std::istringstream lines(shipped);
  for (std::string line; std::getline(lines, line);) object += "  " + line + "\n";
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {object, "pass", "18 alerts"},
      {"groups:\n  - name: fastpath\n    rules:\n      - alert: FastpathNotReady\n"
       "        expr: fastpath_server_ready == 0\n",
       "fail", "missing FastpathModelUnavailable"},
      {"groups:\n  - name: fastpath\n    rules:\n      - alert: FastpathNotReady\n"
       "        for: 5m\n",
       "fail", "line 4: rule 'FastpathNotReady' has no 'expr'"},
      {"groups:\n  - name: fastpath\n    rules:\n\t- alert: FastpathNotReady\n", "fail",
       "line 4: a tab in the indentation"},
      {"groups:\n  - name: a\n    rules: []\n  - name: a\n    name: b\n", "fail",
       "line 5: the key 'name' twice"},
      {"rules:\n  - alert: X\n", "fail", "no 'groups'"},
  };
  for (const auto& [text, verdict, why] : cases) {
    const fs::path rules = File("rules.yaml", text);
    const CommandRun run = Preflight(Args({"--alert-rules", rules.string()}));
    const rapidjson::Document doc = Json(run);
    EXPECT_EQ(VerdictOf(doc, "alert_rules"), verdict)
        << why << ": " << SummaryOf(doc, "alert_rules");
    EXPECT_THAT(SummaryOf(doc, "alert_rules"), HasSubstr(why));
  }
  const CommandRun missing =
      Preflight(Args({"--alert-rules", (files_.root() / "none.yaml").string()}));
  EXPECT_THAT(SummaryOf(Json(missing), "alert_rules"), HasSubstr("cannot read"));
}

TEST_F(PreflightTest, AnUnreachablePrometheusFailsMetricsCollected) {
  WritePlainRepository();
  // Port 1 on loopback: nothing listens there.
  const CommandRun run = Preflight(Args({"--prometheus", "http://127.0.0.1:1"}));
  EXPECT_EQ(run.exit_code, 1);
  const rapidjson::Document doc = Json(run);
  EXPECT_EQ(VerdictOf(doc, "metrics_collected"), "fail");
  EXPECT_THAT(SummaryOf(doc, "metrics_collected"), HasSubstr("cannot query http://127.0.0.1:1"));
}

// A KIND_GPU copy of the test suite's `square` model (OUTPUT0 = INPUT0 x INPUT0).
std::string SquareConfig(const std::string& gpus, const std::string& extra = "") {
  return R"(name: "square"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 8, 8 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 8, 8 ] } ]
instance_group [ { kind: KIND_GPU count: 1 gpus: [ )" +
         gpus + R"( ] } ]
)" + extra;
}

TEST_F(PreflightTest, AGpuModelOnANodeWithoutAGpuFails) {
  repo_.AddVersion("square", 1, "square");
  repo_.WriteConfig("square", SquareConfig("0"));
  // The driver and ONNX Runtime's CUDA EP both see no device.
  const CommandRun run =
      Preflight(Args({"--alert-rules", kShippedRules}),
                FakeGpuNode({"FASTPATH_FAKE_CUDA_DEVICES=0", "FASTPATH_FAKE_EP_DEVICES=0"}));
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  const rapidjson::Document doc = Json(run);
  EXPECT_EQ(VerdictOf(doc, "driver"), "fail");
  EXPECT_THAT(SummaryOf(doc, "driver"), HasSubstr("GPU models (square) cannot run here"));
  EXPECT_EQ(ModelOf(doc, "driver", "square").first, "fail");
  EXPECT_EQ(VerdictOf(doc, "partition"), "fail");
  EXPECT_THAT(ModelOf(doc, "partition", "square").second, HasSubstr("no GPU is visible"));
  EXPECT_EQ(VerdictOf(doc, "memory_budget"), "fail");  // it could not load here
  EXPECT_THAT(ModelOf(doc, "memory_budget", "square v1").second, HasSubstr("did not load"));
  // A GPU model without a cap: its CUDA arena can take the whole GPU.
  EXPECT_EQ(VerdictOf(doc, "arena"), "fail");
  EXPECT_THAT(ModelOf(doc, "arena", "square").second, HasSubstr("the CUDA arena has no cap"));
  EXPECT_EQ(VerdictOf(doc, "oom_behaviour"), "fail");
  // With a GPU model the GPU alerts are required too; the shipped file has them.
  EXPECT_EQ(VerdictOf(doc, "alert_rules"), "pass");
  EXPECT_THAT(SummaryOf(doc, "alert_rules"), HasSubstr("all 12 alerts"));
}

// A config that does not parse may ask for a GPU: "no GPU model, every model runs on the
// CPU" claimed what was never read, and the GPU alerts were not required.
TEST_F(PreflightTest, AModelWhoseConfigDoesNotParseIsNoCpuModel) {
  repo_.AddVersion("square", 1, "square");
  repo_.WriteConfig("square", SquareConfig("0") + "bogus_field: 1\n");
  const CommandRun run =
      Preflight(Args({"--alert-rules", kShippedRules}),
                FakeGpuNode({"FASTPATH_FAKE_CUDA_DEVICES=0", "FASTPATH_FAKE_EP_DEVICES=0"}));
  const rapidjson::Document doc = Json(run);
  ASSERT_TRUE(doc.IsObject()) << run.out << run.err;
  for (const char* item : {"driver", "partition"}) {
    EXPECT_EQ(VerdictOf(doc, item), "not_checked") << item;
    EXPECT_THAT(SummaryOf(doc, item), ::testing::Not(HasSubstr("runs on the CPU"))) << item;
    EXPECT_EQ(ModelOf(doc, item, "square").first, "not_checked") << item;
    EXPECT_THAT(ModelOf(doc, item, "square").second, HasSubstr("config.pbtxt unreadable"));
  }
  EXPECT_THAT(SummaryOf(doc, "alert_rules"), HasSubstr("all 12 alerts"));
}

TEST_F(PreflightTest, OnAFakeGpuNodeThePartitionIsCheckedAgainstTheConfig) {
  repo_.AddVersion("square", 1, "square");
  repo_.WriteConfig(
      "square",
      SquareConfig(
          "0", R"(parameters { key: "fastpath.memory.limit_bytes" value { string_value: "16Mi" } }
)"));
  // One whole GPU, which the model names.
  CommandRun run = Preflight(Args({"--alert-rules", kShippedRules}), FakeGpuNode());
  rapidjson::Document doc = Json(run);
  EXPECT_EQ(VerdictOf(doc, "driver"), "pass") << SummaryOf(doc, "driver");
  EXPECT_EQ(VerdictOf(doc, "partition"), "pass") << SummaryOf(doc, "partition");
  EXPECT_THAT(SummaryOf(doc, "partition"), HasSubstr("whole GPU 0 (Fake GPU)"));
  EXPECT_EQ(VerdictOf(doc, "arena"), "pass") << SummaryOf(doc, "arena");
  EXPECT_THAT(ModelOf(doc, "arena", "square").second, HasSubstr("GPU: the CUDA arena"));
  EXPECT_EQ(VerdictOf(doc, "oom_behaviour"), "pass") << SummaryOf(doc, "oom_behaviour");

  // MIG on, and no slice selected: the partition is not pinned.
  run = Preflight(Args({"--alert-rules", kShippedRules}),
                  FakeGpuNode({"FASTPATH_FAKE_NVML_MIG=1", "FASTPATH_FAKE_NVML_MIG_INSTANCES=2"}));
  doc = Json(run);
  EXPECT_EQ(VerdictOf(doc, "partition"), "fail");
  EXPECT_THAT(ModelOf(doc, "partition", "square").second, HasSubstr("names no MIG slice"));

  // A slice selected: the slice is GPU 0.
  run = Preflight(Args({"--alert-rules", kShippedRules}),
                  FakeGpuNode({"FASTPATH_FAKE_NVML_MIG=1", "FASTPATH_FAKE_NVML_MIG_INSTANCES=2",
                               "CUDA_VISIBLE_DEVICES=MIG-5c7b0b0a-1111-2222-3333-444455556666"}));
  doc = Json(run);
  EXPECT_EQ(VerdictOf(doc, "partition"), "pass") << SummaryOf(doc, "partition");
  EXPECT_THAT(SummaryOf(doc, "partition"), HasSubstr("MIG slice MIG-5c7b0b0a"));

  // MPS: said, with whether this server's share of the SMs is bounded.
  const fs::path pipe = files_.root() / "mps";
  fs::create_directories(pipe);
  run = Preflight(Args({"--alert-rules", kShippedRules}),
                  FakeGpuNode({"CUDA_MPS_PIPE_DIRECTORY=" + pipe.string()}));
  doc = Json(run);
  EXPECT_EQ(VerdictOf(doc, "partition"), "pass") << SummaryOf(doc, "partition");
  EXPECT_THAT(SummaryOf(doc, "partition"), HasSubstr("shared through MPS"));
  EXPECT_THAT(SummaryOf(doc, "partition"), HasSubstr("not bounded"));

  // A GPU the node does not have.
  repo_.WriteConfig("square", SquareConfig("1"));
  run = Preflight(Args({"--alert-rules", kShippedRules}), FakeGpuNode());
  doc = Json(run);
  EXPECT_EQ(VerdictOf(doc, "partition"), "fail");
  EXPECT_THAT(ModelOf(doc, "partition", "square").second,
              HasSubstr("GPU 1 is not among the 1 this node shows"));
  EXPECT_THAT(run.err, HasSubstr("6 partition (FAIL)"));
}

}  // namespace
}  // namespace fastpath::integration
