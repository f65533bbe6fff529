// ValidateModelConfig: one test per rule, each on a config that is valid but for the
// one thing the test breaks.
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

// Valid: batching MLP on the CPU.
constexpr std::string_view kBase = R"pb(
  name: "mlp"
  max_batch_size: 8
  input {
    name: "x"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
  output {
    name: "y"
    data_type: TYPE_FP32
    dims: [ 3 ]
  }
  instance_group { kind: KIND_CPU count: 1 }
)pb";

// Both validations on kBase with `extra` appended: on a config that lacks nothing the
// model could supply they must agree. Returns the status.
Status ValidateWith(std::string_view extra) {
  const inference::ModelConfig c = Parse(std::string(kBase) + std::string(extra));
  const Status written = ValidateModelConfig(c);
  const Status completed = ValidateCompletedModelConfig(c);
  EXPECT_EQ(written, completed) << extra;
  return completed;
}

// For rules that only hold once completion has filled what the model supplies.
Status ValidateCompletedWith(std::string_view extra) {
  return ValidateCompletedModelConfig(Parse(std::string(kBase) + std::string(extra)));
}

void ExpectInvalid(const Status& status, const std::string& substring) {
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  EXPECT_THAT(status.message(), HasSubstr(substring));
}

TEST(ValidateModelConfigTest, BaseIsValid) { EXPECT_TRUE(ValidateWith("").ok()); }

TEST(ValidateModelConfigTest, EmptyConfigIsValid) {
  EXPECT_TRUE(ValidateModelConfig(inference::ModelConfig()).ok());
}

TEST(ValidateModelConfigTest, Name) {
  inference::ModelConfig c = Parse(kBase);
  c.set_name("a/b");
  ExpectInvalid(ValidateModelConfig(c), "name 'a/b'");
  c.set_name("..");
  EXPECT_FALSE(ValidateModelConfig(c).ok());
  c.set_name("");  // the caller fills it from the folder
  EXPECT_TRUE(ValidateModelConfig(c).ok());
}

TEST(ValidateModelConfigTest, PlatformAndBackend) {
  EXPECT_TRUE(ValidateWith("platform: \"onnxruntime_onnx\" backend: \"onnxruntime\"").ok());
  ExpectInvalid(ValidateWith("platform: \"tensorrt_plan\""), "platform 'tensorrt_plan'");
  ExpectInvalid(ValidateWith("backend: \"python\""), "backend 'python'");
}

TEST(ValidateModelConfigTest, MaxBatchSizeNotNegative) {
  inference::ModelConfig c = Parse(kBase);
  c.set_max_batch_size(-1);
  ExpectInvalid(ValidateModelConfig(c), "max_batch_size -1");
}

TEST(ValidateModelConfigTest, Dims) {
  inference::ModelConfig c = Parse(kBase);
  c.mutable_input(0)->set_dims(0, -2);
  ExpectInvalid(ValidateModelConfig(c), "input 'x': dims [-2] has -2 at index 0");
  c.mutable_input(0)->clear_dims();
  ExpectInvalid(ValidateCompletedModelConfig(c), "input 'x': dims must not be empty");
  EXPECT_TRUE(ValidateModelConfig(c).ok());             // completion fills dims from the model
  c.mutable_input(0)->mutable_reshape()->add_shape(4);  // ... but not when reshape is written
  ExpectInvalid(ValidateModelConfig(c), "input 'x': dims must not be empty");
  c = Parse(kBase);
  c.mutable_output(0)->add_dims(-7);
  ExpectInvalid(ValidateModelConfig(c), "output 'y': dims [3,-7]");
  c = Parse(kBase);
  for (int i = 0; i < 4; ++i) c.mutable_input(0)->add_dims(1000000000);
  ExpectInvalid(ValidateModelConfig(c), "more than 2^63 elements");
  c = Parse(kBase);
  c.mutable_input(0)->set_dims(0, 0);  // an empty tensor is legal
  EXPECT_TRUE(ValidateModelConfig(c).ok());
}

