// ParseModelConfig: Triton-style configs parse; anything the schema lacks is refused
// with its name and position.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fastpath/config/model_config.h"

namespace fastpath::config {
namespace {

using ::testing::HasSubstr;

// A config in the shape of Triton's documentation examples, using every supported field.
constexpr std::string_view kFullConfig = R"pb(
  # comments are allowed
  name: "resnet"
  platform: "onnxruntime_onnx"
  backend: "onnxruntime"
  max_batch_size: 8
  version_policy: { specific: { versions: [ 1, 3 ] } } input
  [ {
    name: "image"
    data_type: TYPE_FP32
    format: FORMAT_NCHW
    dims: [ 3, 224, 224 ]
  }
    , {
      name: "scale"
      data_type: TYPE_FP32
      dims: [ 1 ]
      reshape: { shape: [] }
      optional: true
    }] output
  [ {
    name: "probs"
    data_type: TYPE_FP32
    dims: [ 1000 ]
    label_filename: "labels.txt"
  }] instance_group
  [ { name: "cpu_group" kind: KIND_CPU count: 2 }
    , {
      kind: KIND_GPU
      count: 1
      gpus: [ 0, 1 ]
    }]
  dynamic_batching {
    preferred_batch_size: [ 4, 8 ]
    max_queue_delay_microseconds: 100
    preserve_ordering: false
    priority_levels: 2
    default_priority_level: 1
    default_queue_policy {
      timeout_action: DELAY
      default_timeout_microseconds: 1000
      max_queue_size: 16
    }
    priority_queue_policy {
      key: 2
      value: { max_queue_size: 4 }
    }
  }
  parameters {
    key: "intra_op_thread_count"
    value: { string_value: "4" }
  } parameters
  [ {
    key: "inter_op_thread_count"
    value: { string_value: "2" }
  }] model_warmup
  [ {
    name: "zeros"
    batch_size: 2
    inputs {
      key: "image"
      value: {
        data_type: TYPE_FP32
        dims: [ 3, 224, 224 ]
        zero_data: true
      }
    }
    count: 3
  }]
  default_model_filename: "model.onnx"
)pb";

TEST(ParseModelConfigTest, ParsesEverySupportedField) {
  auto parsed = ParseModelConfig(kFullConfig, "resnet/config.pbtxt");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const inference::ModelConfig& c = *parsed;
  EXPECT_EQ(c.name(), "resnet");
  EXPECT_EQ(c.platform(), "onnxruntime_onnx");
  EXPECT_EQ(c.backend(), "onnxruntime");
  EXPECT_EQ(c.max_batch_size(), 8);
  ASSERT_TRUE(c.version_policy().has_specific());
  EXPECT_THAT(c.version_policy().specific().versions(), ::testing::ElementsAre(1, 3));
  ASSERT_EQ(c.input_size(), 2);
  EXPECT_EQ(c.input(0).data_type(), inference::TYPE_FP32);
  EXPECT_EQ(c.input(0).format(), inference::ModelInput::FORMAT_NCHW);
  EXPECT_THAT(c.input(0).dims(), ::testing::ElementsAre(3, 224, 224));
  EXPECT_TRUE(c.input(1).has_reshape());
  EXPECT_EQ(c.input(1).reshape().shape_size(), 0);
  EXPECT_TRUE(c.input(1).optional());
  ASSERT_EQ(c.output_size(), 1);
  EXPECT_EQ(c.output(0).label_filename(), "labels.txt");
  ASSERT_EQ(c.instance_group_size(), 2);
  EXPECT_EQ(c.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(c.instance_group(0).count(), 2);
  EXPECT_THAT(c.instance_group(1).gpus(), ::testing::ElementsAre(0, 1));
  ASSERT_TRUE(c.has_dynamic_batching());
  EXPECT_THAT(c.dynamic_batching().preferred_batch_size(), ::testing::ElementsAre(4, 8));
  EXPECT_EQ(c.dynamic_batching().max_queue_delay_microseconds(), 100u);
  EXPECT_EQ(c.dynamic_batching().default_queue_policy().timeout_action(),
            inference::ModelQueuePolicy::DELAY);
  EXPECT_EQ(c.dynamic_batching().priority_queue_policy().at(2).max_queue_size(), 4u);
  EXPECT_EQ(c.parameters().at("intra_op_thread_count").string_value(), "4");
  EXPECT_EQ(c.parameters().at("inter_op_thread_count").string_value(), "2");
  ASSERT_EQ(c.model_warmup_size(), 1);
  EXPECT_EQ(c.model_warmup(0).batch_size(), 2u);
  EXPECT_TRUE(c.model_warmup(0).inputs().at("image").zero_data());
  EXPECT_EQ(c.default_model_filename(), "model.onnx");
  EXPECT_TRUE(ValidateModelConfig(c).ok()) << ValidateModelConfig(c).ToString();
}

TEST(ParseModelConfigTest, EmptyTextIsAnEmptyConfig) {
  auto parsed = ParseModelConfig("", "config.pbtxt");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->ByteSizeLong(), 0u);
}

TEST(ParseModelConfigTest, UnsupportedTopLevelFieldNamesFieldAndPosition) {
  auto parsed = ParseModelConfig("name: \"m\"\nmax_batch_size: 4\nsequence_batching { }\n",
                                 "config.pbtxt");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(),
              HasSubstr("config.pbtxt:3:1: unsupported field 'sequence_batching' in ModelConfig"));
  // It also says what is supported.
  EXPECT_THAT(parsed.status().message(), HasSubstr("dynamic_batching"));
}

