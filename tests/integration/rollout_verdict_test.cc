// GET /v2/rollout/verdict (issue 12 §3) against the real binary: a server measures itself, as
// the candidate, against a baseline server it was allowed to (`--rollout-verdict-baseline`),
// or a baseline recorded in the folder it was given (`--rollout-verdict-records`), and answers
// `fastpath gate --json`'s verdict. The same `square` model on both sides passes; the slower
// candidate of gate_test.cc (a 100 ms queue delay at batch 1, ~50x) is refused; the endpoint
// is off by default; bad queries are 400 naming the field, a baseline not allowed is 403, and
// a second measurement while one runs is 429. Verdicts and statuses are asserted, never
// timings.
#include <gmock/gmock.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <memory>

#include "fakes/run_command.h"
#include "fakes/temp_repository.h"
#include "gate_verdict_fixture.h"
#include "integration_fixture.h"

namespace fastpath::integration {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// The verdict of equal servers cannot flip on noise: 10x allowed, the slow candidate is ~50x.
constexpr const char* kGenerous = "&max_p95_ratio=10&min_throughput_ratio=0.1";

class RolloutVerdictTest : public GateServersTest {};

TEST_F(RolloutVerdictTest, TheSameModelOnBothSidesPasses) {
  Served& baseline = Start(kSquareConfig);
  Served& candidate = Start(kSquareConfig, {"--rollout-verdict-baseline", baseline.url()});
  HttpClient http(candidate.process->http_port());
  const std::string query = "/v2/rollout/verdict?model=square&baseline=" + baseline.url() +
                            "&rounds=20&output_tolerance=0" + kGenerous;
  const HttpResponse r = http.Get(query);
  ASSERT_EQ(r.status, 200) << r.Describe();
  EXPECT_EQ(r.Header("content-type").value_or(""), "application/json");
  const rapidjson::Document v = ParseJson(r.body);
  ASSERT_TRUE(v.IsObject()) << r.body;
  // `fastpath gate --json`'s verdict, with the outcome for Argo's web provider.
  EXPECT_TRUE(v["passed"].GetBool()) << Failures(v);
  EXPECT_EQ(std::string(v["outcome"].GetString()), "passed");
  EXPECT_EQ(std::string(v["model"].GetString()), "square");
  EXPECT_EQ(std::string(v["baseline"].GetString()), baseline.url());
  EXPECT_EQ(std::string(v["candidate"].GetString()), candidate.url());  // the server itself
  EXPECT_EQ(v["rounds"].GetUint(), 20u);
  EXPECT_EQ(v["batch_rows"].GetUint64(), 4u);
  EXPECT_TRUE(v["interleaved"].GetBool());
  EXPECT_EQ(v["output_difference"].GetDouble(), 0.0);
  EXPECT_EQ(v["limits"]["max_p95_ratio"].GetDouble(), 10.0);
  EXPECT_EQ(v["limits"]["output_tolerance"].GetDouble(), 0.0);
  EXPECT_TRUE(v["snapshots"]["compared"].GetBool());

  // Flagger's webhook: a POST (its JSON body is not read), strict statuses; the baseline
  // percent-encoded as a careful client sends it.
  std::string encoded = baseline.url();
  encoded.replace(encoded.find("://"), 3, "%3A%2F%2F");
  const HttpResponse strict = http.Post("/v2/rollout/verdict?model=square&strict=true&rounds=10" +
                                            std::string(kGenerous) + "&baseline=" + encoded,
                                        R"({"name": "square", "phase": "Progressing"})");
  ASSERT_EQ(strict.status, 200) << strict.Describe();
  EXPECT_EQ(std::string(ParseJson(strict.body)["outcome"].GetString()), "passed");

  // The server logs each verdict.
  EXPECT_THAT(candidate.process->LogTail(20000), HasSubstr("rollout verdict for model 'square'"));
}

TEST_F(RolloutVerdictTest, ASlowerCandidateIsRefused) {
  Served& baseline = Start(kSquareConfig);
  Served& slow = Start(std::string(kSquareConfig) + kSlowQueue,
                       {"--rollout-verdict-baseline", baseline.url()});
  HttpClient http(slow.process->http_port());
  // The default limits: p95 at most 1.10x.
  const std::string query = "/v2/rollout/verdict?model=square&rounds=10&baseline=" + baseline.url();
  const HttpResponse r = http.Get(query);
  ASSERT_EQ(r.status, 200) << r.Describe();  // a verdict, whichever it is
  const rapidjson::Document v = ParseJson(r.body);
  ASSERT_TRUE(v.IsObject()) << r.body;
  EXPECT_FALSE(v["passed"].GetBool());
  EXPECT_EQ(std::string(v["outcome"].GetString()), "refused");
  EXPECT_GT(v["p95_ratio"].GetDouble(), 1.10);
  EXPECT_THAT(Failures(v), HasSubstr("p95"));

  // strict: not 2xx, for a Flagger webhook; the same verdict in the body.
  const HttpResponse strict = http.Get(query + "&strict=1");
  EXPECT_EQ(strict.status, 409) << strict.Describe();
  EXPECT_EQ(std::string(ParseJson(strict.body)["outcome"].GetString()), "refused");
}

TEST_F(RolloutVerdictTest, TheEndpointIsOffByDefault) {
  Served& s = Start(kSquareConfig);
  HttpClient http(s.process->http_port());
  const HttpResponse r = http.Get("/v2/rollout/verdict?model=square&baseline=http://127.0.0.1:1");
  EXPECT_EQ(r.status, 404) << r.Describe();
  EXPECT_THAT(ErrorMessage(r.body), HasSubstr("--rollout-verdict-baseline"));
  EXPECT_THAT(ErrorMessage(r.body), HasSubstr("is off"));
}

TEST_F(RolloutVerdictTest, BadQueriesAre400NamingTheFieldAndOtherBaselines403) {
  // Port 1 on loopback: nothing listens there.
  const std::string nowhere = "http://127.0.0.1:1";
  Served& s = Start(kSquareConfig, {"--rollout-verdict-baseline", nowhere});
  HttpClient http(s.process->http_port());
  const std::string base = "/v2/rollout/verdict?model=square&baseline=" + nowhere;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"/v2/rollout/verdict?baseline=" + nowhere, "'model'"},
      {"/v2/rollout/verdict?model=square", "'baseline'"},
      {base + "&rounds=2", "rounds"},
      {base + "&rounds=7.5", "rounds"},
      {base + "&max_p95_ratio=fast", "max_p95_ratio"},
      {base + "&min_throughput_ratio=2", "min_throughput_ratio"},
      {base + "&output_tolerance=-1", "output_tolerance"},
      {base + "&strict=maybe", "strict"},
      {base + "&model=other", "'model' is given twice"},
      {base + "&protocol=grpc", "unknown query field 'protocol'"},
      {"/v2/rollout/verdict?model=square&baseline=https://127.0.0.1:1", "baseline"},
  };
  for (const auto& [target, named] : bad) {
    const HttpResponse r = http.Get(target);
    EXPECT_EQ(r.status, 400) << target << ": " << r.Describe();
    EXPECT_THAT(ErrorMessage(r.body), HasSubstr(named)) << target;
  }
  // Only the baselines the flag allows, and recorded ones only with --rollout-verdict-records.
  for (const std::string& baseline :
       {std::string("http://127.0.0.1:2"), std::string("http://169.254.169.254:80"),
        std::string("x.json")}) {
    const HttpResponse r = http.Get("/v2/rollout/verdict?model=square&baseline=" + baseline);
    EXPECT_EQ(r.status, 403) << baseline << ": " << r.Describe();
    EXPECT_THAT(ErrorMessage(r.body), HasSubstr("--rollout-verdict-")) << baseline;
  }
  const HttpResponse put =
      http.SendRaw("PUT " + base + " HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(put.status, 405) << put.Describe();

  // An allowed baseline that does not answer: a verdict of nothing measured, 503 when strict.
  const HttpResponse down = http.Get(base);
  ASSERT_EQ(down.status, 200) << down.Describe();
  const rapidjson::Document v = ParseJson(down.body);
  ASSERT_TRUE(v.IsObject()) << down.body;
  EXPECT_FALSE(v["passed"].GetBool());
  EXPECT_EQ(std::string(v["outcome"].GetString()), "not_measured");
  EXPECT_THAT(v["error"].GetString(), HasSubstr("unreachable"));
  EXPECT_EQ(http.Get(base + "&strict=true").status, 503);
}