TEST(ValidateModelConfigTest, NamesUniqueAndNonEmpty) {
  ExpectInvalid(ValidateWith("input { name: \"x\" data_type: TYPE_FP32 dims: [ 1 ] }"),
                "input 'x' is listed twice");
  ExpectInvalid(ValidateWith("output { name: \"y\" data_type: TYPE_FP32 dims: [ 1 ] }"),
                "output 'y' is listed twice");
  ExpectInvalid(ValidateWith("input { data_type: TYPE_FP32 dims: [ 1 ] }"),
                "input[1]: name is empty");
  ExpectInvalid(ValidateWith("output { data_type: TYPE_FP32 dims: [ 1 ] }"),
                "output[1]: name is empty");
}

TEST(ValidateModelConfigTest, DataTypeSet) {
  ExpectInvalid(ValidateCompletedWith("input { name: \"z\" dims: [ 1 ] }"),
                "input 'z': data_type TYPE_INVALID");
  // Before completion an unwritten data_type (and dims) is left for the model to supply.
  EXPECT_TRUE(ValidateModelConfig(Parse("input { name: \"z\" }")).ok());
  inference::ModelConfig c = Parse(kBase);
  c.mutable_output(0)->set_data_type(static_cast<inference::DataType>(77));
  ExpectInvalid(ValidateModelConfig(c), "output 'y': data_type 77");
}

TEST(ValidateModelConfigTest, Reshape) {
  EXPECT_TRUE(
      ValidateWith(
          "input { name: \"img\" data_type: TYPE_UINT8 dims: [ 12 ] reshape { shape: [ 3, 4 ] } }")
          .ok());
  EXPECT_TRUE(
      ValidateWith("input { name: \"s\" data_type: TYPE_FP32 dims: [ 1 ] reshape { } }").ok());
  EXPECT_TRUE(ValidateWith("input { name: \"v\" data_type: TYPE_FP32 dims: [ -1, 6 ] reshape { "
                           "shape: [ 2, -1, 3 ] } }")
                  .ok());
  ExpectInvalid(
      ValidateWith(
          "input { name: \"img\" data_type: TYPE_UINT8 dims: [ 12 ] reshape { shape: [ 3, 5 ] } }"),
      "input 'img': reshape shape [3,5] does not hold the same elements as dims [12]");
  ExpectInvalid(
      ValidateWith(
          "input { name: \"v\" data_type: TYPE_FP32 dims: [ -1, 6 ] reshape { shape: [ 6 ] } }"),
      "reshape shape [6]");
  ExpectInvalid(
      ValidateWith(
          "output { name: \"o\" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 2, -3 ] } }"),
      "output 'o': reshape shape [2,-3] has -3");
}

TEST(ValidateModelConfigTest, InputFormatNeedsThreeDims) {
  ExpectInvalid(
      ValidateWith("input { name: \"i\" data_type: TYPE_FP32 format: FORMAT_NHWC dims: [ 4, 4 ] }"),
      "format FORMAT_NHWC needs 3 dims");
}

TEST(ValidateModelConfigTest, FileNamesStayInsideTheModelFolder) {
  ExpectInvalid(ValidateWith("default_model_filename: \"../../etc/passwd\""),
                "default_model_filename");
  inference::ModelConfig c = Parse(kBase);
  c.mutable_output(0)->set_label_filename("/etc/labels");
  ExpectInvalid(ValidateModelConfig(c), "label_filename");
}

TEST(ValidateModelConfigTest, InstanceGroupKinds) {
  inference::ModelConfig c = Parse(kBase);
  c.mutable_instance_group(0)->set_kind(inference::ModelInstanceGroup::KIND_AUTO);
  ExpectInvalid(ValidateModelConfig(c), "KIND_AUTO");
  EXPECT_THAT(ValidateModelConfig(c).message(), HasSubstr("never picks CPU or GPU"));
  c.mutable_instance_group(0)->set_kind(inference::ModelInstanceGroup::KIND_MODEL);
  ExpectInvalid(ValidateModelConfig(c), "KIND_MODEL is not supported");
  c.mutable_instance_group(0)->set_kind(static_cast<inference::ModelInstanceGroup::Kind>(9));
  ExpectInvalid(ValidateModelConfig(c), "kind 9");
  // Kind not written is KIND_AUTO, refused.
  c = Parse("instance_group { count: 2 }");
  ExpectInvalid(ValidateModelConfig(c), "instance_group[0]: kind is KIND_AUTO");
}

