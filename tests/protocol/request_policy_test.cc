// CheckLoadParameters: Triton's load parameters decoded alike for both front ends, and
// every path that could leave the model's folder refused by name.
#include "fastpath/protocol/request_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fastpath::protocol {
namespace {

using ::testing::HasSubstr;

StatusOr<LoadOverride> Load(const Parameters& parameters,
                            FileEncoding encoding = FileEncoding::kBase64) {
  LoadOverride load;
  if (Status s = CheckLoadParameters(parameters, encoding, &load); !s.ok()) return s;
  return load;
}

std::string Error(const Parameters& parameters) {
  auto load = Load(parameters);
  EXPECT_EQ(load.status().code(), StatusCode::kInvalidArgument);
  return load.status().message();
}

TEST(CheckLoadParametersTest, NoneIsAnEmptyOverride) {
  auto load = Load({});
  ASSERT_TRUE(load.ok());
  EXPECT_TRUE(load->empty());
}

TEST(CheckLoadParametersTest, FilesAreDecodedAsTheFrontEndCarriesThem) {
  const Parameters base64 = {{"config", std::string("{}")},
                             {"file:1/model.onnx", std::string("AAH/")},
                             {"file:1/data/weights.bin", std::string("YWJj\nZA==")}};
  auto load = Load(base64);
  ASSERT_TRUE(load.ok()) << load.status().ToString();
  EXPECT_EQ(load->config_json, "{}");
  EXPECT_EQ(load->files,
            (std::map<std::string, std::string>{{"1/model.onnx", std::string("\0\x01\xff", 3)},
                                                {"1/data/weights.bin", "abcd"}}));
  auto raw = Load(base64, FileEncoding::kRaw);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->files.at("1/model.onnx"), "AAH/");
}

TEST(CheckLoadParametersTest, APathMustStayInTheModelsFolder) {
  for (const char* path :
       {"file:../x", "file:1/../../x", "file:./1/model.onnx", "file:1//m", "file:1/", "file:"}) {
    SCOPED_TRACE(path);
    EXPECT_THAT(Error({{"config", std::string("{}")}, {path, std::string("eA==")}}),
                HasSubstr(std::string("load parameter '") + path + "'"));
  }
  EXPECT_EQ(Error({{"config", std::string("{}")}, {"file:/etc/x", std::string("eA==")}}),
            "load parameter 'file:/etc/x': the path must be relative to the model's folder");
  EXPECT_EQ(Error({{"config", std::string("{}")}, {"file:config.pbtxt", std::string("eA==")}}),
            "load parameter 'file:config.pbtxt': give the configuration as the 'config' "
            "parameter (JSON), not as a file");
  EXPECT_THAT(Error({{"config", std::string("{}")}, {"file:1/\xff", std::string("eA==")}}),
              HasSubstr("the path is not UTF-8 text"));
  EXPECT_THAT(
      Error({{"config", std::string("{}")}, {std::string("file:1/a\0b", 11), std::string("eA==")}}),
      HasSubstr("the path holds a NUL byte"));
  // What a file system cannot take is the client's to fix (a 400), not a failed write.
  EXPECT_THAT(
      Error({{"config", std::string("{}")}, {"file:1/" + std::string(256, 'a'), std::string("")}}),
      HasSubstr("a name in the path is 256 bytes, more than a file system takes (255)"));
  std::string deep = "file:1";
  while (deep.size() < 1100) deep += "/" + std::string(100, 'd');
  EXPECT_THAT(Error({{"config", std::string("{}")}, {deep, std::string("")}}),
              HasSubstr("more than 1024"));
  // Dotted names are names.
  EXPECT_TRUE(Load({{"config", std::string("{}")}, {"file:1/.keep", std::string("")}}).ok());
}

TEST(CheckLoadParametersTest, AFileWhereAnotherNeedsAFolderIsRefused) {
  EXPECT_EQ(Error({{"config", std::string("{}")},
                   {"file:1/model.onnx", std::string("eA==")},
                   {"file:1/model.onnx.bak", std::string("eA==")},
                   {"file:1/model.onnx/x", std::string("eA==")}}),
            "load parameters 'file:1/model.onnx' and 'file:1/model.onnx/x' contradict each "
            "other: the first is a file, the second needs a folder there");
}

TEST(CheckLoadParametersTest, WhatIsMissingOrMistypedIsNamed) {
  EXPECT_EQ(Error({{"file:1/model.onnx", std::string("eA==")}}),
            "load parameter 'file:1/model.onnx' needs the 'config' parameter too: the files "
            "replace the model's folder, config.pbtxt included");
  EXPECT_EQ(Error({{"config", std::string("{}")}, {"file:1/model.onnx", std::string("e!==")}}),
            "load parameter 'file:1/model.onnx' is not base64");
  EXPECT_EQ(Error({{"config", true}}), "load parameter 'config' must be a string");
  EXPECT_EQ(Error({{"config", std::string("")}}), "load parameter 'config' is empty");
  EXPECT_EQ(Error({{"config", std::string("{}")}, {"file:1/model.onnx", int64_t{1}}}),
            "load parameter 'file:1/model.onnx' must be a string (the file's contents in base64)");
  EXPECT_EQ(Error({{"colour", true}}),
            "unknown load parameter 'colour'; a model load takes 'config' and 'file:<path>'");
}

}  // namespace
}  // namespace fastpath::protocol
