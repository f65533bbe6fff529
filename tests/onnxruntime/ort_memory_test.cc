// The per-instance memory cap on real ONNX Runtime CPU sessions (issue 13): a capped
// instance runs in an arena of its own, a run that needs more fails as one clean
// ResourceExhausted naming the cap, the instance keeps serving afterwards, and the arena's
// statistics (in use, peak, limit, out-of-memory runs) are read back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fastpath/common/tensor.h"
#include "fastpath/onnxruntime/ort_backend.h"

namespace fastpath::onnxruntime {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint64_t kMiB = uint64_t{1} << 20;

// mlp: X [rows, 4] FP32 -> 8 hidden -> Y [rows, 2]. Each row costs 16 bytes of input (the
// caller's), 32 of hidden activations twice over and 8 of output in the arena, so 100000
// rows need several MiB and 10 rows a few hundred bytes.
Tensor MlpInput(int64_t rows) {
  Tensor t;
  t.name = "X";
  t.dtype = DataType::kFp32;
  t.shape = {rows, 4};
  std::vector<float> values(static_cast<size_t>(rows) * 4, 0.25f);
  t.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return t;
}

class OrtMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = CreateOrtBackend();
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    backend_ = std::move(backend).value();
  }

  std::unique_ptr<backend::ModelInstance> Load(std::optional<uint64_t> limit) {
    backend::InstanceOptions options;
    options.memory_limit_bytes = limit;
    auto instance = backend_->CreateInstance(
        std::filesystem::path(FASTPATH_TEST_MODELS_DIR) / "mlp.onnx", options);
    EXPECT_TRUE(instance.ok()) << instance.status().ToString();
    return instance.ok() ? std::move(instance).value() : nullptr;
  }

  std::unique_ptr<backend::Backend> backend_;
};

TEST_F(OrtMemoryTest, ARunBeyondTheCapIsOneCleanOutOfMemoryAndTheInstanceServesOn) {
  auto instance = Load(kMiB);
  ASSERT_NE(instance, nullptr);
  ASSERT_TRUE(instance->Run({MlpInput(10)}, {"Y"}).ok());

  const auto big = instance->Run({MlpInput(100000)}, {"Y"});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(), StartsWith("out of memory: running model '"));
  EXPECT_THAT(big.status().message(), HasSubstr("mlp.onnx"));
  EXPECT_THAT(big.status().message(), HasSubstr("requested bytes of"));  // ORT's figure
  EXPECT_THAT(big.status().message(),
              HasSubstr("the instance's memory limit is 1048576 bytes (parameters: "
                        "fastpath.memory.limit_bytes)"));

  // The next run (which also gives the arena's free regions back) is correct.
  const auto after = instance->Run({MlpInput(3)}, {"Y"});
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].shape, (std::vector<int64_t>{3, 2}));

  const auto stats = instance->memory_stats();
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->limit_bytes, kMiB);
  EXPECT_EQ(stats->out_of_memory_runs, 1u);
  EXPECT_GT(stats->in_use_bytes, 0u);  // the weights
  EXPECT_GE(stats->peak_bytes, stats->in_use_bytes);
  EXPECT_LE(stats->peak_bytes, kMiB);
  EXPECT_LE(stats->reserved_bytes, kMiB);
  EXPECT_GE(stats->arena_extensions, 1u);
}

TEST_F(OrtMemoryTest, AfterRunningOutTheArenaGivesBackItsFreeRegionsSoTheNextRunFits) {
  // 30000 rows leave about 1.2 MB of free regions in the 2 MiB arena; 40000 rows need about
  // 1.6 MB in other sizes. They run out (the free regions count against the limit), the
  // arena gives them back, and the same request then fits: fragmentation does not stick.
  auto instance = Load(2 * kMiB);
  ASSERT_NE(instance, nullptr);
  ASSERT_TRUE(instance->Run({MlpInput(30000)}, {"Y"}).ok());
  const uint64_t reserved = instance->memory_stats()->reserved_bytes;
  EXPECT_GT(reserved, kMiB);
  EXPECT_EQ(instance->Run({MlpInput(40000)}, {"Y"}).status().code(),
            StatusCode::kResourceExhausted);
  const auto shrunk = instance->memory_stats();
  EXPECT_GE(shrunk->arena_shrinkages, 1u);
  EXPECT_LT(shrunk->reserved_bytes, reserved);
  const auto fits = instance->Run({MlpInput(40000)}, {"Y"});
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  EXPECT_EQ((*fits)[0].shape, (std::vector<int64_t>{40000, 2}));
  EXPECT_EQ(instance->memory_stats()->out_of_memory_runs, 1u);
}

TEST_F(OrtMemoryTest, EveryCappedInstanceHasAnArenaOfItsOwn) {
  auto small = Load(kMiB);
  auto large = Load(64 * kMiB);
  auto uncapped = Load(std::nullopt);
  ASSERT_TRUE(small && large && uncapped);
  EXPECT_EQ(small->Run({MlpInput(100000)}, {"Y"}).status().code(),
            StatusCode::kResourceExhausted);
  const auto fits = large->Run({MlpInput(100000)}, {"Y"});
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  EXPECT_EQ((*fits)[0].shape, (std::vector<int64_t>{100000, 2}));
  ASSERT_TRUE(uncapped->Run({MlpInput(100000)}, {"Y"}).ok());

  EXPECT_EQ(small->memory_stats()->limit_bytes, kMiB);
  EXPECT_EQ(large->memory_stats()->limit_bytes, 64 * kMiB);
  EXPECT_GT(large->memory_stats()->peak_bytes, kMiB);  // it really held the big batch
  EXPECT_EQ(large->memory_stats()->out_of_memory_runs, 0u);
  // Without a cap the session's own arena is still measured; it has no limit.
  const auto free_stats = uncapped->memory_stats();
  ASSERT_TRUE(free_stats.has_value());
  EXPECT_FALSE(free_stats->limit_bytes.has_value());
  EXPECT_GT(free_stats->peak_bytes, kMiB);
}

TEST_F(OrtMemoryTest, ConcurrentMixedBatchesUnderACapEitherSucceedOrFailCleanly) {
  // Two capped instances under concurrent load of mixed sizes: small batches always fit and
  // are right, big ones fail with the out-of-memory error and nothing else, and no run
  // disturbs another instance's answers.
  auto a = Load(2 * kMiB);
  auto b = Load(2 * kMiB);
  ASSERT_TRUE(a && b);
  std::vector<std::thread> threads;
  std::vector<int> wrong(2, 0);
  for (int t = 0; t < 2; ++t) {
    backend::ModelInstance* instance = t == 0 ? a.get() : b.get();
    threads.emplace_back([instance, t, &wrong] {
      for (int i = 0; i < 40; ++i) {
        const int64_t rows = i % 4 == 3 ? 200000 : 1 + i;
        const auto out = instance->Run({MlpInput(rows)}, {"Y"});
        if (rows == 200000) {
          if (out.ok() || out.status().code() != StatusCode::kResourceExhausted) ++wrong[t];
        } else if (!out.ok() || (*out)[0].shape != std::vector<int64_t>{rows, 2}) {
          ++wrong[t];
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong, (std::vector<int>{0, 0}));
  EXPECT_EQ(a->memory_stats()->out_of_memory_runs, 10u);
  EXPECT_EQ(b->memory_stats()->out_of_memory_runs, 10u);
}

}  // namespace
}  // namespace fastpath::onnxruntime
