// Memory that cannot take the server down (issue 13), end to end on the real binary: a
// model whose instance is capped by fastpath.memory.limit_bytes, under concurrent clients
// (32 at once) mixing requests that fit with requests that cannot. Every request that fits is
// answered right; every one that cannot gets 503 with Retry-After (gRPC RESOURCE_EXHAUSTED) and a
// message starting "out of memory"; the server stays ready, and the admission report and
// /metrics count what ran out.
#include <thread>

#include "fakes/run_command.h"
#include "integration_fixture.h"

namespace fastpath::integration {
namespace {

constexpr int64_t kSmall = 256;        // elements per request that fit: 1 KiB out
constexpr int64_t kBig = 1 << 20;      // 4 MiB out: never fits in the 2 MiB cap
constexpr int kClients = 32;           // as the issue's "done when": concurrency 32
constexpr int kRequestsPerClient = 4;  // every fourth one big

class MemoryTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override { return {}; }
  std::vector<std::string> ExtraArgs() override {
    return {"--model-control-mode", "explicit", "--load-model", "capped",
            "--load-model",         "budgeted", "--load-model", "strings"};
  }
  void PrepareRepository(testing::TempRepository& repo) override {
    // add_one: OUTPUT0 = INPUT0 + 1, FP32 [batch, n].
    repo.AddVersion("capped", 1, "add_one");
    repo.WriteConfig("capped", R"(
name: "capped"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
dynamic_batching { max_queue_delay_microseconds: 500 }
parameters { key: "fastpath.memory.limit_bytes" value { string_value: "2Mi" } }
)");
    // The same, with a model_warmup that makes the dim concrete, so that its memory budget
    // is measured at load: 8 rows of 16384 elements.
    repo.AddVersion("budgeted", 1, "add_one");
    repo.WriteConfig("budgeted", R"(
name: "budgeted"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
model_warmup [ { name: "largest" batch_size: 1 inputs { key: "INPUT0" value {
  data_type: TYPE_FP32 dims: [ 16384 ] random_data: true } } } ]
parameters { key: "fastpath.memory.limit_bytes" value { string_value: "2Mi" } }
)");
    // BYTES in and out, its budget measured on 16 short random strings.
    repo.AddVersion("strings", 1, "identity_bytes");
    repo.WriteConfig("strings", R"(
name: "strings"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
model_warmup [ { name: "w" batch_size: 1 inputs { key: "INPUT0" value {
  data_type: TYPE_STRING dims: [ 16 ] random_data: true } } } ]
parameters { key: "fastpath.memory.limit_bytes" value { string_value: "2Mi" } }
)");
  }

  // The model's entry in /v2/health/admission.
  rapidjson::Document Admission(const std::string& model) {
    const HttpResponse r = http().Get("/v2/health/admission");
    EXPECT_EQ(r.status, 200) << r.Describe();
    rapidjson::Document doc = ParseJson(r.body);
    rapidjson::Document out;
    for (const auto& m : doc["models"].GetArray()) {
      if (m["name"].GetString() == model) out.CopyFrom(m, out.GetAllocator());
    }
    EXPECT_TRUE(out.IsObject()) << r.body;
    return out;
  }

  HttpResponse Infer(HttpClient& client, int64_t n, float base, int64_t rows = 1,
                     const std::string& model = "capped") {
    std::vector<float> values(static_cast<size_t>(rows * n));
    for (size_t i = 0; i < values.size(); ++i) values[i] = base + static_cast<float>(i);
    const std::string json =
        R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[)" + std::to_string(rows) + "," +
        std::to_string(n) + R"(],"parameters":{"binary_data_size":)" +
        std::to_string(rows * n * 4) + R"(}}],"parameters":{"binary_data_output":true}})";
    BinaryBody body = MakeBinaryBody(json, {AsBytes(values)});
    return client.Post("/v2/models/" + model + "/infer", body.body,
                       {{"inference-header-content-length", std::to_string(body.json_length)}});
  }
};

TEST_F(MemoryTest, UnderConcurrentMixedLoadOnlyWhatCannotFitFailsAndTheServerStaysReady) {
  std::vector<std::thread> clients;
  std::vector<std::string> problems(kClients);
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([this, c, &problems] {
      HttpClient client(server().http_port());
      for (int i = 0; i < kRequestsPerClient; ++i) {
        const bool big = i % 4 == 3;
        const float base = static_cast<float>(c * 1000 + i);
        const HttpResponse r = Infer(client, big ? kBig : kSmall, base);
        if (big) {
          if (r.status != 503 || r.Header("retry-after") != "1" ||
              ErrorMessage(r.body).rfind("out of memory", 0) != 0 ||
              ErrorMessage(r.body).find("memory limit is 2097152 bytes") == std::string::npos) {
            problems[c] += "big request " + std::to_string(i) + ": " + r.Describe() + "\n";
          }
          continue;
        }
        if (r.status != 200) {
          problems[c] += "small request " + std::to_string(i) + ": " + r.Describe() + "\n";
          continue;
        }
        const auto decoded = DecodeBinaryResponse(r);
        const auto out = FromBytes<float>(decoded.blobs.at(0));
        bool right = out.size() == static_cast<size_t>(kSmall);
        for (size_t k = 0; right && k < out.size(); ++k) {
          right = out[k] == base + static_cast<float>(k) + 1.0f;
        }
        if (!right) problems[c] += "small request " + std::to_string(i) + ": wrong outputs\n";
      }
    });
  }
  for (auto& client : clients) client.join();
  for (const std::string& p : problems) EXPECT_EQ(p, "");

