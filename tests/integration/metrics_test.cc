// Prometheus metrics and the statistics extension on the real binary: the counts on
// /metrics match the requests sent, failures carry Triton's reason label, and the
// statistics served over HTTP, over gRPC and as metrics are the same numbers; promtool's
// lint finds nothing to say about fastpath's own names on a scrape.
#include <condition_variable>
#include <map>
#include <mutex>
#include <sstream>
#include <string_view>
#include <thread>

#include "integration_fixture.h"
#include "prometheus/promtool_lint.h"

namespace fastpath::integration {
namespace {

// The text exposition read back: `name{labels}` -> value, and each family's TYPE.
struct Exposition {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;

  // Fails the test when the sample is missing.
  double Get(const std::string& key) const {
    auto it = samples.find(key);
    if (it == samples.end()) {
      ADD_FAILURE() << "no sample " << key;
      return -1;
    }
    return it->second;
  }
};

Exposition ParseExposition(const std::string& text) {
  Exposition out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream fields(line.substr(7));
      std::string name, type;
      fields >> name >> type;
      out.types[name] = type;
      continue;
    }
    if (line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) {
      ADD_FAILURE() << "not a sample line: " << line;
      continue;
    }
    out.samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

constexpr const char* kSimple = "model=\"simple\",version=\"1\"";

std::string Key(const std::string& name, const std::string& extra = "") {
  return name + "{" + kSimple + extra + "}";
}
std::string Failures(const std::string& reason) {
  return Key("nv_inference_request_failure", ",reason=\"" + reason + "\"");
}

class MetricsTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override { return {"simple"}; }
  // One request running and one waiting; a third at the same time is refused, which is
  // how the rejection test makes REJECTED failures.
  // Several gRPC threads, so that a burst's calls reach the queue of one at once: on one
  // thread they arrive one after another, and a short model may run on it before the next.
  std::vector<std::string> ExtraArgs() override {
    return {"--max-queue-size", "1", "--grpc-threads", "4"};
  }

  Exposition Scrape() {
    EXPECT_GT(server().metrics_port(), 0) << "no metrics=N in the port file";
    HttpClient client(server().metrics_port());
    HttpResponse r = client.Get("/metrics");
    EXPECT_EQ(r.status, 200) << r.Describe();
    auto type = r.Header("content-type");
    EXPECT_TRUE(type && type->find("text/plain") != std::string::npos) << r.Describe();
    return ParseExposition(r.body);
  }

