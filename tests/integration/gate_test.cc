// `fastpath gate` (issue 12 §3) against real servers: two servers of the same `square` model
// pass, a candidate made slower is refused, over HTTP and gRPC; a recorded baseline compares
// as a live one does; bad command lines exit 2 naming the flag, an unreachable server and an
// unknown model exit 3 saying so.
//
// The slower candidate is the same model whose config turns on dynamic batching with a
// 100 ms queue delay: a request of one row waits for more until the delay passes, so each of
// its batch-1 round trips takes 100 ms or more where the baseline's take about a millisecond.
// A deterministic slowdown of ~50x, which no scheduling noise on a busy two-core machine can
// hide; the test asserts verdicts and fields, never timings.
#include <gmock/gmock.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "fakes/run_command.h"
#include "fakes/temp_repository.h"
#include "gate_verdict_fixture.h"
#include "integration_fixture.h"

namespace fastpath::integration {
namespace {

namespace fs = std::filesystem;
using fastpath::testing::CommandRun;
using ::testing::HasSubstr;

// The verdict cannot flip on noise: the pass runs allow 10x, the slow candidate is ~50x.
const std::vector<std::string> kGenerous = {"--max-p95-ratio", "10", "--min-throughput-ratio",
                                            "0.1"};

CommandRun Gate(std::vector<std::string> args) {
  args.insert(args.begin(), {FASTPATH_BINARY, "gate"});
  return fastpath::testing::RunCommand(args, {}, /*timeout_s=*/240);
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class GateTest : public GateServersTest {};

std::vector<std::string> Join(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(GateTest, TheSameModelOnBothSidesPasses) {
  Served& a = Start(kSquareConfig);
  Served& b = Start(kSquareConfig);
  const fs::path record = Temp("live-record.json");
  const CommandRun run =
      Gate(Join({"--model", "square", "--baseline", a.url(), "--candidate", b.url(), "--rounds",
                 "40", "--output-tolerance", "0", "--json", "--record", record.string()},
                kGenerous));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const rapidjson::Document v = ParseJson(run.out);
  ASSERT_TRUE(v.IsObject()) << run.out;
  EXPECT_TRUE(v["passed"].GetBool()) << Failures(v);
  EXPECT_EQ(std::string(v["outcome"].GetString()), "passed");  // as /v2/rollout/verdict's
  EXPECT_EQ(v["rounds"].GetUint(), 40u);
  EXPECT_EQ(v["rows"].GetUint64(), 1u);
  EXPECT_EQ(v["batch_rows"].GetUint64(), 4u);  // the model's max_batch_size
  EXPECT_EQ(v["throughput_rows"].GetUint64(), 4u);
  EXPECT_TRUE(v["interleaved"].GetBool());
  EXPECT_FALSE(v["baseline_recorded"].GetBool());
  EXPECT_EQ(v["seed"].GetUint64(), 0x63616e617279u);   // the canaries' request
  EXPECT_EQ(v["output_difference"].GetDouble(), 0.0);  // same model, same input
  EXPECT_TRUE(v["failures"].GetArray().Empty());
  for (const char* key : {"p95_ratio", "throughput_ratio", "baseline_p50_ms", "baseline_p95_ms",
                          "candidate_p50_ms", "candidate_p95_ms"}) {
    EXPECT_TRUE(v[key].IsNumber() && v[key].GetDouble() > 0) << key;
  }
  ASSERT_TRUE(v["batch"].IsObject());
  EXPECT_EQ(v["batch"]["rows"].GetUint64(), 4u);
  // Two servers of one machine: their snapshots agree.
  EXPECT_TRUE(v["snapshots"]["compared"].GetBool()) << v["snapshots"]["note"].GetString();
  EXPECT_TRUE(v["snapshots"]["comparable_hardware"].GetBool());
  EXPECT_TRUE(v["snapshots"]["differences"].GetArray().Empty()) << run.out;
  EXPECT_EQ(v["limits"]["output_tolerance"].GetDouble(), 0.0);

  // --record beside a live candidate writes the baseline's side.
  const rapidjson::Document r = ParseJson(ReadAll(record));
  ASSERT_TRUE(r.IsObject());
  EXPECT_EQ(r["fastpath_gate_record"].GetInt(), 1);
  EXPECT_EQ(std::string(r["server"].GetString()), a.url());
  ASSERT_EQ(r["requests"].Size(), 2u);
  EXPECT_EQ(r["requests"][1]["rows"].GetUint64(), 4u);
  EXPECT_EQ(r["requests"][0]["samples_ms"].Size(), 40u);

  // The readable report.
  const CommandRun text = Gate(
      Join({"--model", "square", "--baseline", a.url(), "--candidate", b.url(), "--rounds", "20"},
           kGenerous));
  EXPECT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_THAT(text.out, HasSubstr("PASSED"));
  EXPECT_THAT(text.out, HasSubstr("interleaved"));
  EXPECT_THAT(text.out, HasSubstr("outputs               identical"));
}

TEST_F(GateTest, TheTimedRequestsCanGoOverGrpc) {
  Served& a = Start(kSquareConfig);
  Served& b = Start(kSquareConfig);
  const CommandRun run =
      Gate(Join({"--model", "square", "--baseline", a.url(), "--candidate", b.url(), "--rounds",
                 "20", "--protocol", "grpc", "--baseline-grpc", a.process->grpc_target(),
                 "--candidate-grpc", b.process->grpc_target(), "--json"},
                kGenerous));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const rapidjson::Document v = ParseJson(run.out);
  ASSERT_TRUE(v.IsObject()) << run.out;
  EXPECT_TRUE(v["passed"].GetBool()) << Failures(v);
  EXPECT_EQ(std::string(v["protocol"].GetString()), "grpc");
  EXPECT_EQ(v["output_difference"].GetDouble(), 0.0);
}

TEST_F(GateTest, ASlowerCandidateIsRefused) {
  Served& a = Start(kSquareConfig);
  Served& slow = Start(std::string(kSquareConfig) + kSlowQueue);
  // The default limits (p95 at most 1.10x): the candidate's p95 is ~50x.
  const CommandRun run = Gate({"--model", "square", "--baseline", a.url(), "--candidate",
                               slow.url(), "--rounds", "10", "--json"});
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  const rapidjson::Document v = ParseJson(run.out);
  ASSERT_TRUE(v.IsObject()) << run.out;
  EXPECT_FALSE(v["passed"].GetBool());
  EXPECT_EQ(std::string(v["outcome"].GetString()), "refused");
  EXPECT_GT(v["p95_ratio"].GetDouble(), 1.10);
  EXPECT_THAT(Failures(v), HasSubstr("p95"));
  EXPECT_EQ(v["output_difference"].GetDouble(), 0.0);  // slower, not different

  // The readable report says why.
  const CommandRun text = Gate(
      {"--model", "square", "--baseline", a.url(), "--candidate", slow.url(), "--rounds", "5"});
  EXPECT_EQ(text.exit_code, 1) << text.out << text.err;
  EXPECT_THAT(text.out, HasSubstr("REFUSED"));
  EXPECT_THAT(text.out, HasSubstr("p95"));
}

TEST_F(GateTest, ARecordedBaselineComparesLikeALiveOne) {
  Served& a = Start(kSquareConfig);
  Served& slow = Start(std::string(kSquareConfig) + kSlowQueue);
  const fs::path record = Temp("baseline.json");
  // --record alone: the baseline measured by itself, nothing judged.
  const CommandRun recorded = Gate(
      {"--model", "square", "--baseline", a.url(), "--record", record.string(), "--rounds", "30"});
  ASSERT_EQ(recorded.exit_code, 0) << recorded.out << recorded.err;
  EXPECT_THAT(recorded.err, HasSubstr("recorded the baseline"));
  ASSERT_TRUE(fs::exists(record));

  const CommandRun same = Gate(
      Join({"--model", "square", "--baseline", record.string(), "--candidate", a.url(), "--json"},
           kGenerous));
  ASSERT_EQ(same.exit_code, 0) << same.out << same.err;
  const rapidjson::Document v = ParseJson(same.out);
  ASSERT_TRUE(v.IsObject()) << same.out;
  EXPECT_TRUE(v["passed"].GetBool()) << Failures(v);
  EXPECT_TRUE(v["baseline_recorded"].GetBool());
  EXPECT_FALSE(v["interleaved"].GetBool());
  EXPECT_EQ(v["rounds"].GetUint(), 30u);               // as many as recorded
  EXPECT_EQ(v["output_difference"].GetDouble(), 0.0);  // the recorded outputs, element by element
  EXPECT_THAT(v["baseline"].GetString(), HasSubstr(record.string()));

  const CommandRun refused = Gate(
      {"--model", "square", "--baseline", record.string(), "--candidate", slow.url(), "--json"});
  EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;
  const rapidjson::Document w = ParseJson(refused.out);
  ASSERT_TRUE(w.IsObject());
  EXPECT_FALSE(w["passed"].GetBool());
  EXPECT_THAT(Failures(w), HasSubstr("p95"));

  // A record of another model is a bad command line; a damaged one cannot be judged.
  const CommandRun other =
      Gate({"--model", "simple", "--baseline", record.string(), "--candidate", a.url()});
  EXPECT_EQ(other.exit_code, 2) << other.err;
  EXPECT_THAT(other.err, HasSubstr("records model 'square'"));
  const fs::path damaged = Temp("damaged.json");
  std::ofstream(damaged) << "{\"fastpath_gate_record\": 1}";
  const CommandRun bad =
      Gate({"--model", "square", "--baseline", damaged.string(), "--candidate", a.url()});
  EXPECT_EQ(bad.exit_code, 3) << bad.err;
  EXPECT_THAT(bad.err, HasSubstr("is not a `fastpath gate --record` file"));

  // A record edited to one sample a request, or to no outputs, was judged (PASSED on one
  // round, "outputs identical" with nothing compared): it cannot be.
  std::ifstream in(record);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto edited = [&](const std::function<void(rapidjson::Value&)>& edit) {
    rapidjson::Document doc;
    doc.Parse(text.c_str());
    for (auto& r : doc["requests"].GetArray()) edit(r);
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
    doc.Accept(w);
    const fs::path path = Temp("edited.json");
    std::ofstream(path) << buffer.GetString();
    return Gate({"--model", "square", "--baseline", path.string(), "--candidate", a.url()});
  };
  const CommandRun one_sample = edited([](rapidjson::Value& r) {
    r["samples_ms"].Erase(r["samples_ms"].Begin() + 1, r["samples_ms"].End());
  });
  EXPECT_EQ(one_sample.exit_code, 3) << one_sample.out << one_sample.err;
  EXPECT_THAT(one_sample.err, HasSubstr("a request has 1 samples; a record holds 5 to 1000"));
  const CommandRun no_outputs = edited([](rapidjson::Value& r) { r["outputs"].Clear(); });
  EXPECT_EQ(no_outputs.exit_code, 3) << no_outputs.out << no_outputs.err;
  EXPECT_THAT(no_outputs.err, HasSubstr("a request has no outputs to compare"));
}

TEST_F(GateTest, AnUnknownModelSaysSo) {
  Served& a = Start(kSquareConfig);
  const CommandRun run =
      Gate({"--model", "nope", "--baseline", a.url(), "--candidate", a.url(), "--json"});
  EXPECT_EQ(run.exit_code, 3) << run.out << run.err;
  EXPECT_THAT(run.err, HasSubstr("does not serve model 'nope'"));
  const rapidjson::Document v = ParseJson(run.out);
  ASSERT_TRUE(v.IsObject()) << run.out;
  EXPECT_FALSE(v["passed"].GetBool());
  EXPECT_EQ(std::string(v["outcome"].GetString()), "not_measured");
  EXPECT_THAT(v["error"].GetString(), HasSubstr("'nope'"));
}

TEST(GateCommandLine, AnUnreachableServerCannotBeJudged) {
  // Port 1 on loopback: nothing listens there, the connection is refused at once.
  const CommandRun run = Gate({"--model", "square", "--baseline", "http://127.0.0.1:1",
                               "--candidate", "http://127.0.0.1:1"});
  EXPECT_EQ(run.exit_code, 3) << run.out << run.err;
  EXPECT_THAT(run.err, HasSubstr("the baseline http://127.0.0.1:1"));
  EXPECT_THAT(run.err, HasSubstr("unreachable"));
}

TEST(GateCommandLine, BadCommandLinesExit2NamingTheFlag) {
  const std::string url = "http://127.0.0.1:1";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "--model"},
      {{"--model", "m", "--baseline", url}, "--candidate"},
      {{"--model", "m", "--candidate", url}, "--baseline"},
      {{"--model", "m", "--baseline", url, "--candidate", url, "--rounds", "2"}, "--rounds"},
      {{"--model", "m", "--baseline", url, "--candidate", url, "--max-p95-ratio", "fast"},
       "--max-p95-ratio"},
      {{"--model", "m", "--baseline", url, "--candidate", url, "--min-throughput-ratio", "2"},
       "--min-throughput-ratio"},
      {{"--model", "m", "--baseline", url, "--candidate", url, "--output-tolerance", "-1"},
       "--output-tolerance"},
      {{"--model", "m", "--baseline", url, "--candidate", url, "--protocol", "ftp"}, "--protocol"},
      {{"--model", "m", "--baseline", "no-such-baseline.json", "--candidate", url}, "--baseline"},
      // A path is a file, whatever its name (it was read as a server's address "with a path").
      {{"--model", "m", "--baseline", "/nonexistent/baseline", "--candidate", url},
       "--baseline '/nonexistent/baseline': no such file"},
      {{"--model", "m", "--baseline", url, "--candidate", "https://example.com"}, "--candidate"},
      {{"--model", "m", "--baseline", url, "--candidate", "127.0.0.1:port"}, "--candidate"},
      {{"--model", "m", "--baseline", url, "--candidate", url, "--candidate-grpc", "h:1"},
       "--protocol grpc"},
      {{"--model", "m", "--baseline", url, "--candidate", url, "--bogus"}, "unknown flag --bogus"},
      // Found before minutes of measuring, not after (it was exit 1, a refusal's code).
      {{"--model", "m", "--baseline", url, "--record", "/no-such-folder/rec.json"},
       "--record '/no-such-folder/rec.json': no folder /no-such-folder"},
  };
  for (const auto& [args, named] : cases) {
    const CommandRun run = Gate(args);
    std::string line;
    for (const std::string& a : args) line += " " + a;
    EXPECT_EQ(run.exit_code, 2) << "gate" << line << ": " << run.err;
    EXPECT_THAT(run.err, HasSubstr(named)) << "gate" << line;
    EXPECT_EQ(run.out, "") << "gate" << line;
  }
  const CommandRun help = Gate({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("usage: fastpath gate"));
  EXPECT_THAT(help.out, HasSubstr("Exit codes: 0"));
}

}  // namespace
}  // namespace fastpath::integration
