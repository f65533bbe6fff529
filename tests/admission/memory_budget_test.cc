// The memory budget's arithmetic and its inputs: the margin parameter, the measured request
// at max_batch_size, and the budget and per-element estimate from arena statistics.
#include "fastpath/admission/memory_budget.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <google/protobuf/text_format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace fastpath::admission {
namespace {

using ::testing::HasSubstr;

inference::ModelConfig Config(const std::string& text) {
  inference::ModelConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &config)) << text;
  return config;
}

TEST(MemoryBudgetTest, MarginDefaultsTo15PercentAndRefusesWhatIsNotANumberInRange) {
  EXPECT_DOUBLE_EQ(MemoryMarginFor(inference::ModelConfig()).value(), 0.15);
  inference::ModelConfig config;
  auto& value = (*config.mutable_parameters())["fastpath.memory.margin"];
  value.set_string_value("0.5");
  EXPECT_DOUBLE_EQ(MemoryMarginFor(config).value(), 0.5);
  value.set_string_value("0");
  EXPECT_DOUBLE_EQ(MemoryMarginFor(config).value(), 0.0);
  for (const char* bad : {"", "-0.1", "11", "15%", "nan", "0.2x"}) {
    value.set_string_value(bad);
    const auto margin = MemoryMarginFor(config);
    ASSERT_FALSE(margin.ok()) << bad;
    EXPECT_THAT(margin.status().message(),
                HasSubstr(std::string("'fastpath.memory.margin' is '") + bad + "'"));
  }
}

TEST(MemoryBudgetTest, TheMeasuredRequestIsAtMaxBatchSizeOrSaysWhyThereIsNone) {
  std::string why;
  const auto fixed = MakeMemoryBudgetRequest(Config(R"(
name: "m" max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
)"),
                                             "", &why);
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  ASSERT_TRUE(fixed->has_value());
  ASSERT_EQ((*fixed)->inputs.size(), 1u);
  EXPECT_EQ((*fixed)->inputs[0].shape, (std::vector<int64_t>{8, 4}));
  EXPECT_EQ((*fixed)->inputs[0].data.size(), 8u * 4 * 4);

  const auto unbatched = MakeMemoryBudgetRequest(Config(R"(
name: "m"
input [ { name: "X" data_type: TYPE_INT32 dims: [ 3, 2 ] } ]
)"),
                                                 "", &why);
  ASSERT_TRUE(unbatched.ok() && unbatched->has_value());
  EXPECT_EQ((*unbatched)->inputs[0].shape, (std::vector<int64_t>{3, 2}));

  const auto dynamic = MakeMemoryBudgetRequest(Config(R"(
name: "m" max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
)"),
                                               "", &why);
  ASSERT_TRUE(dynamic.ok());
  EXPECT_FALSE(dynamic->has_value());
  EXPECT_THAT(why, HasSubstr("declare one at the largest shape"));

  // A model_warmup makes the dynamic dim concrete: its shape, at max_batch_size rows.
  const auto warmed = MakeMemoryBudgetRequest(Config(R"(
name: "m" max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
model_warmup [ { name: "w" batch_size: 1 inputs { key: "X" value {
  data_type: TYPE_FP32 dims: [ 100 ] random_data: true } } } ]
)"),
                                              "", &why);
  ASSERT_TRUE(warmed.ok()) << warmed.status().ToString();
  ASSERT_TRUE(warmed->has_value());
  EXPECT_EQ((*warmed)->inputs[0].shape, (std::vector<int64_t>{8, 100}));
}

