// A model's external data is read into memory and handed to ORT, which copies it: a weights
// file rewritten or truncated under a loaded model changes nothing (before, ORT's mapping of
// the file changed the answers, or killed the process with SIGBUS). The locations come from
// a walk of the model's protobuf; a file outside the model's folder, or missing, is named.
#include "external_data.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "fastpath/common/tensor.h"
#include "fastpath/onnxruntime/ort_backend.h"

namespace fastpath::onnxruntime {
namespace {

using ::testing::HasSubstr;

const std::filesystem::path kModels = FASTPATH_TEST_MODELS_DIR;
constexpr int64_t kCount = 1 << 18;  // external_weights' W: 0, 1, 2, ...

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteFile(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

class ExternalDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = std::filesystem::temp_directory_path() /
              ("fastpath_external_data_" + std::to_string(::getpid()) + "_" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(folder_);
    std::filesystem::create_directories(folder_);
    model_ = folder_ / "model.onnx";
    data_ = folder_ / "external_weights.bin";
    std::filesystem::copy_file(kModels / "external_weights.onnx", model_);
    std::filesystem::copy_file(kModels / "external_weights.bin", data_);
    auto backend = CreateOrtBackend();
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    backend_ = std::move(backend).value();
  }
  void TearDown() override { std::filesystem::remove_all(folder_); }

  // Y = X + W with X = 0: W itself, checked against 0, 1, 2, ...
  void ExpectWeightsAreTheLoadedOnes(backend::ModelInstance& instance) {
    Tensor x{"X", DataType::kFp32, {1, kCount}, std::string(kCount * sizeof(float), '\0')};
    auto outputs = instance.Run({x}, {"Y"});
    ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
    ASSERT_EQ((*outputs)[0].data.size(), kCount * sizeof(float));
    std::vector<float> y(kCount);
    std::memcpy(y.data(), (*outputs)[0].data.data(), (*outputs)[0].data.size());
    for (int64_t i = 0; i < kCount; i += 4099) ASSERT_EQ(y[i], static_cast<float>(i)) << i;
    EXPECT_EQ(y[kCount - 1], static_cast<float>(kCount - 1));
  }

  std::filesystem::path folder_, model_, data_;
  std::unique_ptr<backend::Backend> backend_;
};

TEST_F(ExternalDataTest, TheModelsLocationsAreFoundInItsProtobuf) {
  auto locations = ExternalDataLocations(ReadFile(model_));
  ASSERT_TRUE(locations.ok()) << locations.status().ToString();
  EXPECT_EQ(*locations, std::vector<std::string>{"external_weights.bin"});
  auto none = ExternalDataLocations(ReadFile(kModels / "simple.onnx"));
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());
  // Cut inside a field: not a protobuf.
  const std::string model = ReadFile(model_);
  auto cut = ExternalDataLocations(std::string_view(model).substr(0, model.size() - 7));
  ASSERT_FALSE(cut.ok());
  EXPECT_THAT(cut.status().message(), HasSubstr("not a well-formed ONNX protobuf"));
}

TEST_F(ExternalDataTest, AWeightsFileRewrittenOrTruncatedUnderALoadedModelChangesNothing) {
  auto instance = backend_->CreateInstance(model_, {});
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  ExpectWeightsAreTheLoadedOnes(**instance);

  std::string other(kCount * sizeof(float), '\0');
  const float seven = 7.0f;
  for (int64_t i = 0; i < kCount; ++i) std::memcpy(other.data() + i * sizeof(float), &seven, 4);
  WriteFile(data_, other);  // in place, as cp does
  ExpectWeightsAreTheLoadedOnes(**instance);
  WriteFile(data_, "");  // truncated: ORT's mapping of it was a SIGBUS here
  ExpectWeightsAreTheLoadedOnes(**instance);
}

TEST_F(ExternalDataTest, AMissingOrOutsideFileIsNamed) {
  std::filesystem::remove(data_);
  auto missing = backend_->CreateInstance(model_, {});
  ASSERT_FALSE(missing.ok());  // the model alone in its folder: ORT's own check names it
  EXPECT_THAT(missing.status().message(), HasSubstr("external_weights.bin"));
  EXPECT_THAT(missing.status().message(), HasSubstr("does not exist"));
  WriteFile(folder_ / "README", "a file beside the model: the model is read for its locations");
  auto still_missing = backend_->CreateInstance(model_, {});
  ASSERT_FALSE(still_missing.ok());
  EXPECT_THAT(still_missing.status().message(),
              HasSubstr("external data file 'external_weights.bin' named by model"));
  EXPECT_THAT(still_missing.status().message(), HasSubstr("is missing"));

  // The file a symlink beside the model points to, outside its folder.
  const std::filesystem::path elsewhere = folder_.string() + "_elsewhere.bin";
  std::filesystem::copy_file(kModels / "external_weights.bin", elsewhere,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::create_symlink(elsewhere, data_);
  auto outside = backend_->CreateInstance(model_, {});
  std::filesystem::remove(elsewhere);
  ASSERT_FALSE(outside.ok());
  EXPECT_THAT(outside.status().message(), HasSubstr("is outside the model's folder"));
}

}  // namespace
}  // namespace fastpath::onnxruntime
