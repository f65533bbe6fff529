// `fastpath bench` against the real server on the tiny `simple` model: short windows over
// HTTP (binary and JSON, closed and open loop), gRPC, in-process, the plot subcommand,
// and the errors a user meets first. Asserts the report's fields and zero errors, never
// timings.
#include <fstream>
#include <sstream>

#include "fakes/run_command.h"
#include "integration_fixture.h"

namespace fastpath::integration {
namespace {

namespace fs = std::filesystem;

using BenchRun = fastpath::testing::CommandRun;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class BenchTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override { return {"simple"}; }

  BenchRun Run(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {FastpathBinary(), "bench"};
    argv.insert(argv.end(), args.begin(), args.end());
    return fastpath::testing::RunCommand(argv, {}, /*timeout_s=*/280);
  }

  // Short windows: the test checks the plumbing, not the numbers.
  std::vector<std::string> Short() {
    return {"-m",
            "simple",
            "--warmup-ms",
            "100",
            "--measurement-interval-ms",
            "250",
            "--max-trials",
            "3",
            "--stability-percentage",
            "100"};
  }

  std::string Path(const std::string& name) { return (work_->root() / name).string(); }

  static void ExpectCleanPoint(const rapidjson::Value& p, bool server_split) {
    ASSERT_TRUE(p.IsObject());
    EXPECT_EQ(p["errors"].GetUint64(), 0u) << ToJson(p);
    EXPECT_GT(p["requests"].GetUint64(), 0u) << ToJson(p);
    EXPECT_GT(p["throughput_rps"].GetDouble(), 0.0);
    EXPECT_GT(p["throughput_ips"].GetDouble(), 0.0);
    const auto& l = p["latency_us"];
    for (const char* k : {"p50", "p90", "p95", "p99", "max", "mean", "min"}) {
      ASSERT_TRUE(l.HasMember(k)) << k;
      EXPECT_GT(l[k].GetDouble(), 0.0) << k;
    }
    EXPECT_LE(l["p50"].GetDouble(), l["p99"].GetDouble());
    EXPECT_LE(l["p99"].GetDouble(), l["max"].GetDouble());
    EXPECT_GE(p["trials"].GetInt(), 1);
    EXPECT_TRUE(p["errors_by_kind"].IsObject());
    if (server_split) {
      ASSERT_TRUE(p["server"].IsObject()) << ToJson(p);
      const auto& s = p["server"];
      EXPECT_GT(s["requests"].GetUint64(), 0u);
      EXPECT_GT(s["executions"].GetUint64(), 0u);
      for (const char* k : {"queue_us", "compute_input_us", "compute_infer_us", "compute_output_us",
                            "compute_us", "average_batch"}) {
        ASSERT_TRUE(s.HasMember(k)) << k;
      }
      EXPECT_GE(s["average_batch"].GetDouble(), 1.0);
      EXPECT_TRUE(s["batch_histogram"].IsObject());
      EXPECT_GT(s["batch_histogram"].MemberCount(), 0u);
    }
  }
};

TEST_F(BenchTest, HttpBinarySweepWithInProcessCeilingAndEveryOutput) {
  auto args = Short();
  for (const std::string& a : std::vector<std::string>{
           "-u", "127.0.0.1:" + std::to_string(server().http_port()), "--concurrency", "1,2",
           "--in-process", "--model-repository", repo().root().string(), "--batch-sizes", "1,2",
           "--json", Path("r.json"), "--csv", Path("r.csv"), "--svg", Path("r.svg"), "--label",
           "simple http"}) {
    args.push_back(a);
  }
  BenchRun r = Run(args);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("c=2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("in-process"), std::string::npos) << r.out;

  rapidjson::Document doc = ParseJson(ReadAll(Path("r.json")));
  ASSERT_TRUE(doc.IsObject() && doc["runs"].IsArray() && doc["runs"].Size() == 1)
      << ReadAll(Path("r.json"));
  const auto& run = doc["runs"][0];
  EXPECT_STREQ(run["label"].GetString(), "simple http");
  EXPECT_STREQ(run["transport"].GetString(), "http");
  EXPECT_STREQ(run["encoding"].GetString(), "binary");
  EXPECT_STREQ(run["model"].GetString(), "simple");
  EXPECT_NE(std::string(run["command"].GetString()).find("--concurrency 1,2"), std::string::npos);
  ASSERT_EQ(run["points"].Size(), 2u);
  EXPECT_EQ(run["points"][0]["concurrency"].GetInt(), 1);
  EXPECT_EQ(run["points"][1]["concurrency"].GetInt(), 2);
  for (const auto& p : run["points"].GetArray()) ExpectCleanPoint(p, true);
  ASSERT_EQ(run["in_process"].Size(), 2u);
  EXPECT_EQ(run["in_process"][1]["batch_size"].GetInt(), 2);
  for (const auto& p : run["in_process"].GetArray()) {
    ExpectCleanPoint(p, false);
    // One ORT thread per session: the CPU-time ceiling is measured.
    ASSERT_TRUE(p["cpu_ceiling_ips"].IsNumber()) << ToJson(p);
    EXPECT_GT(p["cpu_ceiling_ips"].GetDouble(), 0.0);
  }
  ASSERT_TRUE(run["efficiency_vs_cpu_ceiling"].IsNumber());
  ASSERT_TRUE(run["efficiency"].IsNumber());
  EXPECT_GT(run["efficiency"].GetDouble(), 0.0);
  EXPECT_TRUE(run["points"][0]["efficiency"].IsNumber());

  const std::string csv = ReadAll(Path("r.csv"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5)
      << csv;  // header + 2 in-process + 2 server
  EXPECT_EQ(csv.rfind("label,model,", 0), 0u);
  const std::string svg = ReadAll(Path("r.svg"));
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("data-label=\"simple http\""), std::string::npos);
  EXPECT_NE(svg.find("data-label=\"simple http (in-process)\""), std::string::npos);

  // Appending a second run and plotting both files.
  auto again = Short();
  for (const std::string& a :
       std::vector<std::string>{"-u", "127.0.0.1:" + std::to_string(server().http_port()),
                                "--concurrency", "1", "--json", Path("r.json"), "--csv",
                                Path("r.csv"), "--append", "--label", "second", "-q"}) {
    again.push_back(a);
  }
  r = Run(again);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  doc = ParseJson(ReadAll(Path("r.json")));
  ASSERT_EQ(doc["runs"].Size(), 2u);
  EXPECT_STREQ(doc["runs"][1]["label"].GetString(), "second");
  const std::string csv2 = ReadAll(Path("r.csv"));
  EXPECT_EQ(std::count(csv2.begin(), csv2.end(), '\n'), 6) << csv2;
  r = Run({"plot", "--svg", Path("both.svg"), Path("r.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string both = ReadAll(Path("both.svg"));
  EXPECT_NE(both.find("data-label=\"second\""), std::string::npos);
  EXPECT_NE(both.find("data-label=\"simple http\""), std::string::npos);
}

TEST_F(BenchTest, Grpc) {
  auto args = Short();
  for (const std::string& a :
       std::vector<std::string>{"-i", "grpc", "-u", server().grpc_target(), "--concurrency", "2",
                                "--json", Path("g.json")}) {
    args.push_back(a);
  }
  BenchRun r = Run(args);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  rapidjson::Document doc = ParseJson(ReadAll(Path("g.json")));
  const auto& run = doc["runs"][0];
  EXPECT_STREQ(run["transport"].GetString(), "grpc");
  ASSERT_EQ(run["points"].Size(), 1u);
  ExpectCleanPoint(run["points"][0], true);
}

TEST_F(BenchTest, HttpJsonAtAPoissonRate) {
  auto args = Short();
  for (const std::string& a : std::vector<std::string>{
           "-u", "127.0.0.1:" + std::to_string(server().http_port()), "--encoding", "json",
           "--request-rate", "40", "--request-distribution", "poisson", "--max-threads", "4",
           "--batch-size", "2", "--json", Path("j.json")}) {
    args.push_back(a);
  }
  BenchRun r = Run(args);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  rapidjson::Document doc = ParseJson(ReadAll(Path("j.json")));
  const auto& p = doc["runs"][0]["points"][0];
  EXPECT_STREQ(p["mode"].GetString(), "request_rate");
  EXPECT_EQ(p["batch_size"].GetInt(), 2);
  ExpectCleanPoint(p, true);
  // The report rounds to three decimals.
  EXPECT_NEAR(p["throughput_ips"].GetDouble() / p["throughput_rps"].GetDouble(), 2.0, 1e-3);
}

TEST_F(BenchTest, ClearErrors) {
  const std::string url = "127.0.0.1:" + std::to_string(server().http_port());
  BenchRun r = Run({"-m", "nope", "-u", url, "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("model 'nope' is not known"), std::string::npos) << r.err;

  r = Run({"-m", "simple", "-u", url, "--concurrency", "8:2"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--concurrency"), std::string::npos) << r.err;

  r = Run({"-m", "simple", "--bogus", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown flag --bogus"), std::string::npos) << r.err;

  r = Run({"--concurrency", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--model is required"), std::string::npos) << r.err;

  r = Run({"-m", "simple", "--calibrate-batching", "--model-repository", repo().root().string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--slo-p99-ms"), std::string::npos) << r.err;

  // Nothing listens on port 1 of loopback.
  r = Run({"-m", "simple", "-u", "127.0.0.1:1", "-q"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("unreachable"), std::string::npos) << r.err;
  r = Run({"-m", "simple", "-i", "grpc", "-u", "127.0.0.1:1", "-q"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("127.0.0.1:1"), std::string::npos) << r.err;

  r = Run({"help"});
  (void)r;
  r = Run({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--calibrate-batching"), std::string::npos);
}

}  // namespace
}  // namespace fastpath::integration