TEST(ParseModelConfigTest, UnsupportedNestedFieldNamesFieldAndPosition) {
  auto parsed = ParseModelConfig(
      "input [\n  {\n    name: \"x\"\n    allow_ragged_batch: true\n  }\n]\n", "m/config.pbtxt");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(),
              HasSubstr("m/config.pbtxt:4:5: unsupported field 'allow_ragged_batch' in ModelInput"));
}

TEST(ParseModelConfigTest, OtherTritonFieldsAreRefusedNotIgnored) {
  for (const char* text : {"optimization { graph { level: 1 } }",
                           "ensemble_scheduling { step [ { model_namespace: \"n\" } ] }",
                           "response_cache { enable: true }", "instance_group [ { rate_limiter { } } ]",
                           "model_transaction_policy { decoupled: true }"}) {
    auto parsed = ParseModelConfig(text, "config.pbtxt");
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_THAT(parsed.status().message(), HasSubstr("unsupported field")) << text;
  }
}

TEST(ParseModelConfigTest, WrongTypesAreRefusedWithPosition) {
  struct Case {
    const char* text;
    const char* expect;
  };
  for (const Case& c : {
           Case{"max_batch_size: \"eight\"", "config.pbtxt:1:17"},
           Case{"max_batch_size: 1.5", "config.pbtxt:1:17"},
           Case{"max_batch_size: 99999999999", "config.pbtxt:1:17"},
           Case{"input { name: \"x\" data_type: TYPE_FLOAT }", "TYPE_FLOAT"},
           Case{"input { name: \"x\" data_type: 99 }", "99"},
           Case{"instance_group { kind: KIND_TPU }", "KIND_TPU"},
           Case{"input { name: \"x\" dims: [ a ] }", "config.pbtxt:1:27"},
           Case{"name: 7", "config.pbtxt:1:7"},
           Case{"name: \"m\"\ninput {", "config.pbtxt:2"},
       }) {
    auto parsed = ParseModelConfig(c.text, "config.pbtxt");
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.expect)) << c.text;
  }
}

TEST(ParseModelConfigTest, ScalarWrittenTwiceIsRefusedEvenWhenTheFirstIsTheDefault) {
  for (const char* text : {"max_batch_size: 0\nmax_batch_size: 8", "name: \"a\" name: \"b\""}) {
    auto parsed = ParseModelConfig(text, "config.pbtxt");
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_THAT(parsed.status().message(), HasSubstr("specified multiple times")) << text;
  }
}

