// The FP16 accuracy guard's config and comparison (accuracy_guard.h); the server's use of
// it, with real FP16 and FP32 models, is in tests/server/server_admission_test.cc.
#include "fastpath/admission/accuracy_guard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "fastpath/config/model_config.h"

namespace fastpath::admission {
namespace {

inference::ModelConfig Config(const std::string& parameters) {
  auto config = config::ParseModelConfig(parameters, "config.pbtxt");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config.ok() ? *config : inference::ModelConfig{};
}

std::string Param(const std::string& key, const std::string& value) {
  return "parameters { key: \"" + key + "\" value { string_value: \"" + value + "\" } }\n";
}

template <typename T>
Tensor Make(const std::string& name, DataType dtype, const std::vector<T>& values) {
  Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = {static_cast<int64_t>(values.size())};
  t.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
  return t;
}

TEST(AccuracyGuardTest, ParsesBothKeys) {
  auto none = ParseAccuracyGuard(Config(""));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  auto guard = ParseAccuracyGuard(Config(Param(kAccuracyReferenceModel, "model_fp32.onnx") +
                                         Param(kAccuracyTolerance, "1e-3")));
  ASSERT_TRUE(guard.ok()) << guard.status().ToString();
  ASSERT_TRUE(guard->has_value());
  EXPECT_EQ((*guard)->reference_model, "model_fp32.onnx");
  EXPECT_DOUBLE_EQ((*guard)->tolerance, 1e-3);
}

TEST(AccuracyGuardTest, MistakesNameTheKey) {
  const auto message = [](const std::string& parameters) {
    return ParseAccuracyGuard(Config(parameters)).status().message();
  };
  EXPECT_EQ(message(Param(kAccuracyTolerance, "0.01")),
            "parameters: 'fastpath.accuracy.tolerance' is set but "
            "'fastpath.accuracy.reference_model' is not; the accuracy guard needs both");
  EXPECT_EQ(message(Param(kAccuracyReferenceModel, "ref.onnx")),
            "parameters: 'fastpath.accuracy.reference_model' is set but "
            "'fastpath.accuracy.tolerance' is not; the accuracy guard needs both");
  EXPECT_EQ(message(Param(kAccuracyReferenceModel, "../2/model.onnx") +
                    Param(kAccuracyTolerance, "0.01")),
            "parameters: 'fastpath.accuracy.reference_model' is '../2/model.onnx'; it must be the "
            "name of a file in the version folder");
  for (const char* bad : {"", "-1", "abc", "inf", "1e-3x"}) {
    EXPECT_EQ(message(Param(kAccuracyReferenceModel, "ref.onnx") + Param(kAccuracyTolerance, bad)),
              std::string("parameters: 'fastpath.accuracy.tolerance' is '") + bad +
                  "'; it must be a number >= 0");
  }
  EXPECT_EQ(message(Param("fastpath.accuracy.tolerence", "0.1")),
            "parameters: unknown key 'fastpath.accuracy.tolerence'; the accuracy guard reads "
            "fastpath.accuracy.reference_model and fastpath.accuracy.tolerance");
}

TEST(AccuracyGuardTest, WorstElementWins) {
  const Tensor here = Make<float>("Y", DataType::kFp32, {1.0f, 2.0f, 3.5f, -1.0f});
  const Tensor reference = Make<float>("Y", DataType::kFp32, {1.0f, 2.25f, 3.0f, -1.0f});
  auto worst = WorstDeviation(here, reference);
  ASSERT_TRUE(worst.ok()) << worst.status().ToString();
  EXPECT_EQ(worst->output, "Y");
  EXPECT_EQ(worst->index, 2);
  EXPECT_DOUBLE_EQ(worst->value, 3.5);
  EXPECT_DOUBLE_EQ(worst->reference, 3.0);
  EXPECT_DOUBLE_EQ(worst->difference, 0.5);
  AccuracyGuard guard{"model_fp32.onnx", 0.125};
  EXPECT_EQ(DescribeMiss(*worst, guard),
            "output 'Y' element 2: 3.5 here, 3 from the FP32 reference 'model_fp32.onnx'; "
            "|difference| 0.5 > tolerance 0.125");
}

TEST(AccuracyGuardTest, Fp16AgainstFp32) {
  // 0x3c00 = 1.0, 0x3555 = 0.33325195, 0xc000 = -2.0 in IEEE half precision.
  const Tensor half = Make<uint16_t>("Y", DataType::kFp16, {0x3c00, 0x3555, 0xc000});
  const Tensor reference = Make<float>("Y", DataType::kFp32, {1.0f, 1.0f / 3, -2.0f});
  auto worst = WorstDeviation(half, reference);
  ASSERT_TRUE(worst.ok()) << worst.status().ToString();
  EXPECT_EQ(worst->index, 1);
  EXPECT_DOUBLE_EQ(worst->value, 0.333251953125);
  EXPECT_NEAR(worst->difference, 1.0 / 3 - 0.333251953125, 1e-7);
}

TEST(AccuracyGuardTest, NanAndMismatches) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto both_nan = WorstDeviation(Make<float>("Y", DataType::kFp32, {nan, 1.0f}),
                                 Make<float>("Y", DataType::kFp32, {nan, 1.0f}));
  ASSERT_TRUE(both_nan.ok());
  EXPECT_EQ(both_nan->difference, 0);
  auto one_nan = WorstDeviation(Make<float>("Y", DataType::kFp32, {1.0f, nan}),
                                Make<float>("Y", DataType::kFp32, {1.0f, 1.0f}));
  ASSERT_TRUE(one_nan.ok());
  EXPECT_EQ(one_nan->index, 1);
  EXPECT_TRUE(std::isinf(one_nan->difference));

  auto count = WorstDeviation(Make<float>("Y", DataType::kFp32, {1.0f}),
                              Make<float>("Y", DataType::kFp32, {1.0f, 2.0f}));
  EXPECT_EQ(count.status().message(), "output 'Y' has 1 elements but the reference's has 2");
  Tensor bytes;
  bytes.name = "S";
  bytes.dtype = DataType::kBytes;
  EXPECT_EQ(WorstDeviation(bytes, bytes).status().message(),
            "output 'S' has datatype BYTES, which the accuracy guard cannot compare");
}

}  // namespace
}  // namespace fastpath::admission