TEST(ValidateModelConfigTest, InstanceGroupCount) {
  inference::ModelConfig c = Parse(kBase);
  c.mutable_instance_group(0)->set_count(0);  // means the default, 1
  EXPECT_TRUE(ValidateModelConfig(c).ok());
  c.mutable_instance_group(0)->set_count(-1);
  ExpectInvalid(ValidateModelConfig(c), "count -1");
  c.mutable_instance_group(0)->set_count(kMaxInstanceCount + 1);
  EXPECT_FALSE(ValidateModelConfig(c).ok());
}

TEST(ValidateModelConfigTest, GpusOnlyWithKindGpu) {
  inference::ModelConfig c = Parse(kBase);
  c.mutable_instance_group(0)->add_gpus(0);
  ExpectInvalid(ValidateModelConfig(c), "gpus are only allowed with kind: KIND_GPU");
  c.mutable_instance_group(0)->set_kind(inference::ModelInstanceGroup::KIND_GPU);
  EXPECT_TRUE(ValidateModelConfig(c).ok());
  c.mutable_instance_group(0)->add_gpus(0);
  ExpectInvalid(ValidateModelConfig(c), "GPU 0 twice");
  c.mutable_instance_group(0)->set_gpus(1, -1);
  ExpectInvalid(ValidateModelConfig(c), "gpus lists -1");
}

TEST(ValidateModelConfigTest, DynamicBatching) {
  EXPECT_TRUE(ValidateWith("dynamic_batching { preferred_batch_size: [ 2, 8 ] }").ok());
  ExpectInvalid(ValidateWith("dynamic_batching { preferred_batch_size: [ 16 ] }"),
                "preferred_batch_size 16 must be between 1 and max_batch_size 8");
  ExpectInvalid(ValidateWith("dynamic_batching { preferred_batch_size: [ 0 ] }"),
                "preferred_batch_size 0");
  ExpectInvalid(ValidateWith("dynamic_batching { preferred_batch_size: [ 2, 2 ] }"), "twice");
  inference::ModelConfig c = Parse(std::string(kBase) + "dynamic_batching { }");
  c.set_max_batch_size(0);
  ExpectInvalid(ValidateCompletedModelConfig(c), "dynamic_batching requires max_batch_size > 0");
  EXPECT_TRUE(ValidateModelConfig(c).ok());  // completion may still infer max_batch_size
  ExpectInvalid(ValidateWith("dynamic_batching { default_priority_level: 1 }"),
                "need priority_levels > 0");
  ExpectInvalid(ValidateWith("dynamic_batching { priority_levels: 2 default_priority_level: 3 }"),
                "default_priority_level 3");
  ExpectInvalid(ValidateWith("dynamic_batching { priority_levels: 2 default_priority_level: 1 "
                             "priority_queue_policy { key: 5 value: { } } }"),
                "priority_queue_policy key 5");
  ExpectInvalid(ValidateWith("dynamic_batching { priority_levels: 1000000 "
                             "default_priority_level: 1 }"),
                "priority_levels 1000000 is more than 1024");
  // As Triton: answers in arrival order leave no room for priorities or delayed requests.
  EXPECT_TRUE(ValidateWith("dynamic_batching { preserve_ordering: true priority_levels: 1 "
                           "default_priority_level: 1 }")
                  .ok());
  ExpectInvalid(ValidateWith("dynamic_batching { preserve_ordering: true priority_levels: 2 "
                             "default_priority_level: 1 }"),
                "preserve_ordering allows one priority level");
  ExpectInvalid(ValidateWith("dynamic_batching { preserve_ordering: true default_queue_policy { "
                             "timeout_action: DELAY default_timeout_microseconds: 100 } }"),
                "timeout_action DELAY (default_queue_policy)");
  EXPECT_TRUE(ValidateWith("dynamic_batching { preserve_ordering: true default_queue_policy { "
                           "timeout_action: DELAY } }")
                  .ok());  // no timeout: nothing is ever delayed
}

TEST(ValidateModelConfigTest, VersionPolicy) {
  EXPECT_TRUE(ValidateWith("version_policy { latest { num_versions: 2 } }").ok());
  EXPECT_TRUE(ValidateWith("version_policy { all { } }").ok());
  ExpectInvalid(ValidateWith("version_policy { latest { } }"), "num_versions } must be >= 1");
  ExpectInvalid(ValidateWith("version_policy { specific { } }"), "lists no version");
  ExpectInvalid(ValidateWith("version_policy { specific { versions: [ -3 ] } }"),
                "specific version -3");
}