  // A request is answered just before its scheduler counts it as finished: the gauge
  // reaches 0 a moment after the last answer. Waits for that state (bounded).
  Exposition ScrapeWhenIdle() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      Exposition e = Scrape();
      if (e.Get(Key("nv_inference_pending_request_count")) == 0 ||
          std::chrono::steady_clock::now() > deadline) {
        return e;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  void InferHttp(int rows) {
    auto a = Iota(rows, 16 * rows), b = Iota(-rows, 16 * rows);
    HttpResponse r = http().Post("/v2/models/simple/infer", SimpleJsonRequest(a, b));
    ASSERT_EQ(r.status, 200) << r.Describe();
  }
  void InferGrpc(int rows) {
    auto a = Iota(rows, 16 * rows), b = Iota(3, 16 * rows);
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    grpc::Status status = grpc().ModelInfer(&context, SimpleGrpcRequest(a, b), &response);
    ASSERT_TRUE(status.ok()) << Describe(status);
  }
  // A request the model's config refuses (15 columns where it has 16).
  // Well-formed, so it reaches the model's checks (the front end refuses a body whose data
  // does not match its own shape before any model is involved).
  void InferBadShape() {
    std::string data = "[";
    for (int i = 0; i < 15; ++i) data += (i ? "," : "") + std::to_string(i);
    data += "]";
    std::string body = "{\"inputs\":[";
    for (const char* name : {"INPUT0", "INPUT1"}) {
      body += std::string(name[5] == '1' ? "," : "") + "{\"name\":\"" + name +
              "\",\"datatype\":\"INT32\",\"shape\":[1,15],\"data\":" + data + "}";
    }
    body += "]}";
    HttpResponse r = http().Post("/v2/models/simple/infer", body);
    ASSERT_EQ(r.status, 400) << r.Describe();
    EXPECT_NE(ErrorMessage(r.body).find("expects 16"), std::string::npos) << r.body;
  }
};

TEST_F(MetricsTest, CountsMatchTheRequests) {
  // Before any request: every series is there, at zero.
  Exposition e = ScrapeWhenIdle();
  EXPECT_EQ(e.Get(Key("nv_inference_request_success")), 0);
  for (const char* reason : {"REJECTED", "CANCELED", "BACKEND", "OTHER"}) {
    EXPECT_EQ(e.Get(Failures(reason)), 0) << reason;
  }

  for (int i = 0; i < 3; ++i) InferHttp(1);
  InferGrpc(1);
  InferGrpc(2);
  InferHttp(4);
  InferBadShape();

  e = ScrapeWhenIdle();
  EXPECT_EQ(e.Get(Key("nv_inference_request_success")), 6);
  EXPECT_EQ(e.Get(Failures("OTHER")), 1);
  EXPECT_EQ(e.Get(Failures("REJECTED")), 0);
  EXPECT_EQ(e.Get(Failures("BACKEND")), 0);
  EXPECT_EQ(e.Get(Failures("CANCELED")), 0);
  EXPECT_EQ(e.Get(Key("nv_inference_count")), 3 + 1 + 2 + 4);  // batch elements
  EXPECT_EQ(e.Get(Key("nv_inference_exec_count")), 6);
  EXPECT_EQ(e.Get(Key("nv_inference_pending_request_count")), 0);
  EXPECT_GT(e.Get(Key("nv_inference_request_duration_us")), 0);
  EXPECT_GT(e.Get(Key("nv_inference_compute_infer_duration_us")), 0);
  EXPECT_LE(e.Get(Key("nv_inference_compute_infer_duration_us")),
            e.Get(Key("nv_inference_request_duration_us")));

  // Histograms: one observation per successful request / execution.
  EXPECT_EQ(e.Get(Key("fastpath_inference_request_duration_seconds_count")), 6);
  EXPECT_EQ(e.Get(Key("fastpath_inference_request_duration_seconds_bucket", ",le=\"+Inf\"")), 6);
  EXPECT_EQ(e.Get(Key("fastpath_inference_request_duration_seconds_bucket", ",le=\"10\"")), 6);
  EXPECT_EQ(e.Get(Key("fastpath_inference_queue_duration_seconds_count")), 6);
  EXPECT_EQ(e.Get(Key("fastpath_inference_compute_infer_duration_seconds_count")), 6);
  EXPECT_EQ(e.Get(Key("fastpath_inference_batch_size_count")), 6);
  EXPECT_EQ(e.Get(Key("fastpath_inference_batch_size_sum")), 10);
  EXPECT_EQ(e.Get(Key("fastpath_inference_batch_size_bucket", ",le=\"1\"")), 4);
  EXPECT_EQ(e.Get(Key("fastpath_inference_batch_size_bucket", ",le=\"2\"")), 5);
  EXPECT_EQ(e.Get(Key("fastpath_inference_batch_size_bucket", ",le=\"4\"")), 6);

  EXPECT_EQ(e.types["nv_inference_request_success"], "counter");
  EXPECT_EQ(e.types["nv_inference_request_failure"], "counter");
  EXPECT_EQ(e.types["nv_inference_pending_request_count"], "gauge");
  EXPECT_EQ(e.types["fastpath_inference_request_duration_seconds"], "histogram");
  EXPECT_EQ(e.types["fastpath_inference_batch_size"], "histogram");
}

TEST_F(MetricsTest, RefusedRequestsAreCountedAsRejected) {
  // Bursts of concurrent requests against a queue of one: the ones that find it full are
  // answered UNAVAILABLE at once. How many that is depends on scheduling, so the test
  // counts the answers and requires the metrics to say the same, whatever the split; it
  // repeats bursts until at least one was refused (bounded).
  constexpr int kBurst = 48;
  int ok = 0, refused = 0;
  for (int burst = 0; burst < 50 && refused == 0; ++burst) {
    std::mutex mu;
    std::condition_variable cv;
    int answered = 0;
    std::vector<std::string> unexpected;
    std::vector<std::unique_ptr<grpc::ClientContext>> contexts(kBurst);
    std::vector<inference::ModelInferResponse> responses(kBurst);
    std::vector<inference::ModelInferRequest> requests;
    for (int i = 0; i < kBurst; ++i)
      requests.push_back(SimpleGrpcRequest(Iota(i, 16), Iota(1, 16)));
    for (int i = 0; i < kBurst; ++i) {
      contexts[i] = std::make_unique<grpc::ClientContext>();
      grpc().async()->ModelInfer(
          contexts[i].get(), &requests[i], &responses[i], [&](grpc::Status status) {
            std::lock_guard lock(mu);
            if (status.ok()) {
              ++ok;
            } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
              ++refused;
            } else {
              unexpected.push_back(Describe(status));
            }
            ++answered;
            cv.notify_all();
          });
    }
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return answered == kBurst; }))
        << "only " << answered << " of " << kBurst << " answered";
    ASSERT_TRUE(unexpected.empty()) << unexpected.front();
  }
  ASSERT_GT(refused, 0) << "no request was ever refused by a queue of one";

  Exposition e = ScrapeWhenIdle();
  EXPECT_EQ(e.Get(Key("nv_inference_request_success")), ok);
  EXPECT_EQ(e.Get(Failures("REJECTED")), refused);
  EXPECT_EQ(e.Get(Failures("OTHER")), 0);
  EXPECT_EQ(e.Get(Key("nv_inference_exec_count")), ok);

  // The statistics extension counts the same failures.
  HttpResponse r = http().Get("/v2/models/simple/stats");
  ASSERT_EQ(r.status, 200) << r.Describe();
  auto doc = ParseJson(r.body);
  const auto& is = doc["model_stats"][0]["inference_stats"];
  EXPECT_EQ(JsonUint(is["fail"]["count"]), static_cast<uint64_t>(refused)) << r.body;
  EXPECT_EQ(JsonUint(is["success"]["count"]), static_cast<uint64_t>(ok)) << r.body;
}

