// The servers that `fastpath gate`'s tests (gate_test.cc) and GET /v2/rollout/verdict's
// (rollout_verdict_test.cc) compare: `fastpath serve` of the `square` test model, each in its
// own repository, the same or made slower, stopped (exit 0 required) when the test ends.
#pragma once

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "fakes/temp_repository.h"
#include "server_process.h"

namespace fastpath::integration {

// 128 x 128 FP32 matrices, squared: about a millisecond of compute per row.
inline constexpr const char* kSquareConfig = R"(name: "square"
backend: "onnxruntime"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 128, 128 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 128, 128 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
)";
// The same, slower: a request of one row waits 100 ms for a batch (one of max_batch_size rows
// is sent at once, so throughput at the largest batch is unchanged). A deterministic ~50x at
// batch 1, which no scheduling noise on a busy machine can hide.
inline constexpr const char* kSlowQueue =
    "dynamic_batching { max_queue_delay_microseconds: 100000 }\n";

// A `fastpath serve` of `square` with a config of its own.
struct Served {
  std::unique_ptr<fastpath::testing::TempRepository> repo;
  std::unique_ptr<fastpath::testing::TempRepository> work;
  std::unique_ptr<ServerProcess> process;
  std::string url() const { return "http://127.0.0.1:" + std::to_string(process->http_port()); }
};

class GateServersTest : public ::testing::Test {
 protected:
  // `flags` are added to `fastpath serve`'s.
  Served& Start(const std::string& config, std::vector<std::string> flags = {}) {
    auto s = std::make_unique<Served>();
    s->repo = std::make_unique<fastpath::testing::TempRepository>(FASTPATH_TEST_MODELS_DIR);
    s->work = std::make_unique<fastpath::testing::TempRepository>(FASTPATH_TEST_MODELS_DIR);
    s->repo->AddVersion("square", 1, "square");
    s->repo->WriteConfig("square", config);
    s->process = std::make_unique<ServerProcess>(s->work->root());
    ServeOptions options;
    options.repository = s->repo->root();
    options.extra_args = std::move(flags);
    EXPECT_TRUE(s->process->Start(options));
    servers_.push_back(std::move(s));
    return *servers_.back();
  }
  void TearDown() override {
    for (auto& s : servers_) EXPECT_TRUE(s->process->Stop()) << s->process->LogTail();
  }
  // A path in a temporary folder of the test's.
  std::filesystem::path Temp(const std::string& name) {
    if (!files_) {
      files_ = std::make_unique<fastpath::testing::TempRepository>(FASTPATH_TEST_MODELS_DIR);
    }
    return files_->root() / name;
  }

  std::vector<std::unique_ptr<Served>> servers_;
  std::unique_ptr<fastpath::testing::TempRepository> files_;
};

// A verdict's "failures", joined: for assertion messages.
inline std::string Failures(const rapidjson::Value& verdict) {
  std::string out;
  if (verdict.HasMember("failures")) {
    for (const auto& f : verdict["failures"].GetArray()) out += std::string(f.GetString()) + "; ";
  }
  return out;
}

}  // namespace fastpath::integration