TEST(ValidateModelConfigTest, AnUnknownFastpathParameterIsRefusedNamingTheKnownOnes) {
  // Every key some module reads passes (values are each module's to check).
  for (const std::string& key : KnownFastpathParameters()) {
    const std::string value = key == "fastpath.allow_cpu_ops"        ? "Shape"
                              : key == "fastpath.memory.limit_bytes" ? "64Mi"
                                                                     : "1";
    const std::string text =
        "parameters { key: \"" + key + "\" value { string_value: \"" + value + "\" } }";
    EXPECT_TRUE(ValidateWith(text).ok()) << key;
  }
  // A misspelling, and a key no module reads yet, are errors at load, not silence.
  for (const char* key : {"fastpath.slo.p95", "fastpath.memory.limit", "fastpath."}) {
    const std::string text =
        std::string("parameters { key: \"") + key + "\" value { string_value: \"1\" } }";
    const Status s = ValidateWith(text);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << key;
    EXPECT_THAT(s.message(), HasSubstr(std::string("'") + key + "' is not a fastpath parameter"));
    EXPECT_THAT(s.message(), HasSubstr("fastpath.slo.p95_ms"));
    EXPECT_THAT(s.message(), HasSubstr("fastpath.allow_cpu_ops"));
  }
  // Keys outside the namespace are Triton's or the backend's: not ours to refuse.
  EXPECT_TRUE(ValidateWith("parameters { key: \"fastpathish\" value { string_value: \"1\" } }").ok());
}

TEST(ValidateModelConfigTest, MemoryLimitTakesBytesOrABinarySuffixAndRefusesTheRestNamingIt) {
  const auto limit = [](const std::string& value) {
    inference::ModelConfig config;
    (*config.mutable_parameters())["fastpath.memory.limit_bytes"].set_string_value(value);
    return MemoryLimitFor(config);
  };
  EXPECT_EQ(*limit("1048576").value(), 1048576u);
  EXPECT_EQ(*limit("256Mi").value(), 256u << 20);
  EXPECT_EQ(*limit("2Gi").value(), uint64_t{2} << 30);
  EXPECT_FALSE(MemoryLimitFor(inference::ModelConfig()).value().has_value());
  for (const char* bad : {"", "-1", "1.5Gi", "12MB", "Mi", "100", "99999999999999999999",
                          "9000000Ti"}) {
    const auto s = limit(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.status().message(),
                HasSubstr(std::string("'fastpath.memory.limit_bytes' is '") + bad + "'"));
  }
  // A TensorRT model cannot be capped: its allocator takes no limit, and a cap shown but not
  // enforced would mislead.
  EXPECT_THAT(ValidateWith("optimization { execution_accelerators { gpu_execution_accelerator "
                           "[ { name: \"tensorrt\" } ] } } parameters { key: "
                           "\"fastpath.memory.limit_bytes\" value { string_value: \"1Gi\" } }")
                  .message(),
              HasSubstr("cannot cap a model that lists the tensorrt accelerator"));
  // ValidateModelConfig checks it too, so a typo fails the load, not the first run.
  EXPECT_EQ(ValidateWith("parameters { key: \"fastpath.memory.limit_bytes\" value { "
                         "string_value: \"lots\" } }")
                .code(),
            StatusCode::kInvalidArgument);
}

TEST(ValidateModelConfigTest, ThreadParameters) {
  EXPECT_TRUE(
      ValidateWith("parameters { key: \"intra_op_thread_count\" value { string_value: \"8\" } }"
                   "parameters { key: \"some_other_key\" value { string_value: \"x\" } }")
          .ok());
  for (const char* bad : {"0", "-1", "abc", "", "1.5", " 2", "999999999999", "2048"}) {
    const std::string text =
        std::string("parameters { key: \"inter_op_thread_count\" value { string_value: \"") + bad +
        "\" } }";
    const Status s = ValidateWith(text);
    ExpectInvalid(s, "'inter_op_thread_count' is '" + std::string(bad) + "'");
  }
}

