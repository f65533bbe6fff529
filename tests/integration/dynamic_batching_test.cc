// The dynamic batcher end to end: concurrent clients over HTTP and gRPC are batched into
// one model execution, and every client gets exactly the outputs the same model gives it
// without batching. Behaviour only, never timing: the window is far longer than the test,
// and the batch is cut by reaching the preferred size, so the batch forms however slowly
// the clients arrive.
#include <future>
#include <thread>

#include "integration_fixture.h"

namespace fastpath::integration {
namespace {

constexpr int kClients = 8;  // = max_batch_size = the preferred size

std::string SimpleConfig(const std::string& name, const std::string& extra) {
  return "name: \"" + name + "\"\n" + R"(
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
instance_group [ { kind: KIND_CPU count: 2 } ]
)" + extra;
}

class DynamicBatchingTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override { return {}; }
  void PrepareRepository(testing::TempRepository& repo) override {
    repo.AddVersion("simple", 1, "simple");
    repo.WriteConfig("simple", SimpleConfig("simple", R"(
dynamic_batching {
  preferred_batch_size: [ 8 ]
  max_queue_delay_microseconds: 30000000
}
)"));
    repo.AddVersion("simple_unbatched", 1, "simple");
    repo.WriteConfig("simple_unbatched", SimpleConfig("simple_unbatched", ""));
    // One queued request at most; a request may shorten its 60 s queue timeout.
    repo.AddVersion("simple_tiny_queue", 1, "simple");
    repo.WriteConfig("simple_tiny_queue", SimpleConfig("simple_tiny_queue", R"(
dynamic_batching {
  preferred_batch_size: [ 8 ]
  max_queue_delay_microseconds: 60000000
  default_queue_policy {
    max_queue_size: 1
    default_timeout_microseconds: 60000000
    allow_timeout_override: true
  }
}
)"));
  }

  struct Stats {
    uint64_t success = 0;
    uint64_t executions = 0;
    uint64_t largest_batch = 0;
  };
  Stats ModelStats(const std::string& model) {
    Stats out;
    HttpResponse r = http().Get("/v2/models/" + model + "/stats");
    EXPECT_EQ(r.status, 200) << r.Describe();
    auto doc = ParseJson(r.body);
    if (!doc.IsObject() || !doc.HasMember("model_stats") || doc["model_stats"].Empty()) {
      ADD_FAILURE() << r.body;
      return out;
    }
    const auto& s = doc["model_stats"][0];
    out.success = JsonUint(s["inference_stats"]["success"]["count"]).value_or(0);
    out.executions = JsonUint(s["execution_count"]).value_or(0);
    if (s.HasMember("batch_stats")) {
      for (const auto& b : s["batch_stats"].GetArray()) {
        out.largest_batch = std::max(out.largest_batch, JsonUint(b["batch_size"]).value_or(0));
      }
    }
    return out;
  }

  // What the model answers to (a, b) without batching, as raw OUTPUT0 and OUTPUT1.
  std::vector<std::string> Unbatched(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    auto request = SimpleGrpcRequest(a, b);
    request.set_model_name("simple_unbatched");
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    grpc::Status status = grpc().ModelInfer(&context, request, &response);
    EXPECT_TRUE(status.ok()) << Describe(status);
    return {response.raw_output_contents().begin(), response.raw_output_contents().end()};
  }
};

// Distinct inputs per client, so that a response delivered to the wrong client shows.
std::vector<int32_t> InputA(int client) { return Iota(client * 100, 16); }
std::vector<int32_t> InputB(int client) { return Iota(-client * 37, 16); }

TEST_F(DynamicBatchingTest, ConcurrentHttpAndGrpcClientsShareABatchAndGetTheirOwnOutputs) {
  std::vector<std::future<std::vector<std::string>>> results;
  for (int client = 0; client < kClients; ++client) {
    const bool over_grpc = client % 2 == 1;
    results.push_back(std::async(std::launch::async, [this, client, over_grpc] {
      const auto a = InputA(client), b = InputB(client);
      std::vector<std::string> outputs;
      if (over_grpc) {
        grpc::ClientContext context;
        inference::ModelInferResponse response;
        grpc::Status status =
            grpc().ModelInfer(&context, SimpleGrpcRequest(a, b, std::to_string(client)), &response);
        EXPECT_TRUE(status.ok()) << Describe(status);
        EXPECT_EQ(response.id(), std::to_string(client));
        ExpectSimpleGrpcResponse(response, a, b);
        outputs.assign(response.raw_output_contents().begin(),
                       response.raw_output_contents().end());
      } else {
        HttpClient http(server().http_port());
        HttpResponse r =
            http.Post("/v2/models/simple/infer", SimpleJsonRequest(a, b, std::to_string(client)));
        EXPECT_EQ(r.status, 200) << r.Describe();
        ExpectSimpleJsonResponse(r.body, a, b);
        auto doc = ParseJson(r.body);
        EXPECT_STREQ(doc["id"].GetString(), std::to_string(client).c_str());
        for (const char* name : {"OUTPUT0", "OUTPUT1"}) {
          for (const auto& out : doc["outputs"].GetArray()) {
            if (std::string(out["name"].GetString()) != name) continue;
            std::vector<int32_t> values;
            for (const auto& v : out["data"].GetArray()) values.push_back(v.GetInt());
            outputs.push_back(AsBytes(values));
          }
        }
      }
      return outputs;
    }));
  }
  for (int client = 0; client < kClients; ++client) {
    const auto got = results[client].get();
    EXPECT_EQ(got, Unbatched(InputA(client), InputB(client))) << "client " << client;
  }
  const Stats s = ModelStats("simple");
  EXPECT_EQ(s.success, static_cast<uint64_t>(kClients));
  EXPECT_LT(s.executions, s.success) << "no batch of more than one request was formed";
  EXPECT_GT(s.largest_batch, 1u);
}

TEST_F(DynamicBatchingTest, RequestsOfSeveralRowsAreSplitBackByRows) {
  const std::vector<int> rows = {1, 2, 1, 3, 1};  // 8 rows: the preferred size
  std::vector<std::future<void>> done;
  for (size_t client = 0; client < rows.size(); ++client) {
    done.push_back(std::async(std::launch::async, [this, client, n = rows[client]] {
      const auto a = Iota(static_cast<int32_t>(client) * 1000, 16 * n);
      const auto b = Iota(static_cast<int32_t>(client) * 7, 16 * n);
      grpc::ClientContext context;
      inference::ModelInferResponse response;
      grpc::Status status = grpc().ModelInfer(&context, SimpleGrpcRequest(a, b), &response);
      ASSERT_TRUE(status.ok()) << Describe(status);
      ASSERT_EQ(response.outputs_size(), 2);
      EXPECT_EQ(response.outputs(0).shape(0), n);
      ExpectSimpleGrpcResponse(response, a, b);
      EXPECT_EQ(std::vector<std::string>(response.raw_output_contents().begin(),
                                         response.raw_output_contents().end()),
                Unbatched(a, b));
    }));
  }
  for (auto& f : done) f.get();
  const Stats s = ModelStats("simple");
  EXPECT_EQ(s.success, rows.size());
  EXPECT_LT(s.executions, s.success);
}

TEST_F(DynamicBatchingTest, AFullQueueRefusesAndAQueueTimeoutRejects) {
  // Two concurrent requests on a queue of one with a long window: whichever comes second
  // is refused at once (503, "full"); the first waits in the queue until its own 2 s
  // timeout and is rejected (503, "timed out"). Neither reaches the model.
  auto send = [this] {
    HttpClient http(server().http_port());
    const auto a = Iota(1, 16), b = Iota(2, 16);
    std::string body = SimpleJsonRequest(a, b);
    body.insert(1, "\"parameters\":{\"timeout\":2000000},");
    return http.Post("/v2/models/simple_tiny_queue/infer", body);
  };
  auto first = std::async(std::launch::async, send);
  auto second = std::async(std::launch::async, send);
  std::vector<HttpResponse> answers = {first.get(), second.get()};
  int full = 0, timed_out = 0;
  for (const auto& r : answers) {
    EXPECT_EQ(r.status, 503) << r.Describe();
    const std::string message = ErrorMessage(r.body);
    full += message.find("full") != std::string::npos;
    timed_out += message.find("timed out") != std::string::npos;
  }
  EXPECT_EQ(full, 1) << answers[0].Describe() << "\n" << answers[1].Describe();
  EXPECT_EQ(timed_out, 1) << answers[0].Describe() << "\n" << answers[1].Describe();
  const Stats s = ModelStats("simple_tiny_queue");
  EXPECT_EQ(s.success, 0u);
  EXPECT_EQ(s.executions, 0u);
}

TEST_F(DynamicBatchingTest, BadSchedulingParametersAreRefused) {
  const auto a = Iota(1, 16), b = Iota(2, 16);
  for (const char* params : {"{\"priority\":-1}", "{\"timeout\":\"soon\"}", "{\"priority\":1.5}"}) {
    std::string body = SimpleJsonRequest(a, b);
    body.insert(1, std::string("\"parameters\":") + params + ",");
    HttpResponse r = http().Post("/v2/models/simple_unbatched/infer", body);
    EXPECT_EQ(r.status, 400) << params << ": " << r.Describe();
    EXPECT_NE(ErrorMessage(r.body).find("must be a non-negative integer"), std::string::npos)
        << r.body;
  }
}

}  // namespace
}  // namespace fastpath::integration
