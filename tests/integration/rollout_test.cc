// Rollouts that fail no request (issue 12), end to end on the real binary under load: 8
// clients send requests to `simple` without pause while its files change under the
// server. A model file replaced by a broken one (poll mode, and an explicit load), and a
// good version 2 added, each leave 0 failed requests: what serves is unloaded only for a
// version that loaded, and a request that found the old version just before the swap
// still runs on it.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>

#include "integration_fixture.h"

namespace fastpath::integration {
namespace {

class RolloutTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override { return {"simple"}; }

  // The repository index entry of simple's `version`, or an empty document.
  rapidjson::Document IndexEntry(const std::string& version) {
    const HttpResponse r = http().Post("/v2/repository/index", "{}");
    rapidjson::Document out;
    if (r.status != 200) return out;
    const rapidjson::Document doc = ParseJson(r.body);
    for (const auto& e : doc.GetArray()) {
      if (std::string(e["name"].GetString()) == "simple" && e.HasMember("version") &&
          std::string(e["version"].GetString()) == version) {
        out.CopyFrom(e, out.GetAllocator());
      }
    }
    return out;
  }
  // Polls the index until `pred` holds for simple's `version` (the poll thread works on
  // its own time); fails the test after 20 s.
  template <typename Pred>
  void WaitIndex(const std::string& version, Pred pred) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      const rapidjson::Document e = IndexEntry(version);
      if (e.IsObject() && pred(e)) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "simple version " << version << " never reached the expected state; log:\n"
                  << server().LogTail();
  }
  static std::string Reason(const rapidjson::Value& e) {
    return e.HasMember("reason") ? e["reason"].GetString() : "";
  }
  void BreakVersion1() {
    // Half a file, as an unfinished copy or a bad export leaves it.
    std::ofstream(repo().root() / "simple" / "1" / "model.onnx", std::ios::trunc)
        << "\x08\x07half a model";
  }
};

class PollRolloutTest : public RolloutTest {
 protected:
  std::vector<std::string> ExtraArgs() override {
    return {"--model-control-mode", "poll", "--repository-poll-secs", "1"};
  }
};

TEST_F(PollRolloutTest, AModelFileReplacedByABrokenOneFailsNoRequest) {
  SimpleLoad load(server().http_port());
  load.WaitSucceeded(200);
  BreakVersion1();
  WaitIndex("1", [](const rapidjson::Value& e) {
    return Reason(e).find("the previous load keeps serving") != std::string::npos;
  });
  EXPECT_EQ(std::string(IndexEntry("1")["state"].GetString()), "READY");
  load.WaitSucceeded(200);
  // Fixed again: the good file loads and takes over, still without a failure.
  repo().AddVersion("simple", 1, "simple");
  WaitIndex("1", [](const rapidjson::Value& e) { return Reason(e).empty(); });
  load.WaitSucceeded(200);
  load.Stop();
  EXPECT_EQ(load.failed(), 0) << load.first_failure() << "\nlog:\n" << server().LogTail();
  EXPECT_EQ(http().Get("/v2/health/ready").status, 200);
}

TEST_F(PollRolloutTest, AGoodVersionTwoTakesOverWithoutAFailedRequest) {
  SimpleLoad load(server().http_port());
  load.WaitSucceeded(200);
  repo().AddVersion("simple", 2, "simple");
  WaitIndex("2", [](const rapidjson::Value& e) {
    return std::string(e["state"].GetString()) == "READY";
  });
  load.WaitSucceeded(400);
  load.Stop();
  EXPECT_EQ(load.failed(), 0) << load.first_failure() << "\nlog:\n" << server().LogTail();
  EXPECT_FALSE(IndexEntry("1").IsObject() &&
               std::string(IndexEntry("1")["state"].GetString()) == "READY");
}

// A rollback in poll mode with the rollout gate on: version 2 passes and takes over, then its
// folder is removed. Version 1 comes back without being judged against version 2, which
// leaves: judged against it, a slower version 1 was refused and version 2 served on from
// memory, its files gone, with no later poll to retry.
class PollGateRolloutTest : public PollRolloutTest {
 protected:
  void PrepareRepository(testing::TempRepository& repo) override {
    repo.WriteConfig("simple", std::string(testing::kSimpleConfig) +
                                   "parameters { key: \"fastpath.rollout.gate\" value: { "
                                   "string_value: \"true\" } }\n");
  }
};