  // gRPC says RESOURCE_EXHAUSTED for the same request.
  inference::ModelInferRequest request;
  request.set_model_name("capped");
  auto* input = request.add_inputs();
  input->set_name("INPUT0");
  input->set_datatype("FP32");
  input->add_shape(1);
  input->add_shape(kBig);
  request.add_raw_input_contents(std::string(kBig * 4, '\0'));
  grpc::ClientContext context;
  inference::ModelInferResponse response;
  const grpc::Status status = grpc().ModelInfer(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(status);
  EXPECT_EQ(status.error_message().rfind("out of memory", 0), 0u) << status.error_message();

  EXPECT_EQ(http().Get("/v2/health/ready").status, 200);
  const int big_requests = kClients * kRequestsPerClient / 4 + 1;
  // The admission report shows the instance's arena: its cap, and every run that ran out.
  const auto model = Admission("capped");
  const auto& memory = model["placement"]["instances"][0]["memory"];
  ASSERT_TRUE(memory.IsObject()) << ToJson(model);
  // Its input's dim is dynamic and nothing makes it concrete: no budget, and it says why.
  EXPECT_TRUE(model["memory_budget"].IsNull());
  EXPECT_NE(std::string(model["memory_budget_note"].GetString()).find("model_warmup"),
            std::string::npos);
  EXPECT_EQ(JsonUint(memory["limit_bytes"]), 2097152u);
  // Big requests alike may share a batch: a lone one fails in one run (a single row is not
  // split), a batch of k >= 2 in two (the batch, then its first half). So between 1 and
  // one per big request; the small ones never ran out.
  const uint64_t runs = JsonUint(memory["out_of_memory_runs"]).value_or(0);
  EXPECT_GE(runs, 1u);
  EXPECT_LE(runs, static_cast<uint64_t>(big_requests));
  EXPECT_LE(JsonUint(memory["peak_bytes"]).value_or(UINT64_MAX), 2097152u);
  // ...and so does /metrics.
  HttpClient metrics(server().metrics_port());
  const HttpResponse scrape = metrics.Get("/metrics");
  ASSERT_EQ(scrape.status, 200);
  EXPECT_NE(scrape.body.find("fastpath_memory_oom_total{model=\"capped\",version=\"1\"} " +
                             std::to_string(runs)),
            std::string::npos)
      << scrape.body;
  EXPECT_NE(scrape.body.find("fastpath_memory_limit_bytes{model=\"capped\",version=\"1\","
                             "model_instance=\"0\",device=\"cpu\"} 2097152"),
            std::string::npos);
}

TEST_F(MemoryTest, AMeasuredBudgetRefusesWhatCanNeverFitAndHalvesWhatCan) {
  const auto model = Admission("budgeted");
  const auto& budget = model["memory_budget"];
  ASSERT_TRUE(budget.IsObject()) << ToJson(model);
  EXPECT_EQ(JsonUint(budget["rows"]), 8u);
  EXPECT_EQ(JsonUint(budget["input_elements"]), 8u * 16384);
  EXPECT_EQ(JsonUint(budget["limit_bytes"]), 2097152u);
  EXPECT_TRUE(budget["fits_limit"].GetBool());
  // The measured run held at least its 512 KiB output.
  EXPECT_GE(JsonUint(budget["peak_bytes"]).value_or(0), 8u * 16384 * 4);
  EXPECT_STREQ(model["state"].GetString(), "READY");

  // 4 MiB of output for one row: it can never fit, and is refused before it runs.
  const HttpResponse never = Infer(http(), kBig, 0, 1, "budgeted");
  EXPECT_EQ(never.status, 413) << never.Describe();
  EXPECT_EQ(ErrorMessage(never.body)
                .rfind("out of memory: model 'budgeted' version 1 would "
                       "need about ",
                       0),
            0u)
      << never.Describe();
  EXPECT_NE(ErrorMessage(never.body).find("it can never fit"), std::string::npos);

  // Two rows of 1.6 MB: together they run out of memory, each half fits, so the scheduler's
  // retry in halves answers them right.
  constexpr int64_t kHalf = 400000;
  const HttpResponse split = Infer(http(), kHalf, 0, 2, "budgeted");
  ASSERT_EQ(split.status, 200) << split.Describe();
  const auto out = FromBytes<float>(DecodeBinaryResponse(split).blobs.at(0));
  ASSERT_EQ(out.size(), static_cast<size_t>(2 * kHalf));
  for (size_t i = 0; i < out.size(); i += 9973) {
    ASSERT_EQ(out[i], static_cast<float>(i) + 1.0f) << i;
  }
  const auto after = Admission("budgeted");
  EXPECT_EQ(JsonUint(after["placement"]["instances"][0]["memory"]["out_of_memory_runs"]), 1u);
  EXPECT_EQ(http().Get("/v2/health/ready").status, 200);
}

// A BYTES element costs its string's length, which the budget's per-element figure (from
// short warm-up strings) cannot bound: one 3 MiB string in a 2 MiB cap ran (200) and the
// process grew by its size. Each byte of the strings now counts.
TEST_F(MemoryTest, ABytesStringPastTheCapIsRefusedBeforeItRuns) {
  auto request = [](size_t length) {
    return R"({"inputs":[{"name":"INPUT0","datatype":"BYTES","shape":[1,1],"data":[")" +
           std::string(length, 'x') + R"("]}]})";
  };
  const HttpResponse big = http().Post("/v2/models/strings/infer", request(3 << 20));
  EXPECT_EQ(big.status, 413) << big.Describe();
  EXPECT_NE(ErrorMessage(big.body).find("and 3.0 MiB of BYTES strings"), std::string::npos)
      << big.Describe();
  const HttpResponse small = http().Post("/v2/models/strings/infer", request(1000));
  EXPECT_EQ(small.status, 200) << small.Describe();
}