void ExpectDuration(const rapidjson::Value& json, const inference::StatisticDuration& proto,
                    const std::string& what) {
  ASSERT_TRUE(json.IsObject() && json.HasMember("count") && json.HasMember("ns")) << what;
  EXPECT_EQ(JsonUint(json["count"]), proto.count()) << what;
  EXPECT_EQ(JsonUint(json["ns"]), proto.ns()) << what;
}

TEST_F(MetricsTest, StatisticsAgreeOverHttpGrpcAndMetrics) {
  for (int i = 0; i < 2; ++i) InferHttp(1);
  InferGrpc(3);
  InferHttp(3);
  InferBadShape();
  Exposition e = ScrapeWhenIdle();  // nothing runs from here on: the three reads agree

  HttpResponse r = http().Get("/v2/models/simple/versions/1/stats");
  ASSERT_EQ(r.status, 200) << r.Describe();
  auto doc = ParseJson(r.body);
  ASSERT_TRUE(doc.HasMember("model_stats") && doc["model_stats"].Size() == 1u) << r.body;
  const auto& h = doc["model_stats"][0];

  grpc::ClientContext context;
  inference::ModelStatisticsRequest request;
  request.set_name("simple");
  request.set_version("1");
  inference::ModelStatisticsResponse response;
  grpc::Status status = grpc().ModelStatistics(&context, request, &response);
  ASSERT_TRUE(status.ok()) << Describe(status);
  ASSERT_EQ(response.model_stats_size(), 1);
  const auto& g = response.model_stats(0);

  // The KServe / Triton shape, the same over both protocols.
  EXPECT_STREQ(h["name"].GetString(), "simple");
  EXPECT_STREQ(h["version"].GetString(), "1");
  EXPECT_EQ(g.name(), "simple");
  EXPECT_EQ(g.version(), "1");
  EXPECT_EQ(JsonUint(h["last_inference"]), g.last_inference());
  EXPECT_GT(g.last_inference(), 0u);
  EXPECT_EQ(JsonUint(h["inference_count"]), g.inference_count());
  EXPECT_EQ(JsonUint(h["execution_count"]), g.execution_count());
  EXPECT_EQ(g.inference_count(), 2u + 3 + 3);
  EXPECT_EQ(g.execution_count(), 4u);
  const auto& his = h["inference_stats"];
  const auto& gis = g.inference_stats();
  ExpectDuration(his["success"], gis.success(), "success");
  ExpectDuration(his["fail"], gis.fail(), "fail");
  ExpectDuration(his["queue"], gis.queue(), "queue");
  ExpectDuration(his["compute_input"], gis.compute_input(), "compute_input");
  ExpectDuration(his["compute_infer"], gis.compute_infer(), "compute_infer");
  ExpectDuration(his["compute_output"], gis.compute_output(), "compute_output");
  ExpectDuration(his["cache_hit"], gis.cache_hit(), "cache_hit");
  ExpectDuration(his["cache_miss"], gis.cache_miss(), "cache_miss");
  EXPECT_EQ(gis.success().count(), 4u);
  EXPECT_EQ(gis.fail().count(), 1u);
  EXPECT_EQ(gis.queue().count(), 4u);
  EXPECT_EQ(gis.compute_infer().count(), 4u);

  // batch_stats: one entry per batch size, counting executions of that size.
  ASSERT_TRUE(h["batch_stats"].IsArray()) << r.body;
  ASSERT_EQ(h["batch_stats"].Size(), static_cast<size_t>(g.batch_stats_size())) << r.body;
  std::map<uint64_t, uint64_t> executions_by_size;
  for (int i = 0; i < g.batch_stats_size(); ++i) {
    const auto& gb = g.batch_stats(i);
    const auto& hb = h["batch_stats"][i];
    EXPECT_EQ(JsonUint(hb["batch_size"]), gb.batch_size());
    ExpectDuration(hb["compute_input"], gb.compute_input(), "batch compute_input");
    ExpectDuration(hb["compute_infer"], gb.compute_infer(), "batch compute_infer");
    ExpectDuration(hb["compute_output"], gb.compute_output(), "batch compute_output");
    executions_by_size[gb.batch_size()] += gb.compute_infer().count();
  }
  EXPECT_EQ(executions_by_size, (std::map<uint64_t, uint64_t>{{1, 2}, {3, 2}}));

  // The metrics are the same numbers (durations in whole microseconds).
  EXPECT_EQ(e.Get(Key("nv_inference_request_success")), gis.success().count());
  double failures = 0;
  for (const char* reason : {"REJECTED", "CANCELED", "BACKEND", "OTHER"}) {
    failures += e.Get(Failures(reason));
  }
  EXPECT_EQ(failures, gis.fail().count());
  EXPECT_EQ(e.Get(Key("nv_inference_count")), g.inference_count());
  EXPECT_EQ(e.Get(Key("nv_inference_exec_count")), g.execution_count());
  EXPECT_EQ(e.Get(Key("nv_inference_request_duration_us")), gis.success().ns() / 1000);
  EXPECT_EQ(e.Get(Key("nv_inference_queue_duration_us")), gis.queue().ns() / 1000);
  EXPECT_EQ(e.Get(Key("nv_inference_compute_input_duration_us")), gis.compute_input().ns() / 1000);
  EXPECT_EQ(e.Get(Key("nv_inference_compute_infer_duration_us")), gis.compute_infer().ns() / 1000);
  EXPECT_EQ(e.Get(Key("nv_inference_compute_output_duration_us")),
            gis.compute_output().ns() / 1000);
  EXPECT_EQ(e.Get(Key("fastpath_inference_batch_size_count")), g.execution_count());
  EXPECT_EQ(e.Get(Key("fastpath_inference_batch_size_bucket", ",le=\"1\"")), 2);
  EXPECT_EQ(e.Get(Key("fastpath_inference_batch_size_bucket", ",le=\"4\"")), 4);
  EXPECT_NEAR(e.Get(Key("fastpath_inference_request_duration_seconds_sum")),
              static_cast<double>(gis.success().ns()) / 1e9, 1e-6);
}

