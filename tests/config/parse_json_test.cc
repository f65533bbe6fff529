// ParseModelConfigJson: a load request's config as JSON reads as config.pbtxt does, and
// what protobuf's JSON parser would let through silently is refused by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fastpath/config/model_config.h"

namespace fastpath::config {
namespace {

using ::testing::HasSubstr;

constexpr std::string_view kSource = "load parameter 'config'";

StatusOr<inference::ModelConfig> Parse(std::string_view json, ParseDetails* details = nullptr) {
  return ParseModelConfigJson(json, kSource, details);
}

std::string Error(std::string_view json) {
  auto parsed = Parse(json);
  EXPECT_FALSE(parsed.ok()) << json;
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << json;
  return parsed.status().message();
}

TEST(ParseModelConfigJsonTest, ReadsWhatConfigPbtxtSaysUnderEitherFieldName) {
  ParseDetails details;
  auto parsed = Parse(R"({
    "name": "simple",
    "maxBatchSize": 8,
    "input": [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [16]}],
    "output": [{"name": "OUTPUT0", "dataType": "TYPE_INT32", "dims": ["16"]}],
    "instance_group": [{"kind": "KIND_CPU", "count": 2}],
    "dynamic_batching": {"max_queue_delay_microseconds": "100"},
    "parameters": {"intra_op_thread_count": {"string_value": "1"}}
  })",
                      &details);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->name(), "simple");
  EXPECT_EQ(parsed->max_batch_size(), 8);
  EXPECT_TRUE(details.max_batch_size_set);
  ASSERT_EQ(parsed->output_size(), 1);
  EXPECT_EQ(parsed->output(0).data_type(), inference::TYPE_INT32);
  EXPECT_EQ(parsed->output(0).dims(0), 16);
  EXPECT_EQ(parsed->instance_group(0).count(), 2);
  EXPECT_EQ(parsed->dynamic_batching().max_queue_delay_microseconds(), 100u);
  EXPECT_EQ(parsed->parameters().at("intra_op_thread_count").string_value(), "1");
}

// proto3 cannot tell an explicit 0 from an absent field; the JSON can, as config.pbtxt.
TEST(ParseModelConfigJsonTest, AnExplicitZeroMaxBatchSizeIsSeen) {
  ParseDetails details;
  ASSERT_TRUE(Parse(R"({"max_batch_size": 0})", &details).ok());
  EXPECT_TRUE(details.max_batch_size_set);
  ASSERT_TRUE(Parse(R"({"name": "m"})", &details).ok());
  EXPECT_FALSE(details.max_batch_size_set);
  ASSERT_TRUE(Parse(R"({"max_batch_size": null})", &details).ok());
  EXPECT_FALSE(details.max_batch_size_set);
}

TEST(ParseModelConfigJsonTest, AFieldWrittenTwiceIsRefusedUnderEitherName) {
  EXPECT_EQ(Error(R"({"max_batch_size": 4, "maxBatchSize": 8})"),
            "load parameter 'config': field 'max_batch_size' is written twice");
  EXPECT_EQ(Error(R"({"input": [{"name": "a", "name": "b"}]})"),
            "load parameter 'config': field 'input[0].name' is written twice");
}

TEST(ParseModelConfigJsonTest, AMapKeyWrittenTwiceIsRefused) {
  EXPECT_EQ(Error(R"({"parameters": {"x": {"string_value": "1"}, "x": {"string_value": "2"}}})"),
            "load parameter 'config': key 'x' appears twice in 'parameters'");
}

// Integer keys as protobuf reads them: "1" and "01" are one key.
TEST(ParseModelConfigJsonTest, AnIntegerMapKeyWrittenTwiceInTwoSpellingsIsRefused) {
  EXPECT_EQ(Error(R"({"dynamic_batching": {"priority_queue_policy": {)"
                  R"("1": {"max_queue_size": 1}, "01": {"max_queue_size": 2}}}})"),
            "load parameter 'config': key '01' appears twice in 'dynamic_batching."
            "priority_queue_policy'");
  EXPECT_TRUE(Parse(R"({"dynamic_batching": {"priority_queue_policy": {)"
                    R"("1": {"max_queue_size": 1}, "10": {"max_queue_size": 2}}}})")
                  .ok());
}

