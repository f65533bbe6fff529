// `fastpath bench` against the real server on the tiny `simple` model: short windows over
// HTTP (binary and JSON, closed and open loop), gRPC, in-process (at the model's own thread
// setting and every intra-op thread count up to the usable cores), the plot subcommand, a
// soak against a server replaying a GPU trace and against one without a GPU, and the errors
// a user meets first. Asserts the report's fields and zero errors, never timings.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

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

// The cores the process may use as fastpath counts them (gpu::UsableCores, which bench's
// in-process sweep and serve's default threads use): `fastpath doctor --json`'s allowed_cpus
// capped by the cgroup CPU quota rounded up; the hardware's threads when neither is known.
int64_t UsableCores() {
  const auto doctor =
      fastpath::testing::RunCommand({FastpathBinary(), "doctor", "--json"}, {}, /*timeout_s=*/60);
  const rapidjson::Document d = ParseJson(doctor.out);
  EXPECT_TRUE(d.IsObject() && d.HasMember("container")) << doctor.out << doctor.err;
  int64_t cores = 0;
  if (d.IsObject() && d.HasMember("container") && d["container"].IsObject()) {
    const auto& c = d["container"];
    if (c.HasMember("allowed_cpus") && c["allowed_cpus"].IsInt64()) {
      cores = c["allowed_cpus"].GetInt64();
    }
    if (c.HasMember("cgroup_cpu_quota") && c["cgroup_cpu_quota"].IsNumber()) {
      const auto quota =
          static_cast<int64_t>(std::max(1.0, std::ceil(c["cgroup_cpu_quota"].GetDouble())));
      cores = cores == 0 ? quota : std::min(cores, quota);
    }
  }
  if (cores > 0) return cores;
  return std::max<int64_t>(1, std::thread::hardware_concurrency());
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
  // The in-process points: `simple` sets no threads, so its own setting is serve's, the
  // usable cores (one CPU instance), measured first; then every count from 1 up (its own is
  // not measured twice), each at batch 1 and 2. On this 2-core machine: 2, then 1 thread.
  const int64_t cores = UsableCores();
  std::vector<int64_t> order = {cores};
  for (int64_t n = 1; n < cores; ++n) order.push_back(n);
  ASSERT_EQ(run["in_process"].Size(), static_cast<rapidjson::SizeType>(2 * cores))
      << ToJson(run["in_process"]);
  std::set<int64_t> threads_seen;
  for (rapidjson::SizeType i = 0; i < run["in_process"].Size(); ++i) {
    const auto& p = run["in_process"][i];
    ExpectCleanPoint(p, false);
    EXPECT_STREQ(p["mode"].GetString(), "in_process");
    ASSERT_TRUE(p["intra_op_threads"].IsInt64()) << ToJson(p);
    const int64_t threads = p["intra_op_threads"].GetInt64();
    EXPECT_EQ(threads, order[i / 2]) << ToJson(p);  // own first, then ascending
    EXPECT_EQ(p["batch_size"].GetInt(), static_cast<int>(i % 2 + 1)) << ToJson(p);
    threads_seen.insert(threads);
    if (threads == 1) {
      // One ORT thread per session: the CPU-time ceiling is measured.
      ASSERT_TRUE(p["cpu_ceiling_ips"].IsNumber()) << ToJson(p);
      EXPECT_GT(p["cpu_ceiling_ips"].GetDouble(), 0.0);
    } else {
      EXPECT_TRUE(p["cpu_ceiling_ips"].IsNull()) << ToJson(p);
    }
  }
  EXPECT_EQ(static_cast<int64_t>(threads_seen.size()), cores);
  EXPECT_EQ(threads_seen.count(1), 1u);
  if (cores >= 2) {
    EXPECT_EQ(threads_seen.count(2), 1u) << "a point at 2 threads";
  }
  for (const auto& p : run["points"].GetArray()) EXPECT_TRUE(p["intra_op_threads"].IsNull());
  // The ceiling is the best of them all, and the report says where; the own setting's beside.
  EXPECT_EQ(run["in_process_own_threads"].GetInt64(), cores);
  ASSERT_TRUE(run["best_in_process_ips"].IsNumber());
  ASSERT_TRUE(run["best_in_process_threads"].IsInt64()) << ToJson(run);
  EXPECT_EQ(threads_seen.count(run["best_in_process_threads"].GetInt64()), 1u);
  ASSERT_TRUE(run["best_in_process_batch_size"].IsInt64());
  EXPECT_GE(run["best_in_process_batch_size"].GetInt64(), 1);
  EXPECT_LE(run["best_in_process_batch_size"].GetInt64(), 2);
  ASSERT_TRUE(run["in_process_own_ips"].IsNumber());
  EXPECT_GE(run["best_in_process_ips"].GetDouble(), run["in_process_own_ips"].GetDouble());
  double best = 0;
  for (const auto& p : run["in_process"].GetArray()) {
    best = std::max(best, p["throughput_ips"].GetDouble());
  }
  EXPECT_EQ(run["best_in_process_ips"].GetDouble(), best);
  ASSERT_TRUE(run["efficiency_vs_cpu_ceiling"].IsNumber());
  ASSERT_TRUE(run["efficiency"].IsNumber());
  EXPECT_GT(run["efficiency"].GetDouble(), 0.0);
  ASSERT_TRUE(run["efficiency_vs_own_setting"].IsNumber());
  EXPECT_LE(run["efficiency"].GetDouble(), run["efficiency_vs_own_setting"].GetDouble());
  EXPECT_TRUE(run["points"][0]["efficiency"].IsNumber());
  EXPECT_NE(r.out.find("intra-op threads " + std::to_string(cores) + " (the model's own setting):"),
            std::string::npos)
      << r.out;
  if (cores >= 2) {
    EXPECT_NE(r.out.find("intra-op threads 1:"), std::string::npos) << r.out;
  }
  EXPECT_NE(r.out.find("efficiency vs the model's own setting: "), std::string::npos) << r.out;

  const std::string csv = ReadAll(Path("r.csv"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 2 * cores + 2)
      << csv;  // header + 2 in-process per thread count + 2 server
  EXPECT_NE(
      csv.find(",intra_op_threads,gpu_utilization_avg,gpu_power_avg_w,gpu_memory_used_max_bytes\n"),
      std::string::npos)
      << csv;
  EXPECT_EQ(csv.rfind("label,model,", 0), 0u);
  const std::string svg = ReadAll(Path("r.svg"));
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("data-label=\"simple http\""), std::string::npos);
  // One in-process curve per intra-op thread count.
  EXPECT_NE(svg.find("data-label=\"simple http (in-process, 1 intra-op thread)\""),
            std::string::npos);
  for (int threads = 2; threads <= cores; ++threads) {
    EXPECT_NE(svg.find("data-label=\"simple http (in-process, " + std::to_string(threads) +
                       " intra-op threads)\""),
              std::string::npos)
        << threads;
  }

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
  EXPECT_EQ(std::count(csv2.begin(), csv2.end(), '\n'), 1 + 2 * cores + 2 + 1) << csv2;
  r = Run({"plot", "--svg", Path("both.svg"), Path("r.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string both = ReadAll(Path("both.svg"));
  EXPECT_NE(both.find("data-label=\"second\""), std::string::npos);
  EXPECT_NE(both.find("data-label=\"simple http\""), std::string::npos);
}

// --in-process-threads chooses the counts measured besides the model's own setting (serve's:
// the usable cores), which is always measured first (and not twice).
TEST_F(BenchTest, InProcessThreadsFlag) {
  auto args = Short();
  for (const std::string& a : std::vector<std::string>{
           "--in-process", "--no-server", "--model-repository", repo().root().string(),
           "--batch-sizes", "1", "--in-process-threads", "2,1", "--json", Path("t.json"), "-q"}) {
    args.push_back(a);
  }
  BenchRun r = Run(args);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  rapidjson::Document doc = ParseJson(ReadAll(Path("t.json")));
  const auto& run = doc["runs"][0];
  const int64_t cores = UsableCores();
  std::vector<int64_t> want = {cores};  // the own setting first
  for (int64_t n : {2, 1}) {
    if (n != cores) want.push_back(n);
  }
  ASSERT_EQ(run["in_process"].Size(), want.size()) << ToJson(run["in_process"]);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(run["in_process"][static_cast<rapidjson::SizeType>(i)]["intra_op_threads"].GetInt64(),
              want[i]);
  }
  for (const auto& p : run["in_process"].GetArray()) ExpectCleanPoint(p, false);
  EXPECT_TRUE(run["best_in_process_ips"].IsNumber());
  EXPECT_TRUE(run["in_process_own_ips"].IsNumber());
  EXPECT_TRUE(run["efficiency"].IsNull());  // no server
  EXPECT_NE(r.out.find("in-process ceiling (the best in-process point): "), std::string::npos)
      << r.out;
}

// Errors at a point are reported, not fatal; but a point where nothing succeeded measured
// nothing, and its zero latencies must not pass for a fast point: exit 1 saying so. Every
// request of 8 rows (1 KiB of tensors, and its JSON) is past the server's body limit.
class SmallBodyBenchTest : public BenchTest {
 protected:
  std::vector<std::string> ExtraArgs() override { return {"--max-request-bytes", "1024"}; }
};

TEST_F(SmallBodyBenchTest, APointWhereNothingSucceededFails) {
  auto args = Short();
  for (const std::string& a :
       std::vector<std::string>{"-u", "127.0.0.1:" + std::to_string(server().http_port()), "-b",
                                "8", "--concurrency", "1"}) {
    args.push_back(a);
  }
  BenchRun r = Run(args);
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  EXPECT_NE(r.err.find("no request succeeded at concurrency 1 ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("http_413"), std::string::npos) << r.err;
}

// Outputs are checked before measuring: a run (a soak of hours) is never lost to a path it
// cannot write at the end.
TEST_F(BenchTest, AnOutputItCannotWriteIsRefusedBeforeMeasuring) {
  auto args = Short();
  for (const std::string& a :
       std::vector<std::string>{"-u", "127.0.0.1:" + std::to_string(server().http_port()), "--json",
                                Path("no-such-folder/out.json")}) {
    args.push_back(a);
  }
  BenchRun r = Run(args);
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  EXPECT_NE(r.err.find("cannot write " + Path("no-such-folder/out.json") + ": no folder"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("c=1"), std::string::npos) << "measured anyway: " << r.out;

  std::ofstream(Path("foreign.csv")) << "a,b\n1,2\n";
  args = Short();
  for (const std::string& a :
       std::vector<std::string>{"-u", "127.0.0.1:" + std::to_string(server().http_port()), "--csv",
                                Path("foreign.csv"), "--append"}) {
    args.push_back(a);
  }
  r = Run(args);
  EXPECT_EQ(r.exit_code, 2) << r.err << r.out;
  EXPECT_NE(r.err.find("the CSV file's header is not fastpath bench's"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("c=1"), std::string::npos) << "measured anyway: " << r.out;
}

// The simple model under a config of the test's: `-b` is checked against its max_batch_size
// before the run, over both protocols.
class BatchLimitBenchTest : public BenchTest {
 protected:
  virtual std::string Config() const = 0;
  std::vector<std::string> Models() override { return {}; }
  void PrepareRepository(testing::TempRepository& repo) override {
    repo.WriteConfig("simple", Config());
    repo.AddVersion("simple", 1, "simple");
  }
  // `-b batch` exits 2 naming `why`, over HTTP and gRPC, having measured nothing.
  void ExpectRefused(int batch, const std::string& why) {
    for (const std::vector<std::string>& transport :
         {std::vector<std::string>{"-u", "127.0.0.1:" + std::to_string(server().http_port())},
          std::vector<std::string>{"-i", "grpc", "-u", server().grpc_target()}}) {
      auto args = Short();
      args.insert(args.end(), transport.begin(), transport.end());
      args.push_back("-b");
      args.push_back(std::to_string(batch));
      BenchRun r = Run(args);
      EXPECT_EQ(r.exit_code, 2) << r.err << r.out;
      EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
      EXPECT_EQ(r.out.find("c=1"), std::string::npos) << "measured anyway: " << r.out;
    }
  }
};

// A model that does not batch (max_batch_size 0, a leading -1 of its own): -b would count
// each request's rows as inferences. Refused, as perf_analyzer does.
class NoBatchingBenchTest : public BatchLimitBenchTest {
 protected:
  std::string Config() const override {
    return "max_batch_size: 0\n"
           "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ -1, 16 ] },\n"
           "        { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ -1, 16 ] } ]\n";
  }
};

TEST_F(NoBatchingBenchTest, BatchSizeIsRefused) {
  ExpectRefused(8, "-b 8: model 'simple' does not batch (its config's max_batch_size is 0)");
}

// A batch larger than the model's max_batch_size: every request would be refused, so the run
// is refused before it measures (it used to measure the whole run, then exit 1).
class SmallBatchBenchTest : public BatchLimitBenchTest {
 protected:
  std::string Config() const override {
    return "max_batch_size: 4\n"
           "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] },\n"
           "        { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n";
  }
};

TEST_F(SmallBatchBenchTest, ABatchPastMaxBatchSizeIsRefusedBeforeTheRun) {
  ExpectRefused(5, "-b 5: model 'simple' takes at most 4 rows a request");
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

// At a fixed concurrency the gRPC client drives every call from one thread
// (bench::ClosedLoop), and still keeps that many requests in flight: the server batches up
// to 4 and waits up to 2 s for a fourth request, so every execution has 4 unless the client
// let a request lapse.
// A server that batches 4 requests and waits up to 2 s for them: at --concurrency 4 it sees
// only batches of 4 when the client keeps 4 requests in flight, from one thread (a gRPC
// completion queue, an HTTP io_context).
class ClosedLoopTest : public BenchTest {
 protected:
  std::vector<std::string> Models() override { return {}; }
  void PrepareRepository(testing::TempRepository& repo) override {
    repo.WriteConfig("simple", std::string(testing::kSimpleConfig) +
                                   "dynamic_batching { preferred_batch_size: [ 4 ] "
                                   "max_queue_delay_microseconds: 2000000 }\n");
    repo.AddVersion("simple", 1, "simple");
  }

  void ExpectBatchesOfFour(const std::vector<std::string>& transport_args) {
    auto args = Short();
    args.insert(args.end(), transport_args.begin(), transport_args.end());
    for (const std::string& a :
         std::vector<std::string>{"--concurrency", "4", "--json", Path("c.json")}) {
      args.push_back(a);
    }
    BenchRun r = Run(args);
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    const rapidjson::Document doc = ParseJson(ReadAll(Path("c.json")));
    const auto& p = doc["runs"][0]["points"][0];
    ExpectCleanPoint(p, true);
    const uint64_t executions = p["server"]["executions"].GetUint64();
    EXPECT_GT(executions, 0u);
    EXPECT_EQ(p["server"]["requests"].GetUint64(), 4 * executions) << ToJson(p);
  }
};

TEST_F(ClosedLoopTest, GrpcKeepsItsConcurrencyInFlight) {
  ExpectBatchesOfFour({"-i", "grpc", "-u", server().grpc_target()});
}

TEST_F(ClosedLoopTest, HttpKeepsItsConcurrencyInFlight) {
  ExpectBatchesOfFour(
      {"-u", "127.0.0.1:" + std::to_string(server().http_port()), "--encoding", "binary"});
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

// The soak's windows in a report file: 3 of them, each with completed requests, no error
// and its drift from the first.
const rapidjson::Value& SoakWindows(const rapidjson::Document& doc) {
  const rapidjson::Value& soak = doc["runs"][0]["soak"];
  EXPECT_TRUE(soak.IsObject()) << ToJson(doc);
  EXPECT_EQ(soak["concurrency"].GetInt(), 2);
  EXPECT_EQ(soak["window_s"].GetDouble(), 2.0);
  const rapidjson::Value& windows = soak["windows"];
  EXPECT_EQ(windows.Size(), 3u) << ToJson(soak);
  for (rapidjson::SizeType i = 0; i < windows.Size(); ++i) {
    const rapidjson::Value& w = windows[i];
    EXPECT_EQ(w["index"].GetInt(), static_cast<int>(i + 1));
    EXPECT_GT(w["requests"].GetUint64(), 0u) << ToJson(w);
    EXPECT_EQ(w["errors"].GetUint64(), 0u) << ToJson(w);
    EXPECT_GT(w["latency_us"]["p95"].GetDouble(), 0.0);
    EXPECT_TRUE(w["throughput_ratio"].IsNumber());
    EXPECT_TRUE(w["p95_ratio"].IsNumber());
    EXPECT_TRUE(w["server"].IsObject()) << "each window has its own server split";
    EXPECT_TRUE(w["metrics_error"].IsNull()) << ToJson(w);
  }
  EXPECT_EQ(windows[0]["throughput_ratio"].GetDouble(), 1.0);
  EXPECT_TRUE(soak["drift"].IsObject());
  return windows;
}

// The server replays a trace in which GPU 0 warms up by a degree a second from 50 C under
// HW thermal slowdown, 60% busy with 1 GiB in use, sampled every 100 ms.
class SoakWithGpuTraceTest : public BenchTest {
 protected:
  static constexpr int kFirstC = 50;
  static constexpr int kLastC = 90;
  std::vector<std::string> ExtraArgs() override {
    const fs::path trace = work_->root() / "warming.jsonl";
    std::ofstream out(trace);
    for (int c = kFirstC; c <= kLastC; ++c) {
      out << "{\"t_ms\": " << (c - kFirstC) * 1000 << ", \"gpu\": 0, \"uuid\": \"GPU-50a6\", "
          << "\"temperature_c\": " << c << ", \"sm_clock_mhz\": 1410, \"power_w\": 290.5, "
          << "\"clocks_event_reasons\": \"0x40\", \"utilization_ratio\": 0.6, "
          << "\"memory_used_bytes\": 1073741824}\n";
    }
    return {"--gpu-trace", trace.string(), "--gpu-sample-interval-ms", "100"};
  }
};

TEST_F(SoakWithGpuTraceTest, ThreeWindowsWithTheTracesTemperature) {
  BenchRun r = Run({"-m",
                    "simple",
                    "-u",
                    "127.0.0.1:" + std::to_string(server().http_port()),
                    "--concurrency",
                    "2",
                    "--warmup-ms",
                    "100",
                    "--soak",
                    "6s",
                    "--soak-window",
                    "2s",
                    "--metrics-url",
                    "127.0.0.1:" + std::to_string(server().metrics_port()),
                    "--metrics-interval-ms",
                    "100",
                    "--json",
                    Path("soak.json"),
                    "--svg",
                    Path("soak.svg"),
                    "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const rapidjson::Document doc = ParseJson(ReadAll(Path("soak.json")));
  const rapidjson::Value& windows = SoakWindows(doc);
  ASSERT_EQ(windows.Size(), 3u);
  double previous_c = 0;
  for (const auto& w : windows.GetArray()) {
    ASSERT_TRUE(w["gpus"].IsArray()) << ToJson(w);
    ASSERT_EQ(w["gpus"].Size(), 1u);
    const rapidjson::Value& gpu = w["gpus"][0];
    EXPECT_STREQ(gpu["gpu"].GetString(), "0");
    EXPECT_STREQ(gpu["uuid"].GetString(), "GPU-50a6");
    // One of the trace's temperatures, never lower than the window before.
    const double c = gpu["temperature_c"].GetDouble();
    EXPECT_GE(c, kFirstC);
    EXPECT_LE(c, kLastC);
    EXPECT_EQ(c, std::floor(c));
    EXPECT_GE(c, previous_c);
    previous_c = c;
    EXPECT_EQ(gpu["sm_clock_mhz"].GetDouble(), 1410.0);
    EXPECT_EQ(gpu["power_w"].GetDouble(), 290.5);
    EXPECT_EQ(ToJson(gpu["active_reasons"]), "[\"hw_thermal\"]");
    // HW thermal slowdown held through the window: some of it is counted in it.
    ASSERT_TRUE(gpu["throttle_seconds"].IsObject()) << ToJson(gpu);
    ASSERT_TRUE(gpu["throttle_seconds"].HasMember("hw_thermal")) << ToJson(gpu);
    EXPECT_GT(gpu["throttle_seconds"]["hw_thermal"].GetDouble(), 0.0);
    // Averaged over the scrapes through the window, not read at its end alone.
    EXPECT_EQ(gpu["utilization_avg"].GetDouble(), 0.6) << ToJson(gpu);
    EXPECT_EQ(gpu["memory_used_max_bytes"].GetDouble(), 1073741824.0) << ToJson(gpu);
  }
  EXPECT_NE(r.out.find(" util  mem GiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" 0.60     1.00  hw_thermal"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("soak at concurrency 2 for 6s in windows of 2s"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("hw_thermal:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("drift from window 1"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("absent"), std::string::npos) << r.out;
  const std::string svg = ReadAll(Path("soak.svg"));
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<g class=\"series temperature\" data-gpu=\"0\">"), std::string::npos);
  EXPECT_NE(svg.find("<g class=\"series p95\">"), std::string::npos);
  EXPECT_NE(svg.find("<g class=\"series throughput\">"), std::string::npos);
  EXPECT_NE(svg.find("<g class=\"series utilization\" data-gpu=\"0\">"), std::string::npos);
  // `plot` draws the same picture from the report (the same points; the report rounds the
  // times, which can move a point by a tenth of a pixel); a soak beside another run is refused.
  r = Run({"plot", "--svg", Path("again.svg"), Path("soak.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto titles = [](const std::string& text) {
    std::vector<std::string> out;
    for (size_t at = text.find("<title>"); at != std::string::npos;
         at = text.find("<title>", at + 1)) {
      out.push_back(text.substr(at, text.find("</title>", at) - at));
    }
    return out;
  };
  EXPECT_EQ(titles(ReadAll(Path("again.svg"))), titles(svg));
  EXPECT_EQ(titles(svg).size(), 6u * 3u);  // p50, p95, p99, temperature, throughput, utilization
  r = Run({"plot", "--svg", Path("two.svg"), Path("soak.json"), Path("soak.json")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("2 of the 2 runs are soaks"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(Path("two.svg")));
}

// --collect-metrics against a server replaying a trace in which GPU 0 runs at 75%
// utilization and 250 W with 2 of 80 GiB in use, sampled every 100 ms.
class CollectMetricsWithGpuTraceTest : public BenchTest {
 protected:
  std::vector<std::string> ExtraArgs() override {
    const fs::path trace = work_->root() / "busy.jsonl";
    std::ofstream out(trace);
    for (int s = 0; s <= 300; ++s) {
      out << "{\"t_ms\": " << s * 1000 << ", \"gpu\": 0, \"uuid\": \"GPU-75aa\", "
          << "\"utilization_ratio\": 0.75, \"power_w\": 250, "
          << "\"memory_used_bytes\": 2147483648, \"memory_total_bytes\": 85899345920}\n";
    }
    return {"--gpu-trace", trace.string(), "--gpu-sample-interval-ms", "100"};
  }
};

TEST_F(CollectMetricsWithGpuTraceTest, EveryPointCarriesTheGpusFiguresOverItsWindows) {
  auto args = Short();
  for (const std::string& a : std::vector<std::string>{
           "-u", "127.0.0.1:" + std::to_string(server().http_port()), "--concurrency", "1,2",
           "--collect-metrics", "--metrics-url",
           "127.0.0.1:" + std::to_string(server().metrics_port()), "--metrics-interval-ms", "50",
           "--json", Path("gpu.json"), "--csv", Path("gpu.csv"), "-q"}) {
    args.push_back(a);
  }
  BenchRun r = Run(args);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const rapidjson::Document doc = ParseJson(ReadAll(Path("gpu.json")));
  const rapidjson::Value& points = doc["runs"][0]["points"];
  ASSERT_EQ(points.Size(), 2u);
  for (const auto& p : points.GetArray()) {
    ExpectCleanPoint(p, true);
    const rapidjson::Value& m = p["gpu_metrics"];
    ASSERT_TRUE(m.IsObject()) << ToJson(p);
    EXPECT_GE(m["scrapes"].GetInt(), 1) << ToJson(m);
    EXPECT_EQ(m["failed"].GetInt(), 0) << ToJson(m);
    ASSERT_EQ(m["gpus"].Size(), 1u) << ToJson(m);
    const rapidjson::Value& g = m["gpus"][0];
    EXPECT_STREQ(g["gpu"].GetString(), "0");
    EXPECT_STREQ(g["uuid"].GetString(), "GPU-75aa");
    EXPECT_EQ(g["scrapes"].GetInt(), m["scrapes"].GetInt());
    EXPECT_EQ(g["utilization_avg"].GetDouble(), 0.75);
    EXPECT_EQ(g["power_avg_w"].GetDouble(), 250.0);
    EXPECT_EQ(g["memory_used_max_bytes"].GetDouble(), 2147483648.0);
    EXPECT_EQ(g["memory_total_bytes"].GetDouble(), 85899345920.0);
  }
  EXPECT_NE(r.out.find("  c=2 GPU 0 (GPU-75aa): utilization 0.75 avg, power 250.0 W avg, memory "
                       "used 2.00 of 80.00 GiB at most ("),
            std::string::npos)
      << r.out;
  const std::string csv = ReadAll(Path("gpu.csv"));
  EXPECT_NE(csv.find(",0:0.750,0:250.0,0:2147483648\n"), std::string::npos) << csv;
}

TEST_F(BenchTest, CollectMetricsOnACpuServerAndOnAMetricsPortThatIsNotThere) {
  // The server exports no GPU series: each point says so, and the run is clean.
  auto args = Short();
  for (const std::string& a : std::vector<std::string>{
           "-u", "127.0.0.1:" + std::to_string(server().http_port()), "--collect-metrics",
           "--metrics-url", "127.0.0.1:" + std::to_string(server().metrics_port()),
           "--metrics-interval-ms", "50", "--json", Path("cpu.json")}) {
    args.push_back(a);
  }
  BenchRun r = Run(args);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const rapidjson::Document doc = ParseJson(ReadAll(Path("cpu.json")));
  const rapidjson::Value& m = doc["runs"][0]["points"][0]["gpu_metrics"];
  ASSERT_TRUE(m.IsObject()) << ToJson(doc);
  EXPECT_EQ(m["failed"].GetInt(), 0);
  EXPECT_EQ(m["gpus"].Size(), 0u);
  EXPECT_NE(r.out.find("c=1 GPU metrics: the server exports no GPU series"), std::string::npos)
      << r.out;

  // Nothing listens where the metrics are said to be: the load is measured all the same,
  // and every point names the failure.
  auto unreachable = Short();
  for (const std::string& a :
       std::vector<std::string>{"-u", "127.0.0.1:" + std::to_string(server().http_port()),
                                "--collect-metrics", "--metrics-url", "127.0.0.1:1",
                                "--metrics-interval-ms", "50", "--json", Path("none.json")}) {
    unreachable.push_back(a);
  }
  r = Run(unreachable);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const rapidjson::Document none = ParseJson(ReadAll(Path("none.json")));
  const rapidjson::Value& p = none["runs"][0]["points"][0];
  ExpectCleanPoint(p, true);
  EXPECT_GE(p["gpu_metrics"]["failed"].GetInt(), 1) << ToJson(p);
  EXPECT_EQ(p["gpu_metrics"]["failed"].GetInt(), p["gpu_metrics"]["scrapes"].GetInt());
  EXPECT_NE(r.out.find("c=1 GPU metrics: all "), std::string::npos) << r.out;
}

TEST_F(BenchTest, CollectMetricsFlagsThatDoNotFit) {
  const std::string url = "127.0.0.1:" + std::to_string(server().http_port());
  struct Case {
    std::vector<std::string> args;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {{"--metrics-url", "127.0.0.1:8002"}, "--metrics-url is read by --soak and"},
           {{"--metrics-interval-ms", "100"}, "--metrics-interval-ms"},
           {{"--collect-metrics", "--metrics-interval-ms", "5"}, "[10, 60000]"},
           {{"--collect-metrics", "--soak", "2s"}, "--collect-metrics"},
       }) {
    std::vector<std::string> args = {"-m", "simple", "-u", url};
    args.insert(args.end(), c.args.begin(), c.args.end());
    BenchRun r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << c.says << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
}

TEST_F(BenchTest, SoakWithoutAGpuReportsTheGpuFieldsAbsent) {
  BenchRun r = Run({"-m", "simple", "-u", "127.0.0.1:" + std::to_string(server().http_port()),
                    "--concurrency", "2", "--warmup-ms", "100", "--soak", "6s", "--soak-window",
                    "2s", "--metrics-url", "127.0.0.1:" + std::to_string(server().metrics_port()),
                    "--json", Path("cpu.json"), "--svg", Path("cpu.svg")});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const rapidjson::Document doc = ParseJson(ReadAll(Path("cpu.json")));
  const rapidjson::Value& windows = SoakWindows(doc);
  for (const auto& w : windows.GetArray()) EXPECT_TRUE(w["gpus"].IsNull()) << ToJson(w);
  EXPECT_NE(r.out.find("GPU fields absent ('-')"), std::string::npos) << r.out;
  // One progress line per window on stderr.
  EXPECT_NE(r.err.find("soak window 3/3"), std::string::npos) << r.err;
  EXPECT_NE(ReadAll(Path("cpu.svg")).find("GPU temperature: absent"), std::string::npos);
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

  // A bad soak is a usage error naming the flag.
  r = Run({"-m", "simple", "-u", url, "--soak", "0s"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--soak must be a duration"), std::string::npos) << r.err;
  r = Run({"-m", "simple", "-u", url, "--soak", "10s", "--soak-window", "ten"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--soak-window must be a duration"), std::string::npos) << r.err;
  r = Run({"-m", "simple", "-u", url, "--soak", "10s", "--soak-window", "1m"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--soak-window 1m is longer than --soak 10s"), std::string::npos) << r.err;
  r = Run({"-m", "simple", "-u", url, "--soak", "10s", "--concurrency", "1,2"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--soak holds one --concurrency value"), std::string::npos) << r.err;

  // --in-process-threads: positive integers, with --in-process.
  const std::string repository = repo().root().string();
  for (const std::string bad : {"0", "two", "1,1", "-2", "2000"}) {
    r = Run({"-m", "simple", "--in-process", "--no-server", "--model-repository", repository,
             "--in-process-threads", bad});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("--in-process-threads"), std::string::npos) << bad << ": " << r.err;
  }
  r = Run({"-m", "simple", "-u", url, "--in-process-threads", "2"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--in-process-threads requires --in-process"), std::string::npos) << r.err;

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