TEST(ParseModelConfigTest, DuplicateMapKeysAreRefusedWithPosition) {
  auto parsed = ParseModelConfig(
      "parameters { key: \"a\" value: { string_value: \"1\" } }\n"
      "parameters { key: \"a\" value: { string_value: \"2\" } }\n",
      "config.pbtxt");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(),
              HasSubstr("config.pbtxt:2:1: key 'a' appears twice in 'parameters'"));

  auto warmup = ParseModelConfig(
      "model_warmup { batch_size: 1\n"
      "  inputs { key: \"x\" value: { zero_data: true } }\n"
      "  inputs { key: \"x\" value: { random_data: true } } }\n",
      "config.pbtxt");
  ASSERT_FALSE(warmup.ok());
  EXPECT_THAT(warmup.status().message(), HasSubstr("config.pbtxt:3:3: key 'x' appears twice"));

  auto priority = ParseModelConfig(
      "dynamic_batching { priority_queue_policy { key: 1 value: {} }\n"
      "priority_queue_policy { key: 1 value: {} } }",
      "config.pbtxt");
  ASSERT_FALSE(priority.ok());
  EXPECT_THAT(priority.status().message(), HasSubstr("key 1 appears twice"));
}

// A config's text ends up in JSON answers and Prometheus labels, which must be UTF-8.
TEST(ParseModelConfigTest, TextThatIsNotUtf8IsRefusedWithPosition) {
  auto name = ParseModelConfig("name: \"bad\xffname\"\n", "config.pbtxt");
  ASSERT_FALSE(name.ok());
  EXPECT_EQ(name.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(name.status().message(),
              HasSubstr("config.pbtxt:1:1: the value of 'name' is not valid UTF-8"));
  // Quoted back as valid UTF-8, the bad byte replaced.
  EXPECT_THAT(name.status().message(), HasSubstr("\"bad\xef\xbf\xbdname\""));

  // Nested, repeated, and a map's value: each at its own position.
  auto input = ParseModelConfig(
      "name: \"ok\"\n"
      "input [ { name: \"a\" data_type: TYPE_FP32 dims: [ 1 ] },\n"
      "        { name: \"b\\300\\200\" data_type: TYPE_FP32 dims: [ 1 ] } ]\n",
      "config.pbtxt");
  ASSERT_FALSE(input.ok());
  EXPECT_THAT(input.status().message(),
              HasSubstr("config.pbtxt:3:11: the value of 'name' is not valid UTF-8"));
  auto parameter = ParseModelConfig(
      "parameters { key: \"k\" value: { string_value: \"\\355\\240\\200\" } }\n", "config.pbtxt");
  ASSERT_FALSE(parameter.ok());
  EXPECT_THAT(parameter.status().message(), HasSubstr("the value of 'string_value' is not valid"));

  // Well-formed UTF-8 beyond ASCII is text like any other.
  auto fine =
      ParseModelConfig("name: \"r\xc3\xa9sum\xc3\xa9 \xe6\xa8\xa1\xe5\x9e\x8b\"\n", "config.pbtxt");
  ASSERT_TRUE(fine.ok()) << fine.status().message();
  EXPECT_EQ(fine->name(), "r\xc3\xa9sum\xc3\xa9 \xe6\xa8\xa1\xe5\x9e\x8b");
}

TEST(ParseModelConfigTest, ReportsWhetherMaxBatchSizeWasWritten) {
  ParseDetails details;
  ASSERT_TRUE(ParseModelConfig("max_batch_size: 0", "c", &details).ok());
  EXPECT_TRUE(details.max_batch_size_set);
  ASSERT_TRUE(ParseModelConfig("name: \"m\"", "c", &details).ok());
  EXPECT_FALSE(details.max_batch_size_set);
  ASSERT_TRUE(ParseModelConfig("max_batch_size: 3", "c", nullptr).ok());
}

TEST(ParseModelConfigTest, VersionPolicyChoices) {
  auto latest = ParseModelConfig("version_policy: { latest: { num_versions: 2 } }", "c");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->version_policy().latest().num_versions(), 2u);
  auto all = ParseModelConfig("version_policy: { all { } }", "c");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->version_policy().has_all());
  // A oneof written twice is an error, not "the last one wins".
  auto both = ParseModelConfig("version_policy: { all { } latest { } }", "c");
  EXPECT_FALSE(both.ok());
}

TEST(ParseModelConfigTest, OversizedTextIsRefusedCheaply) {
  const std::string text(5 << 20, ' ');
  auto parsed = ParseModelConfig(text, "config.pbtxt");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("config.pbtxt"));
}

}  // namespace
}  // namespace fastpath::config