TEST(MemoryBudgetTest, BudgetIsThePeakWithItsMarginAndTheEstimateIsLinearInElements) {
  backend::MemoryStats before;
  before.device = "cpu";
  before.in_use_bytes = 1000;  // the weights
  before.peak_bytes = 1200;
  backend::MemoryStats after = before;
  after.peak_bytes = 9000;  // the batch's activations: 8000 bytes
  after.limit_bytes = 10000;
  InferRequest request;
  request.inputs.push_back({"X", DataType::kFp32, {8, 100}, std::string(3200, '\0')});
  const MemoryBudget b = ComputeMemoryBudget(before, after, request, 8, 0.15, 1500);
  EXPECT_EQ(b.device, "cpu");
  EXPECT_EQ(b.weights_bytes, 1500u);  // the files: 500 bytes of them live outside the arena
  EXPECT_EQ(b.at_rest_bytes, 1000u);
  EXPECT_EQ(b.instance_bytes(), 10850u);
  EXPECT_EQ(b.peak_bytes, 9000u);
  EXPECT_EQ(b.budget_bytes, 10350u);  // 9000 × 1.15
  EXPECT_EQ(b.input_elements, 800u);
  EXPECT_DOUBLE_EQ(b.bytes_per_input_element, 10.0);
  EXPECT_FALSE(b.fits_limit());  // 10350 > 10000
  EXPECT_EQ(b.EstimateBytes(400), 5000u);    // half the batch
  EXPECT_EQ(b.EstimateBytes(1600), 17000u);  // twice
  EXPECT_EQ(DescribeBudget(b),
            "weights 1.5 KiB, arena at rest 1000 B, peak 8.8 KiB at batch 8, budget 10.1 KiB "
            "(margin 15%), limit 9.8 KiB");

  after.limit_bytes = 20000;
  MemoryBudget within = ComputeMemoryBudget(before, after, request, 8, 0.15, 1000);
  EXPECT_TRUE(within.fits());
  // Three instances of it on a device of 30000 bytes do not fit together.
  within.instances = 3;
  within.device_total_bytes = 30000;
  EXPECT_TRUE(within.fits_limit());
  EXPECT_FALSE(within.fits_device());
  EXPECT_FALSE(within.fits());
  EXPECT_THAT(DescribeBudget(within), HasSubstr("; 3 instances need 30.3 KiB of the device's "
                                                "29.3 KiB"));
  EXPECT_EQ(within.instances_bytes(), 3u * 10350);  // the weights all live in the arena
  after.limit_bytes.reset();
  EXPECT_TRUE(ComputeMemoryBudget(before, after, request, 8, 0.15, 1000).fits_limit());
}

// A measurement that ran out of memory is no budget: nothing of it reads as one (the JSON
// said budget_bytes 5 and the device total "needs 101 B", fits).
TEST(MemoryBudgetTest, AMeasurementThatRanOutOfMemoryClaimsNoBudget) {
  MemoryBudget b;
  b.device = "cpu";
  b.peak_bytes = 4;
  b.budget_bytes = 5;
  b.rows = 8;
  b.instances = 1;
  b.device_total_bytes = uint64_t{1} << 30;
  b.limit_bytes = 8u << 20;
  b.ran_out_of_memory = true;
  EXPECT_FALSE(b.fits_limit());
  EXPECT_FALSE(b.fits_device());
  const std::string json = MemoryBudgetToJson(b);
  EXPECT_THAT(json, HasSubstr(R"("budget_bytes":null)"));
  EXPECT_THAT(json, HasSubstr(R"("bytes_per_input_element":null)"));
  EXPECT_THAT(json, HasSubstr(R"("fits_device":false)"));
  const std::string text = DescribeBudget(b);
  EXPECT_THAT(text, HasSubstr("budget unknown"));
  EXPECT_THAT(text, HasSubstr("what its instances need of the device's 1.0 GiB is unknown"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("instance needs")));
}

TEST(MemoryBudgetTest, FragmentationIsTheShareOfTheArenaNotHeldByLiveTensors) {
  backend::MemoryStats stats;
  EXPECT_EQ(FragmentationRatio(stats), 0.0);  // an empty arena
  stats.reserved_bytes = 1000;
  stats.in_use_bytes = 250;
  EXPECT_DOUBLE_EQ(FragmentationRatio(stats), 0.75);
  stats.in_use_bytes = 1000;
  EXPECT_EQ(FragmentationRatio(stats), 0.0);
}

TEST(MemoryBudgetTest, BytesReadInBinaryUnits) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(uint64_t{3} << 30), "3.0 GiB");
}

}  // namespace
}  // namespace fastpath::admission

namespace fastpath::admission {
namespace {

TEST(MemoryBudgetTest, WeightsAreTheVersionFolderButTheAccuracyReference) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fastpath_files_bytes_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "data");
  const auto write = [](const std::filesystem::path& file, size_t bytes) {
    std::ofstream(file, std::ios::binary) << std::string(bytes, 'x');
  };
  write(dir / "model.onnx", 1000);
  write(dir / "data" / "weights.bin", 500);  // external data, in a subfolder
  write(dir / "model_fp32.onnx", 4000);      // the FP32 twin the accuracy guard runs
  EXPECT_EQ(FilesBytes(dir), 5500u);
  EXPECT_EQ(FilesBytes(dir, "model_fp32.onnx"), 1500u);
  EXPECT_EQ(FilesBytes(dir / "absent"), 0u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fastpath::admission