// Prometheus's own naming lint on a scrape of the real binary: `promtool check metrics`
// reports nothing about any fastpath_* name (base units, counters ending in _total). It
// may report Triton's nv_* names, kept as Triton spells them. promtool is installed by the
// test command (tools/setup.sh --test); without it this test fails.
class MetricsLintTest : public MetricsTest {
 protected:
  void PrepareRepository(testing::TempRepository& repo) override {
    // A model with a memory cap, so that fastpath_memory_limit_bytes is on the scrape too.
    repo.AddVersion("capped", 1, "add_one");
    repo.WriteConfig("capped", R"(
name: "capped"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
parameters { key: "fastpath.memory.limit_bytes" value { string_value: "2Mi" } }
)");
  }
};

TEST_F(MetricsLintTest, PromtoolReportsNoFastpathNameOnAScrape) {
  for (int i = 0; i < 2; ++i) InferHttp(1);
  InferGrpc(2);
  InferBadShape();
  ScrapeWhenIdle();  // the counts are settled before the text is read whole

  HttpClient client(server().metrics_port());
  const HttpResponse r = client.Get("/metrics");
  ASSERT_EQ(r.status, 200) << r.Describe();
  const Exposition e = ParseExposition(r.body);
  // What must be on the scrape for the lint to mean something.
  for (const char* name :
       {"fastpath_inference_request_duration_seconds", "fastpath_inference_queue_duration_seconds",
        "fastpath_inference_compute_infer_duration_seconds", "fastpath_inference_batch_size",
        "fastpath_server_ready", "fastpath_model_state", "fastpath_memory_in_use_bytes",
        "fastpath_memory_limit_bytes", "fastpath_memory_arena_extensions_total",
        "fastpath_memory_oom_total"}) {
    EXPECT_EQ(e.types.count(name), 1u) << name << " is not on the scrape:\n" << r.body;
  }
  EXPECT_EQ(e.Get(Key("fastpath_inference_request_duration_seconds_count")), 3);
  EXPECT_TRUE(testing::FastpathNamesPassPromtool(r.body)) << r.body;
}

