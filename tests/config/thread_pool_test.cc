// serve's --ort-thread-pool (issue 11 §1) as the config decides it: the mode's names, and
// which instances run on the process-wide pool (CPU instances of a model that sets no thread
// count, and only under kGlobal).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fastpath/config/model_config.h"

namespace fastpath::config {
namespace {

using ::testing::HasSubstr;

inference::ModelConfig Parse(std::string_view text) {
  auto parsed = ParseModelConfig(text, "config.pbtxt");
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : inference::ModelConfig();
}

constexpr std::string_view kNoThreads = R"pb(
  name: "m"
  instance_group { kind: KIND_CPU count: 2 }
)pb";

TEST(ThreadPoolModeTest, ParsesItsOwnNamesAndRefusesTheRest) {
  for (ThreadPoolMode mode : {ThreadPoolMode::kPerSession, ThreadPoolMode::kGlobal}) {
    auto parsed = ParseThreadPoolMode(ThreadPoolModeName(mode));
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(*parsed, mode);
  }
  EXPECT_STREQ(ThreadPoolModeName(ThreadPoolMode::kPerSession), "per-session");
  EXPECT_STREQ(ThreadPoolModeName(ThreadPoolMode::kGlobal), "global");
  for (const char* bad : {"", "Global", "per_session", "both"}) {
    auto parsed = ParseThreadPoolMode(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr("--ort-thread-pool"));
    EXPECT_THAT(parsed.status().message(), HasSubstr("per-session or global"));
  }
}

TEST(ThreadPoolModeTest, GlobalTakesOnlyCpuInstancesWithoutAThreadCount) {
  const auto config = Parse(kNoThreads);
  const auto& group = config.instance_group(0);
  auto global = InstanceOptionsFor(config, group, 0, 2, ThreadPoolMode::kGlobal);
  ASSERT_TRUE(global.ok()) << global.status().ToString();
  EXPECT_TRUE(global->global_thread_pool);
  EXPECT_TRUE(UsesGlobalThreadPool(config, ThreadPoolMode::kGlobal));

  // The default and per-session: pools of their own, the cores shared by the instances.
  for (auto per_session : {InstanceOptionsFor(config, group, 0, 2),
                           InstanceOptionsFor(config, group, 0, 2, ThreadPoolMode::kPerSession)}) {
    ASSERT_TRUE(per_session.ok()) << per_session.status().ToString();
    EXPECT_FALSE(per_session->global_thread_pool);
    EXPECT_EQ(per_session->intra_op_threads, 1);  // 2 cores, 2 instances
  }
  EXPECT_FALSE(UsesGlobalThreadPool(config, ThreadPoolMode::kPerSession));
}

TEST(ThreadPoolModeTest, AnExplicitThreadCountKeepsPoolsOfItsOwn) {
  for (const char* key : {"intra_op_thread_count", "inter_op_thread_count"}) {
    SCOPED_TRACE(key);
    const auto config = Parse(std::string(kNoThreads) + "parameters { key: \"" + key +
                              "\" value { string_value: \"3\" } }");
    EXPECT_FALSE(UsesGlobalThreadPool(config, ThreadPoolMode::kGlobal));
    auto options =
        InstanceOptionsFor(config, config.instance_group(0), 0, 2, ThreadPoolMode::kGlobal);
    ASSERT_TRUE(options.ok()) << options.status().ToString();
    EXPECT_FALSE(options->global_thread_pool);
  }
}

TEST(ThreadPoolModeTest, GpuInstancesAreUnaffected) {
  const auto config = Parse(R"pb(
    name: "m"
    instance_group {
      kind: KIND_GPU
      count: 1
      gpus: [ 0 ]
    }
  )pb");
  auto options =
      InstanceOptionsFor(config, config.instance_group(0), 0, 2, ThreadPoolMode::kGlobal);
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_FALSE(options->global_thread_pool);
  EXPECT_EQ(options->intra_op_threads, 1);
}

}  // namespace
}  // namespace fastpath::config
