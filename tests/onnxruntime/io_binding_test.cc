// The staged (IoBinding) path of OrtModelInstance without a GPU: InputStaging::kHostMemory
// binds inputs from per-instance staging buffers and outputs to the staging memory through
// ORT's CPU allocator, the same code a GPU instance runs with the EP device's pinned
// memory. Its outputs must equal the direct path's, for growing and shrinking requests,
// several datatypes and BYTES (which stays a CPU value).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ort_environment.h"
#include "ort_instance.h"

namespace fastpath::onnxruntime {
namespace {

const std::filesystem::path kModels = FASTPATH_TEST_MODELS_DIR;

std::shared_ptr<OrtEnvironment> Env() {
  auto env = OrtEnvironment::Get(OrtBackendOptions{});
  EXPECT_TRUE(env.ok()) << env.status().ToString();
  return env.ok() ? *env : nullptr;
}

std::unique_ptr<OrtModelInstance> Make(const std::shared_ptr<OrtEnvironment>& env,
                                       const std::string& model, InputStaging staging) {
  backend::InstanceOptions cpu;
  auto instance = OrtModelInstance::Create(env, kModels / (model + ".onnx"), cpu, "test", staging);
  EXPECT_TRUE(instance.ok()) << instance.status().ToString();
  return instance.ok() ? std::move(instance).value() : nullptr;
}

Tensor Floats(const std::string& name, std::vector<int64_t> shape, float start) {
  Tensor t;
  t.name = name;
  t.dtype = DataType::kFp32;
  t.shape = std::move(shape);
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = start + 0.25f * static_cast<float>(i);
  t.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return t;
}

void ExpectSameOutputs(OrtModelInstance& staged, OrtModelInstance& direct,
                       const std::vector<Tensor>& inputs) {
  auto a = staged.Run(inputs, {});
  auto b = direct.Run(inputs, {});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].name, (*b)[i].name);
    EXPECT_EQ((*a)[i].dtype, (*b)[i].dtype);
    EXPECT_EQ((*a)[i].shape, (*b)[i].shape);
    EXPECT_EQ((*a)[i].data, (*b)[i].data) << (*a)[i].name;
  }
}

TEST(IoBindingTest, CpuInstancesTakeTheDirectPath) {
  auto env = Env();
  auto instance = Make(env, "mlp", InputStaging::kAuto);
  ASSERT_NE(instance, nullptr);
  EXPECT_FALSE(instance->staged());
  EXPECT_EQ(instance->staged_runs(), std::nullopt);  // "not staged", never a zero
}

TEST(IoBindingTest, StagedMlpMatchesDirectAsRequestsGrowAndShrink) {
  auto env = Env();
  auto staged = Make(env, "mlp", InputStaging::kHostMemory);
  auto direct = Make(env, "mlp", InputStaging::kAuto);
  ASSERT_NE(staged, nullptr);
  ASSERT_NE(direct, nullptr);
  EXPECT_TRUE(staged->staged());
  EXPECT_EQ(staged->staged_runs(), std::optional<uint64_t>(0));
  // Batch 2, then 5 (the staging buffer grows), then 1 (reused), then 5 again.
  for (int64_t batch : {2, 5, 1, 5}) {
    SCOPED_TRACE(batch);
    ExpectSameOutputs(*staged, *direct, {Floats("X", {batch, 4}, -1.0f + batch)});
  }
  // Requested outputs, in the order asked for, through the binding too.
  auto y = staged->Run({Floats("X", {3, 4}, 0.5f)}, {"Y"});
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  ASSERT_EQ(y->size(), 1u);
  EXPECT_EQ((*y)[0].name, "Y");
  EXPECT_EQ((*y)[0].shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(staged->staged_runs(), std::optional<uint64_t>(5));  // every run, counted
  EXPECT_EQ(direct->staged_runs(), std::nullopt);
}

TEST(IoBindingTest, StagedTwoInputsAndOtherDatatypes) {
  auto env = Env();
  {
    auto staged = Make(env, "simple_fp32", InputStaging::kHostMemory);
    auto direct = Make(env, "simple_fp32", InputStaging::kAuto);
    ASSERT_NE(staged, nullptr);
    ASSERT_NE(direct, nullptr);
    ExpectSameOutputs(*staged, *direct,
                      {Floats("INPUT1", {2, 16}, 3.0f), Floats("INPUT0", {2, 16}, -2.0f)});
  }
  {
    auto staged = Make(env, "identity_fp16", InputStaging::kHostMemory);
    auto direct = Make(env, "identity_fp16", InputStaging::kAuto);
    ASSERT_NE(staged, nullptr);
    Tensor half;
    half.name = "INPUT0";
    half.dtype = DataType::kFp16;
    half.shape = {1, 3};
    const uint16_t bits[] = {0x3c00, 0x3555, 0xc000};
    half.data.assign(reinterpret_cast<const char*>(bits), sizeof(bits));
    ExpectSameOutputs(*staged, *direct, {half});
  }
  {
    auto staged = Make(env, "identity_bytes", InputStaging::kHostMemory);
    auto direct = Make(env, "identity_bytes", InputStaging::kAuto);
    ASSERT_NE(staged, nullptr);
    Tensor bytes;
    bytes.name = "INPUT0";
    bytes.dtype = DataType::kBytes;
    bytes.shape = {1, 2};
    AppendBytesElement(&bytes.data, "fast");
    AppendBytesElement(&bytes.data, std::string("pa\0th", 5));
    ExpectSameOutputs(*staged, *direct, {bytes});
  }
}

TEST(IoBindingTest, StagedPathKeepsTheInputChecks) {
  auto env = Env();
  auto staged = Make(env, "mlp", InputStaging::kHostMemory);
  ASSERT_NE(staged, nullptr);
  auto wrong = staged->Run({Floats("X", {2, 3}, 0.0f)}, {});
  EXPECT_EQ(wrong.status().message(), "input 'X' has shape [2,3] but the model expects [-1,4]");
  // A later good request still runs.
  EXPECT_TRUE(staged->Run({Floats("X", {2, 4}, 0.0f)}, {}).ok());
}

}  // namespace
}  // namespace fastpath::onnxruntime