TEST_F(RolloutVerdictTest, ARecordedBaselineIsReadOnlyFromTheRecordsFolder) {
  Served& baseline = Start(kSquareConfig);
  const fs::path records = Temp("records");
  fs::create_directories(records);
  const fastpath::testing::CommandRun recorded = fastpath::testing::RunCommand(
      {FASTPATH_BINARY, "gate", "--model", "square", "--baseline", baseline.url(), "--record",
       (records / "square.json").string(), "--rounds", "20"},
      {}, /*timeout_s=*/240);
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  std::ofstream(Temp("outside.json")) << "{}";

  Served& candidate = Start(kSquareConfig, {"--rollout-verdict-records", records.string()});
  HttpClient http(candidate.process->http_port());
  const HttpResponse r =
      http.Get("/v2/rollout/verdict?model=square&baseline=square.json" + std::string(kGenerous));
  ASSERT_EQ(r.status, 200) << r.Describe();
  const rapidjson::Document v = ParseJson(r.body);
  ASSERT_TRUE(v.IsObject()) << r.body;
  EXPECT_TRUE(v["passed"].GetBool()) << Failures(v);
  EXPECT_TRUE(v["baseline_recorded"].GetBool());
  EXPECT_EQ(v["rounds"].GetUint(), 20u);  // as many as recorded

  // Nothing outside the folder, and no live server: none was allowed.
  for (const std::string& name :
       {std::string("../outside.json"), Temp("outside.json").string(), baseline.url()}) {
    const HttpResponse refused = http.Get("/v2/rollout/verdict?model=square&baseline=" + name);
    EXPECT_EQ(refused.status, 403) << name << ": " << refused.Describe();
  }
  const HttpResponse missing = http.Get("/v2/rollout/verdict?model=square&baseline=none.json");
  EXPECT_EQ(missing.status, 400) << missing.Describe();
  // A record of another model is the query's fault.
  const HttpResponse other = http.Get("/v2/rollout/verdict?model=simple&baseline=square.json");
  EXPECT_EQ(other.status, 400) << other.Describe();
  EXPECT_THAT(ErrorMessage(other.body), HasSubstr("records model 'square'"));
}