TEST_F(PollGateRolloutTest, RemovingTheNewVersionBringsTheOldOneBackUnjudged) {
  repo().AddVersion("simple", 2, "simple");
  WaitIndex("2", [](const rapidjson::Value& e) {
    return std::string(e["state"].GetString()) == "READY";
  });
  std::filesystem::remove_all(repo().root() / "simple" / "2");
  WaitIndex("1", [](const rapidjson::Value& e) {
    return std::string(e["state"].GetString()) == "READY";
  });
  EXPECT_FALSE(IndexEntry("2").IsObject() &&
               std::string(IndexEntry("2")["state"].GetString()) == "READY");
  const HttpResponse r = http().Get("/v2/models/simple/rollout");
  ASSERT_EQ(r.status, 200) << r.Describe();
  const rapidjson::Document doc = ParseJson(r.body);
  const rapidjson::Value& decisions = doc["decisions"];
  ASSERT_GE(decisions.Size(), 3u) << r.body;
  const rapidjson::Value& last = decisions[decisions.Size() - 1];
  EXPECT_EQ(last["candidate_version"].GetInt64(), 1) << r.body;
  EXPECT_EQ(std::string(last["outcome"].GetString()), "no_baseline") << r.body;
}

// Rolling forward by replacing version 1's folder with version 2's (rsync --delete, a volume
// swap) is still judged against version 1, which serves until then.
TEST_F(PollGateRolloutTest, ReplacingTheOldVersionsFolderIsStillJudgedAgainstIt) {
  std::filesystem::rename(repo().root() / "simple" / "1", repo().root() / "old-1");
  repo().AddVersion("simple", 2, "simple");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  rapidjson::Document doc;
  while (std::chrono::steady_clock::now() < deadline) {
    doc = ParseJson(http().Get("/v2/models/simple/rollout").body);
    if (doc.IsObject() && doc["decisions"].Size() >= 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(doc.IsObject() && doc["decisions"].Size() >= 2) << server().LogTail();
  const rapidjson::Value& d = doc["decisions"][1];
  EXPECT_EQ(d["candidate_version"].GetInt64(), 2) << ToJson(d);
  EXPECT_NE(std::string(d["outcome"].GetString()), "no_baseline") << ToJson(d);
  EXPECT_EQ(d["baseline_version"].GetInt64(), 1) << ToJson(d);
}

class ExplicitRolloutTest : public RolloutTest {
 protected:
  std::vector<std::string> ExtraArgs() override {
    return {"--model-control-mode", "explicit", "--load-model", "simple"};
  }
};

TEST_F(ExplicitRolloutTest, ALoadOfABrokenFileFailsAndTheServingLoadServesOn) {
  SimpleLoad load(server().http_port());
  load.WaitSucceeded(200);
  BreakVersion1();
  const HttpResponse r = http().Post("/v2/repository/models/simple/load", "{}");
  EXPECT_NE(r.status, 200) << r.Describe();
  EXPECT_NE(ErrorMessage(r.body).find("the previous load keeps serving"), std::string::npos)
      << r.Describe();
  load.WaitSucceeded(200);
  // A good file and a load again: it takes over.
  repo().AddVersion("simple", 1, "simple");
  EXPECT_EQ(http().Post("/v2/repository/models/simple/load", "{}").status, 200);
  load.WaitSucceeded(200);
  load.Stop();
  EXPECT_EQ(load.failed(), 0) << load.first_failure() << "\nlog:\n" << server().LogTail();
}

// A sanitizer build (Debug, instrumented: runs of the same request vary several-fold) times
// too unevenly for the gate's verdict to be judged by a test: there the gate tests check what
// does not depend on timing precision (a decision with its figures, no failed request, the
// model READY), and the optimized build checks the verdicts.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kTimedVerdicts = false;
#else
constexpr bool kTimedVerdicts = true;
#endif

// The rollout gate (issue 12 §2) under load: `chain` serves chain10 with
// fastpath.rollout.gate on while 8 clients send it requests without pause. A candidate
// doing 1.3x the work (chain13, the same interface) is refused with the figures side by
// side and chain10 serves on; the same model again passes and takes over. Neither fails a
// request.
class GateRolloutTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override { return {}; }
  void PrepareRepository(testing::TempRepository& repo) override {
    repo.WriteConfig("chain", R"(name: "chain"
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 512 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 512 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
dynamic_batching { }
parameters { key: "fastpath.rollout.gate" value: { string_value: "true" } }
)");
    repo.AddVersion("chain", 1, "chain10");
  }
  std::vector<std::string> ExtraArgs() override {
    return {"--model-control-mode", "explicit", "--load-model", "chain"};
  }

  static std::string ChainRequest() {
    std::string data;
    for (int i = 0; i < 512; ++i) data += (i ? "," : "") + std::to_string((i % 7) * 0.1);
    return R"({"inputs":[{"name":"INPUT0","shape":[1,512],"datatype":"FP32","data":[)" + data +
           "]}]}";
  }
  std::unique_ptr<SimpleLoad> StartLoad() {
    return std::make_unique<SimpleLoad>(server().http_port(), 8, "/v2/models/chain/infer",
                                        ChainRequest());
  }
  // The rollout history's decisions, oldest first.
  rapidjson::Document Decisions() {
    const HttpResponse r = http().Get("/v2/models/chain/rollout");
    EXPECT_EQ(r.status, 200) << r.Describe();
    rapidjson::Document doc = ParseJson(r.body);
    rapidjson::Document out;
    out.CopyFrom(doc["decisions"], out.GetAllocator());
    return out;
  }
  std::string ChainState() {
    const rapidjson::Document doc = ParseJson(http().Post("/v2/repository/index", "{}").body);
    for (const auto& e : doc.GetArray()) {
      if (std::string(e["name"].GetString()) == "chain") return e["state"].GetString();
    }
    return "";
  }
};

TEST_F(GateRolloutTest, ASlowerCandidateIsRefusedUnderLoadAndTheServingVersionServesOn) {
  // The first load had nothing to compare with.
  {
    const rapidjson::Document decisions = Decisions();
    ASSERT_EQ(decisions.Size(), 1u);
    EXPECT_EQ(std::string(decisions[0]["outcome"].GetString()), "no_baseline");
  }
  auto load = StartLoad();
  load->WaitSucceeded(100);
  repo().AddVersion("chain", 1, "chain13");
  const HttpResponse r = http().Post("/v2/repository/models/chain/load", "{}");
  if (kTimedVerdicts) {
    EXPECT_NE(r.status, 200) << r.Describe();
    EXPECT_NE(ErrorMessage(r.body).find("rollout gate refused"), std::string::npos) << r.Describe();
  }
  load->WaitSucceeded(100);
  load->Stop();
  EXPECT_EQ(load->failed(), 0) << load->first_failure() << "\nlog:\n" << server().LogTail();
  EXPECT_EQ(ChainState(), "READY");

  const rapidjson::Document decisions = Decisions();
  ASSERT_EQ(decisions.Size(), 2u);
  const rapidjson::Value& d = decisions[1];
  std::cout << "gate: " << d["detail"].GetString() << "\n";
  EXPECT_EQ(d["candidate_version"].GetInt64(), 1);
  EXPECT_EQ(d["baseline_version"].GetInt64(), 1);
  ASSERT_TRUE(d["verdict"].IsObject()) << ToJson(d);
  if (!kTimedVerdicts) return;
  EXPECT_EQ(std::string(d["outcome"].GetString()), "refused") << ToJson(d);
  EXPECT_FALSE(d["verdict"]["passed"].GetBool());
  EXPECT_GT(d["verdict"]["failures"].Size(), 0u) << ToJson(d);
  // The reason is in the admission report too, beside a model that stays READY.
  EXPECT_NE(http().Get("/v2/health/admission").body.find("rollout gate refused"),
            std::string::npos);
  // And counted for Prometheus.
  const std::string metrics = HttpClient(server().metrics_port()).Get("/metrics").body;
  EXPECT_NE(metrics.find("fastpath_rollout_decisions_total{model=\"chain\",outcome=\"refused\"} 1"),
            std::string::npos)
      << metrics.substr(0, 2000);
}

// The same model again must pass. Its verdict is timed on a machine the test shares (with
// the other tests ctest runs beside it, in CI): a burst of foreign load over one side's runs
// can still read as a regression, which is what the gate is for. So a refusal is retried, up
// to kAttempts loads, each measured afresh; the gate must let it through on one of them, and
// every refusal must name a measured regression, never an error.
TEST_F(GateRolloutTest, AnEqualCandidatePassesUnderLoadAndTakesOver) {
  constexpr int kAttempts = 3;
  auto load = StartLoad();
  load->WaitSucceeded(100);
  repo().AddVersion("chain", 1, "chain10");
  int attempts = 0;
  HttpResponse r;
  std::string refusals;
  while (attempts < kAttempts) {
    ++attempts;
    r = http().Post("/v2/repository/models/chain/load", "{}");
    if (r.status == 200 || !kTimedVerdicts) break;
    ASSERT_NE(ErrorMessage(r.body).find("rollout gate refused"), std::string::npos)
        << r.Describe() << "\nlog:\n"
        << server().LogTail();
    refusals += "\n" + ErrorMessage(r.body);
  }
  if (kTimedVerdicts) {
    EXPECT_EQ(r.status, 200) << r.Describe() << "\nrefused " << attempts << " times:" << refusals
                             << "\nlog:\n"
                             << server().LogTail();
  }
  load->WaitSucceeded(100);
  load->Stop();
  EXPECT_EQ(load->failed(), 0) << load->first_failure() << "\nlog:\n" << server().LogTail();

  const rapidjson::Document decisions = Decisions();
  ASSERT_EQ(decisions.Size(), 1u + attempts);
  const rapidjson::Value& d = decisions[attempts];
  std::cout << "gate: " << d["detail"].GetString() << "\n";
  ASSERT_TRUE(d["verdict"].IsObject());
  EXPECT_EQ(d["verdict"]["throughput_batch_size"].GetUint64(), 8u);
  if (!kTimedVerdicts) return;
  EXPECT_EQ(std::string(d["outcome"].GetString()), "passed") << ToJson(d);
  EXPECT_TRUE(d["verdict"]["passed"].GetBool());
}

// The canary phase (issue 12 §2) under load: with fastpath.rollout.canary_percent, the
// candidate the gate let through first takes every fifth request for 10 s, the replaced load
// serving the rest, and is promoted with no regression. No request fails on the way.
class CanaryRolloutTest : public GateRolloutTest {
 protected:
  void PrepareRepository(testing::TempRepository& repo) override {
    GateRolloutTest::PrepareRepository(repo);
    std::ifstream in(repo.root() / "chain" / "config.pbtxt");
    std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // The gate is tested above: here it only has to let the equal candidate through, also
    // in a sanitizer build's uneven timings; so does the phase's p95.
    repo.WriteConfig("chain", config + R"(
parameters { key: "fastpath.rollout.canary_percent" value: { string_value: "20" } }
parameters { key: "fastpath.rollout.canary_duration_s" value: { string_value: "10" } }
parameters { key: "fastpath.rollout.max_p95_ratio" value: { string_value: "100" } }
parameters { key: "fastpath.rollout.min_throughput_ratio" value: { string_value: "0.01" } }
parameters { key: "fastpath.rollout.canary_max_p95_ratio" value: { string_value: "5" } }
)");
  }
};

TEST_F(CanaryRolloutTest, APassingCandidateTakesItsShareThenEverythingWithoutAFailedRequest) {
  auto load = StartLoad();
  load->WaitSucceeded(100);
  repo().AddVersion("chain", 1, "chain10");
  const HttpResponse r = http().Post("/v2/repository/models/chain/load", "{}");
  EXPECT_EQ(r.status, 200) << r.Describe() << "\nlog:\n" << server().LogTail();
  // The phase lasts 10 s; the watch looks once a second.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  std::vector<std::string> outcomes;
  while (std::chrono::steady_clock::now() < deadline) {
    outcomes.clear();
    const rapidjson::Document decisions = Decisions();
    for (const auto& d : decisions.GetArray()) outcomes.push_back(d["outcome"].GetString());
    if (outcomes.back() != "canary" && outcomes.back() != "passed") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  load->WaitSucceeded(100);
  load->Stop();
  EXPECT_EQ(load->failed(), 0) << load->first_failure() << "\nlog:\n" << server().LogTail();
  ASSERT_EQ(outcomes, (std::vector<std::string>{"no_baseline", "passed", "canary", "promoted"}))
      << server().LogTail();
  const rapidjson::Document decisions = Decisions();
  std::cout << "canary: " << decisions[3]["detail"].GetString() << "\n";
  EXPECT_NE(std::string(decisions[3]["detail"].GetString()).find("promoted: no error"),
            std::string::npos)
      << ToJson(decisions[3]);
  ASSERT_TRUE(decisions[3]["canary"].IsObject()) << ToJson(decisions[3]);
  EXPECT_EQ(decisions[3]["canary"]["candidate_error_rate"].GetDouble(), 0.0);
  EXPECT_GT(decisions[3]["canary"]["p95_ratio"].GetDouble(), 0.0) << "judged: plenty of requests";
  EXPECT_TRUE(decisions[2]["canary"].IsNull()) << "the phase's start has no verdict";
  EXPECT_EQ(ChainState(), "READY");
  const std::string metrics = HttpClient(server().metrics_port()).Get("/metrics").body;
  EXPECT_NE(
      metrics.find("fastpath_rollout_decisions_total{model=\"chain\",outcome=\"promoted\"} 1"),
      std::string::npos)
      << metrics.substr(0, 2000);
}

}  // namespace
}  // namespace fastpath::integration
