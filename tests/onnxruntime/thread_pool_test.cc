// The process-wide intra-op pool (OrtBackendOptions::global_intra_op_threads, serve's
// --ort-thread-pool global): sessions that ask for it run on it, a backend without it
// refuses them, and one process cannot have two different pools.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "fastpath/common/tensor.h"
#include "fastpath/onnxruntime/ort_backend.h"

namespace fastpath::onnxruntime {
namespace {

using ::testing::HasSubstr;

const std::filesystem::path kSimple =
    std::filesystem::path(FASTPATH_TEST_MODELS_DIR) / "simple.onnx";

Tensor Int32s(std::string name, const std::vector<int32_t>& values) {
  Tensor t{std::move(name), DataType::kInt32, {1, static_cast<int64_t>(values.size())}, ""};
  t.data.resize(values.size() * sizeof(int32_t));
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

// Runs `simple` (sum and difference of two INT32 [1,16]) and checks the sum.
void ExpectSimpleRuns(backend::ModelInstance& instance) {
  std::vector<int32_t> a(16), b(16);
  for (int i = 0; i < 16; ++i) {
    a[i] = i * 7;
    b[i] = 100 - i;
  }
  auto outputs = instance.Run({Int32s("INPUT0", a), Int32s("INPUT1", b)}, {"OUTPUT0"});
  ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
  ASSERT_EQ(outputs->size(), 1u);
  std::vector<int32_t> sum(16);
  ASSERT_EQ((*outputs)[0].data.size(), sum.size() * sizeof(int32_t));
  std::memcpy(sum.data(), (*outputs)[0].data.data(), (*outputs)[0].data.size());
  for (int i = 0; i < 16; ++i) EXPECT_EQ(sum[i], a[i] + b[i]) << i;
}

TEST(GlobalThreadPoolTest, SessionsOnThePoolAndOnTheirOwnRunSideBySide) {
  OrtBackendOptions options;
  options.global_intra_op_threads = 2;
  auto backend = CreateOrtBackend(options);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  backend::InstanceOptions shared;
  shared.global_thread_pool = true;
  backend::InstanceOptions own;  // an explicit thread count: a pool of its own
  own.intra_op_threads = 2;
  std::vector<std::unique_ptr<backend::ModelInstance>> instances;
  for (const auto& instance_options : {shared, shared, own}) {
    auto instance = (*backend)->CreateInstance(kSimple, instance_options);
    ASSERT_TRUE(instance.ok()) << instance.status().ToString();
    instances.push_back(std::move(instance).value());
  }
  for (auto& instance : instances) ExpectSimpleRuns(*instance);
}

TEST(GlobalThreadPoolTest, RefusedWhereTheBackendHasNoPool) {
  auto backend = CreateOrtBackend();
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  backend::InstanceOptions shared;
  shared.global_thread_pool = true;
  auto instance = (*backend)->CreateInstance(kSimple, shared);
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(instance.status().message(), HasSubstr("process-wide intra-op thread pool"));
}

TEST(GlobalThreadPoolTest, OneProcessHasOnePool) {
  OrtBackendOptions two;
  two.global_intra_op_threads = 2;
  auto first = CreateOrtBackend(two);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  // The same pool, or none asked for: the live environment is shared.
  EXPECT_TRUE(CreateOrtBackend(two).ok());
  EXPECT_TRUE(CreateOrtBackend().ok());
  OrtBackendOptions three;
  three.global_intra_op_threads = 3;
  auto refused = CreateOrtBackend(three);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("a process-wide intra-op pool of 2 threads"));
}

}  // namespace
}  // namespace fastpath::onnxruntime