TEST_F(RolloutVerdictTest, OneMeasurementAtATime) {
  Served& baseline = Start(kSquareConfig);
  // The slow candidate: 30 rounds at batch 1 take at least 3 s, so two requests sent together
  // overlap.
  Served& slow = Start(std::string(kSquareConfig) + kSlowQueue,
                       {"--rollout-verdict-baseline", baseline.url()});
  const std::string query = "/v2/rollout/verdict?model=square&rounds=30&baseline=" + baseline.url();
  const int port = slow.process->http_port();
  auto ask = [port, query] {
    HttpClient http(port);
    return http.Get(query);
  };
  auto first = std::async(std::launch::async, ask);
  auto second = std::async(std::launch::async, ask);
  const HttpResponse a = first.get();
  const HttpResponse b = second.get();
  const HttpResponse& busy = a.status == 429 ? a : b;
  const HttpResponse& measured = a.status == 429 ? b : a;
  EXPECT_EQ(busy.status, 429) << a.Describe() << "\n" << b.Describe();
  EXPECT_EQ(measured.status, 200) << measured.Describe();
  EXPECT_THAT(ErrorMessage(busy.body), HasSubstr("one runs at a time"));
  EXPECT_TRUE(busy.Header("retry-after").has_value());
}

}  // namespace
}  // namespace fastpath::integration
