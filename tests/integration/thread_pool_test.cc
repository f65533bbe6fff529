// serve's --ort-thread-pool (issue 11 §1), black-box: the flag is refused when it names no
// mode, the start-up log says which pool a model that sets no thread count got, and models
// on the process-wide pool and on pools of their own serve side by side.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fakes/run_command.h"
#include "integration_fixture.h"

namespace fastpath::integration {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// `simple` sets no thread count; `own_threads` is the same model with intra_op_thread_count.
class ThreadPoolTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override { return {"simple"}; }
  void PrepareRepository(testing::TempRepository& repo) override {
    std::string config = testing::kSimpleConfig;
    config.replace(config.find("\"simple\""), 8, "\"own_threads\"");
    repo.WriteConfig("own_threads",
                     config +
                         "parameters { key: \"intra_op_thread_count\" value { string_value: "
                         "\"1\" } }\n");
    repo.AddVersion("own_threads", 1, "simple");
  }
  std::string Log() const {
    std::ifstream in(server_->log_path());
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  void ExpectBothServe() {
    ExpectStillServing();
    const auto a = Iota(1, 16), b = Iota(2, 16);
    HttpResponse r = http().Post("/v2/models/own_threads/infer", SimpleJsonRequest(a, b));
    EXPECT_EQ(r.status, 200) << r.Describe();
  }
};

class GlobalThreadPoolTest : public ThreadPoolTest {
 protected:
  std::vector<std::string> ExtraArgs() override { return {"--ort-thread-pool", "global"}; }
};

TEST_F(ThreadPoolTest, PerSessionIsTheDefaultAndTheLogSaysSo) {
  ExpectBothServe();
  const std::string log = Log();
  EXPECT_THAT(log, HasSubstr("model 'simple' v1: "));
  EXPECT_THAT(log, HasSubstr("per CPU instance (--ort-thread-pool per-session; ")) << log;
  EXPECT_THAT(log, Not(HasSubstr("process-wide"))) << log;
  EXPECT_THAT(log, Not(HasSubstr("model 'own_threads' v1: "))) << log;
}

TEST_F(GlobalThreadPoolTest, ModelsWithoutAThreadCountShareTheProcessPool) {
  ExpectBothServe();
  const std::string log = Log();
  EXPECT_THAT(log, HasSubstr("model 'simple' v1: its CPU instances run on the process-wide "
                             "intra-op thread pool (--ort-thread-pool global; "))
      << log;
  // An explicit count keeps a pool of its own, and says nothing about the default.
  EXPECT_THAT(log, Not(HasSubstr("model 'own_threads' v1: "))) << log;
}

// budget and preflight load the models as serve runs them, so they take the same flag.
TEST_F(GlobalThreadPoolTest, BudgetMeasuresTheModelsOnTheSamePool) {
  const testing::CommandRun run =
      testing::RunCommand({FASTPATH_BINARY, "budget", "--model-repository", repo().root().string(),
                           "--ort-thread-pool", "global", "--json"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("\"simple\"")) << run.out;
  EXPECT_THAT(run.out, HasSubstr("\"own_threads\"")) << run.out;
}

TEST(ThreadPoolFlagTest, AnythingButTheTwoModesIsAUsageError) {
  for (const char* command : {"serve", "budget", "preflight"}) {
    for (const char* bad : {"both", "", "Global"}) {
      const testing::CommandRun run = testing::RunCommand(
          {FASTPATH_BINARY, command, "--model-repository", "/tmp", "--ort-thread-pool", bad});
      EXPECT_EQ(run.exit_code, 2) << command << " " << bad << ": " << run.err;
      EXPECT_THAT(run.err, HasSubstr("--ort-thread-pool must be per-session or global, not '" +
                                     std::string(bad) + "'"));
    }
    const testing::CommandRun help = testing::RunCommand({FASTPATH_BINARY, command, "--help"});
    EXPECT_THAT(help.out, HasSubstr("--ort-thread-pool per-session|global")) << command;
  }
}

}  // namespace
}  // namespace fastpath::integration