TEST_F(MemoryTest, BudgetCommandMeasuresWithoutServingAndExitsOneWhenAModelDoesNotFit) {
  // The same repository as the server's: "budgeted" and "strings" are measured, "capped" is
  // not (its dim is dynamic), and all fit.
  const auto fits = testing::RunCommand(
      {FASTPATH_BINARY, "budget", "--model-repository", repo().root().string(), "--json"});
  ASSERT_EQ(fits.exit_code, 0) << fits.out << fits.err;
  const auto doc = ParseJson(fits.out);
  ASSERT_TRUE(doc.IsObject()) << fits.out;
  EXPECT_TRUE(doc["fits"].GetBool());
  ASSERT_EQ(doc["models"].Size(), 3u) << fits.out;
  const auto& budgeted = doc["models"][0];
  EXPECT_STREQ(budgeted["name"].GetString(), "budgeted");
  EXPECT_EQ(JsonUint(budgeted["memory_budget"]["limit_bytes"]), 2097152u);
  EXPECT_EQ(JsonUint(budgeted["memory_budget"]["rows"]), 8u);
  EXPECT_GT(JsonUint(budgeted["memory_budget"]["weights_bytes"]).value_or(0), 0u);
  EXPECT_TRUE(doc["models"][1]["memory_budget"].IsNull());
  EXPECT_NE(std::string(doc["models"][1]["note"].GetString()).find("model_warmup"),
            std::string::npos);
  EXPECT_TRUE(doc["devices"]["cpu"]["fits"].GetBool());

  // A model whose measured batch cannot fit its cap: the table says no, the exit is 1.
  repo().AddVersion("tight", 1, "add_one");
  repo().WriteConfig("tight", R"(
name: "tight"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 65536 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 65536 ] } ]
parameters { key: "fastpath.memory.limit_bytes" value { string_value: "1Mi" } }
)");
  const auto tight = testing::RunCommand({FASTPATH_BINARY, "budget", "--model-repository",
                                          repo().root().string(), "--model", "tight"});
  EXPECT_EQ(tight.exit_code, 1) << tight.out << tight.err;
  EXPECT_NE(tight.out.find("MODEL"), std::string::npos) << tight.out;
  EXPECT_NE(tight.out.find("tight"), std::string::npos) << tight.out;
  EXPECT_EQ(tight.out.find("budgeted"), std::string::npos) << "only the model asked for";

  // A model the repository does not have did not load: exit 1, as its help says (it was 0).
  const auto missing = testing::RunCommand({FASTPATH_BINARY, "budget", "--model-repository",
                                            repo().root().string(), "--model", "nosuch"});
  EXPECT_EQ(missing.exit_code, 1) << missing.out << missing.err;

  const auto usage = testing::RunCommand({FASTPATH_BINARY, "budget"});
  EXPECT_EQ(usage.exit_code, 2) << usage.err;
}

TEST_F(MemoryTest, ABadMemoryLimitIsRefusedAtLoadNamingTheKey) {
  repo().AddVersion("bad_limit", 1, "add_one");
  repo().WriteConfig("bad_limit", R"(
name: "bad_limit"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
parameters { key: "fastpath.memory.limit_bytes" value { string_value: "2 GB" } }
)");
  const HttpResponse r = http().Post("/v2/repository/models/bad_limit/load", "");
  EXPECT_EQ(r.status, 400) << r.Describe();  // as every failed load, as Triton
  EXPECT_NE(ErrorMessage(r.body).find("'fastpath.memory.limit_bytes' is '2 GB'"), std::string::npos)
      << r.Describe();
  EXPECT_EQ(Infer(http(), kSmall, 0).status, 200);
}

}  // namespace
}  // namespace fastpath::integration