// A document nested far deeper than any config is refused, never a stack overflow.
TEST(ParseModelConfigJsonTest, DeepNestingIsRefused) {
  constexpr int kDepth = 300000;
  EXPECT_EQ(Error(std::string(kDepth, '[') + std::string(kDepth, ']')),
            "load parameter 'config': not a JSON object");
  EXPECT_EQ(Error(R"({"input": [)" + std::string(kDepth, '[') + std::string(kDepth, ']') + "]}"),
            "load parameter 'config': 'input[0]' is a list in a list");
  std::string objects;
  for (int i = 0; i < kDepth / 10; ++i) objects += R"({"a":)";
  objects += "1" + std::string(kDepth / 10, '}');
  EXPECT_THAT(Error(R"({"input": [{"name": "x", "dims": [)" + objects + "]}]}"),
              HasSubstr("load parameter 'config': "));
}

// protobuf's parser would flatten it, and the element inside would escape the checks.
TEST(ParseModelConfigJsonTest, AListInAListIsRefused) {
  EXPECT_EQ(Error(R"({"input": [[{"name": "a", "name": "b"}]]})"),
            "load parameter 'config': 'input[0]' is a list in a list");
}

TEST(ParseModelConfigJsonTest, ProtobufsOwnErrorsReadWell) {
  const std::string message = Error(R"({"version_policy": {"latest": {}, "all": {}}})");
  EXPECT_THAT(message, ::testing::StartsWith("load parameter 'config': "));
  EXPECT_THAT(message, ::testing::Not(HasSubstr(": :"))) << message;
}

TEST(ParseModelConfigJsonTest, AnUnsupportedFieldIsNamedWithItsPath) {
  const std::string message = Error(R"({"sequence_batching": {}})");
  EXPECT_THAT(message, HasSubstr("load parameter 'config': unsupported field 'sequence_batching' "
                                 "in ModelConfig (fastpath supports: name, platform"));
  EXPECT_THAT(Error(R"({"instance_group": [{"kind": "KIND_CPU", "colour": 1}]})"),
              HasSubstr("unsupported field 'instance_group[0].colour' in ModelInstanceGroup"));
}

TEST(ParseModelConfigJsonTest, AnEnumNumberOutsideTheEnumIsRefused) {
  EXPECT_THAT(Error(R"({"instance_group": [{"kind": 7}]})"),
              HasSubstr("'instance_group[0].kind' is not a Kind (one of KIND_AUTO, KIND_GPU"));
  EXPECT_THAT(Error(R"({"input": [{"name": "a", "data_type": 1.5}]})"),
              HasSubstr("'input[0].data_type' is not a DataType"));
  // A known number is the value, as protobuf's mapping allows.
  auto parsed = Parse(R"({"instance_group": [{"kind": 2}]})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
}

TEST(ParseModelConfigJsonTest, WhatIsNotAConfigSaysWhy) {
  EXPECT_THAT(Error("max_batch_size: 8"), HasSubstr("load parameter 'config': not JSON: "));
  EXPECT_THAT(Error(R"({"max_batch_size": 8} {})"), HasSubstr("not JSON: "));
  EXPECT_EQ(Error("[1]"), "load parameter 'config': not a JSON object");
  EXPECT_THAT(Error(R"({"max_batch_size": "eight"})"), HasSubstr("load parameter 'config': "));
  EXPECT_THAT(Error(R"({"max_batch_size": 8.5})"), HasSubstr("max_batch_size"));
  EXPECT_THAT(Error("{\"name\": \"\xff\"}"), HasSubstr("not JSON: "));
  EXPECT_THAT(Error(std::string(5 << 20, ' ')), HasSubstr("bytes is more than a config may hold"));
}

}  // namespace
}  // namespace fastpath::config