// The heap's gauges come from jemalloc's statistics: on the scrape where the executable links
// jemalloc, with live objects and at most what is resident; absent where it does not.
TEST_F(MetricsTest, TheHeapIsOnTheScrapeWhereTheServerRunsOnJemalloc) {
  InferHttp(1);
  HttpClient client(server().metrics_port());
  const HttpResponse r = client.Get("/metrics");
  ASSERT_EQ(r.status, 200) << r.Describe();
  const Exposition e = ParseExposition(r.body);
  if (std::string_view(FASTPATH_EXECUTABLE_ALLOCATOR) != "jemalloc") {
    EXPECT_EQ(e.types.count("fastpath_heap_bytes"), 0u) << r.body;
    return;
  }
  ASSERT_EQ(e.types.count("fastpath_heap_bytes"), 1u) << r.body;
  const double allocated = e.Get("fastpath_heap_bytes{kind=\"allocated\"}");
  const double active = e.Get("fastpath_heap_bytes{kind=\"active\"}");
  const double resident = e.Get("fastpath_heap_bytes{kind=\"resident\"}");
  EXPECT_GT(allocated, 1 << 20) << r.body;  // the sessions, the models, the servers' buffers
  EXPECT_LE(allocated, active);
  EXPECT_LE(active, resident);
  EXPECT_EQ(e.samples.count("fastpath_heap_bytes{kind=\"retained\"}"), 1u) << r.body;
}

class MetricsDisabledTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override { return {"simple"}; }
  std::vector<std::string> ExtraArgs() override { return {"--allow-metrics", "false"}; }
};

TEST_F(MetricsDisabledTest, NoMetricsPortWhenNotAllowed) {
  EXPECT_EQ(server().metrics_port(), 0);
  ExpectStillServing();
}

}  // namespace
}  // namespace fastpath::integration