// Triton's ONNX Runtime backend reads execution_mode: 0 or 1, anything else refused. Parallel
// needs the inter-op pool that fastpath sizes from inter_op_thread_count alone.
TEST(ValidateModelConfigTest, ExecutionMode) {
  const auto with = [](const std::string& mode, const std::string& inter) {
    std::string text =
        "parameters { key: \"execution_mode\" value { string_value: \"" + mode + "\" } }";
    if (!inter.empty()) {
      text +=
          "parameters { key: \"inter_op_thread_count\" value { string_value: \"" + inter + "\" } }";
    }
    return ValidateWith(text);
  };
  EXPECT_TRUE(with("0", "").ok());
  EXPECT_TRUE(with("0", "4").ok());
  EXPECT_TRUE(with("1", "2").ok());
  ExpectInvalid(with("7", ""),
                "'execution_mode' is '7'; it must be 0 (sequential) or 1 (parallel)");
  ExpectInvalid(with("", ""), "'execution_mode' is ''");
  ExpectInvalid(with("1", ""),
                "'execution_mode' 1 (parallel) needs 'inter_op_thread_count' above 1");
  ExpectInvalid(with("1", "1"), "needs 'inter_op_thread_count' above 1");
}

TEST(ValidateModelConfigTest, Warmup) {
  constexpr std::string_view kGood =
      "model_warmup { name: \"w\" batch_size: 2 inputs { key: \"x\" value { data_type: TYPE_FP32 "
      "dims: [ 4 ] random_data: true } } }";
  EXPECT_TRUE(ValidateWith(kGood).ok());
  ExpectInvalid(ValidateWith("model_warmup { batch_size: 9 inputs { key: \"x\" value { data_type: "
                             "TYPE_FP32 dims: [ 4 ] zero_data: true } } }"),
                "batch_size 9 must be between 1 and 8");
  ExpectInvalid(ValidateWith("model_warmup { inputs { key: \"x\" value { data_type: TYPE_FP32 "
                             "dims: [ 4 ] zero_data: true } } }"),
                "batch_size 0");
  ExpectInvalid(ValidateCompletedWith("model_warmup { batch_size: 1 inputs { key: \"q\" value { "
                                      "data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } }"),
                "input 'q': the model config has no such input");
  ExpectInvalid(ValidateWith("model_warmup { batch_size: 1 inputs { key: \"x\" value { data_type: "
                             "TYPE_INT32 dims: [ 4 ] zero_data: true } } }"),
                "data_type TYPE_INT32 differs from the input's TYPE_FP32");
  ExpectInvalid(ValidateWith("model_warmup { batch_size: 1 inputs { key: \"x\" value { data_type: "
                             "TYPE_FP32 dims: [ 5 ] zero_data: true } } }"),
                "dims [5] must be concrete");
  ExpectInvalid(ValidateWith("model_warmup { batch_size: 1 inputs { key: \"x\" value { data_type: "
                             "TYPE_FP32 dims: [ 4 ] } } }"),
                "set one of zero_data, random_data or input_data_file");
  ExpectInvalid(ValidateWith("model_warmup { batch_size: 1 inputs { key: \"x\" value { data_type: "
                             "TYPE_FP32 dims: [ 4 ] input_data_file: \"../secret\" } } }"),
                "input_data_file '../secret'");
  ExpectInvalid(ValidateCompletedWith("model_warmup { name: \"w\" batch_size: 1 }"),
                "model_warmup[0] 'w': inputs lack the model's input 'x'");
}

TEST(DataTypeMappingTest, RoundTripsEveryType) {
  for (int t = inference::TYPE_BOOL; t <= inference::TYPE_BF16; ++t) {
    const auto type = static_cast<inference::DataType>(t);
    const DataType ours = FromConfigDataType(type);
    EXPECT_NE(ours, DataType::kInvalid) << t;
    EXPECT_EQ(ToConfigDataType(ours), type);
    // And the names agree with common/dtype.h's config vocabulary.
    EXPECT_EQ(ConfigDataTypeName(ours), inference::DataType_Name(type));
  }
  EXPECT_EQ(FromConfigDataType(inference::TYPE_INVALID), DataType::kInvalid);
  EXPECT_EQ(FromConfigDataType(static_cast<inference::DataType>(99)), DataType::kInvalid);
  EXPECT_EQ(ToConfigDataType(DataType::kInvalid), inference::TYPE_INVALID);
  EXPECT_EQ(FromConfigDataType(inference::TYPE_STRING), DataType::kBytes);
}

}  // namespace
}  // namespace fastpath::config
