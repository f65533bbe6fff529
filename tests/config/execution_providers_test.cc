// optimization.execution_accelerators and fastpath.allow_cpu_ops: parsing, validation,
// and what reaches the backend's InstanceOptions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fastpath/config/model_config.h"

namespace fastpath::config {
namespace {

using backend::ExecutionProvider;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

inference::ModelConfig Parse(const std::string& text) {
  auto config = ParseModelConfig(text, "config.pbtxt");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config.ok() ? *config : inference::ModelConfig{};
}

inference::ModelInstanceGroup Group(inference::ModelInstanceGroup::Kind kind) {
  inference::ModelInstanceGroup group;
  group.set_name("g");
  group.set_kind(kind);
  return group;
}

void ExpectInvalid(const std::string& text, const std::string& message) {
  const inference::ModelConfig config = Parse(text);
  const Status status = ValidateModelConfig(config);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << text;
  EXPECT_EQ(status.message(), message);
  // InstanceOptionsFor refuses it the same way for a GPU group.
  EXPECT_FALSE(InstanceOptionsFor(config, Group(inference::ModelInstanceGroup::KIND_GPU), 0).ok());
}

TEST(ExecutionProvidersTest, KindGpuDefaultsToCuda) {
  auto options = InstanceOptionsFor(Parse(""), Group(inference::ModelInstanceGroup::KIND_GPU), 1);
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_THAT(options->providers, ElementsAre(ExecutionProvider::kCuda));
  EXPECT_EQ(options->device_id, 1);
  EXPECT_THAT(options->provider_options, IsEmpty());
  EXPECT_THAT(options->allowed_cpu_ops, IsEmpty());
  EXPECT_FALSE(options->allow_cpu_fallback_for_gpu);
}

TEST(ExecutionProvidersTest, OrderedProvidersWithTheirOptions) {
  const inference::ModelConfig config = Parse(R"pb(
    optimization {
      execution_accelerators {
          gpu_execution_accelerator
          [ {
            name: "tensorrt"
            parameters { key: "trt_fp16_enable" value: "1" }
            parameters { key: "trt_max_workspace_size" value: "1073741824" }
          }
            , {
              name: "cuda"
              parameters { key: "arena_extend_strategy" value: "kSameAsRequested" }
            }] }
    }
    parameters {
      key: "fastpath.allow_cpu_ops"
      value { string_value: "NonMaxSuppression, TopK" }
    }
  )pb");
  ASSERT_TRUE(ValidateModelConfig(config).ok()) << ValidateModelConfig(config).ToString();
  auto options = InstanceOptionsFor(config, Group(inference::ModelInstanceGroup::KIND_GPU), 0);
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_THAT(options->providers,
              ElementsAre(ExecutionProvider::kTensorRt, ExecutionProvider::kCuda));
  EXPECT_THAT(options->provider_options,
              ElementsAre(Pair(ExecutionProvider::kCuda,
                               ElementsAre(Pair("arena_extend_strategy", "kSameAsRequested"))),
                          Pair(ExecutionProvider::kTensorRt,
                               ElementsAre(Pair("trt_fp16_enable", "1"),
                                           Pair("trt_max_workspace_size", "1073741824")))));
  EXPECT_THAT(options->allowed_cpu_ops, ElementsAre("NonMaxSuppression", "TopK"));

  // A KIND_CPU group of the same model is still just the CPU.
  auto cpu = InstanceOptionsFor(config, Group(inference::ModelInstanceGroup::KIND_CPU), 0);
  ASSERT_TRUE(cpu.ok());
  EXPECT_THAT(cpu->providers, ElementsAre(ExecutionProvider::kCpu));
}

TEST(ExecutionProvidersTest, CpuLastIsAcceptedByTheConfig) {
  // Whether it may be used is the profile's decision, made by the backend.
  const inference::ModelConfig config = Parse(R"pb(
    optimization {
      execution_accelerators { gpu_execution_accelerator
                               [ { name: "cuda" }
                                 , { name: "cpu" }] }
    }
  )pb");
  EXPECT_TRUE(ValidateModelConfig(config).ok());
  auto options = InstanceOptionsFor(config, Group(inference::ModelInstanceGroup::KIND_GPU), 0);
  ASSERT_TRUE(options.ok());
  EXPECT_THAT(options->providers, ElementsAre(ExecutionProvider::kCuda, ExecutionProvider::kCpu));
}

TEST(ExecutionProvidersTest, MistakesNameTheEntry) {
  ExpectInvalid(R"pb(optimization {
                       execution_accelerators { gpu_execution_accelerator { name: "CUDA" } }
                     })pb",
                "optimization.execution_accelerators.gpu_execution_accelerator[0]: unknown "
                "execution accelerator 'CUDA'; fastpath knows \"tensorrt\", \"cuda\" and \"cpu\"");
  ExpectInvalid(R"pb(optimization {
                       execution_accelerators { gpu_execution_accelerator
                                                [ { name: "cuda" }
                                                  , { name: "cuda" }] }
                     })pb",
                "optimization.execution_accelerators.gpu_execution_accelerator[1]: 'cuda' is "
                "listed twice");
  ExpectInvalid(R"pb(optimization {
                       execution_accelerators { gpu_execution_accelerator
                                                [ { name: "cpu" }
                                                  , { name: "cuda" }] }
                     })pb",
                "optimization.execution_accelerators.gpu_execution_accelerator[0]: \"cpu\" must "
                "come last (ONNX Runtime places on the CPU only what the providers before it "
                "decline)");
  ExpectInvalid(R"pb(optimization {
                       execution_accelerators { gpu_execution_accelerator { name: "cpu" } }
                     })pb",
                "optimization.execution_accelerators.gpu_execution_accelerator[0]: \"cpu\" alone "
                "is not a GPU instance; use kind: KIND_CPU");
  ExpectInvalid(R"pb(optimization {
                       execution_accelerators { gpu_execution_accelerator
                                                [ { name: "cuda" }
                                                  , {
                                                    name: "cpu"
                                                    parameters { key: "x" value: "1" }
                                                  }] }
                     })pb",
                "optimization.execution_accelerators.gpu_execution_accelerator[1]: \"cpu\" takes "
                "no parameters");
  ExpectInvalid(R"pb(optimization {
                       execution_accelerators {
                         gpu_execution_accelerator {
                           name: "cuda"
                           parameters { key: "" value: "1" }
                         }
                       }
                     })pb",
                "optimization.execution_accelerators.gpu_execution_accelerator[0]: a parameter key "
                "is empty");
  ExpectInvalid(R"pb(optimization {
                       execution_accelerators { cpu_execution_accelerator { name: "openvino" } }
                     })pb",
                "optimization.execution_accelerators.cpu_execution_accelerator[0]: 'openvino' is "
                "not available: KIND_CPU instances run on ONNX Runtime's CPU provider, and "
                "fastpath has no CPU accelerator built in");
  ExpectInvalid(R"pb(parameters {
                       key: "fastpath.allow_cpu_ops"
                       value { string_value: "TopK,,Einsum" }
                     })pb",
                "parameters: 'fastpath.allow_cpu_ops' is 'TopK,,Einsum'; it has an empty entry "
                "(write ONNX op types separated by commas, e.g. \"NonMaxSuppression,TopK\")");
}

TEST(ExecutionProvidersTest, UnsupportedOptimizationFieldsAreRefusedByName) {
  auto parsed = ParseModelConfig("optimization { cuda { graphs: true } }", "config.pbtxt");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), ::testing::HasSubstr("'cuda'"));
}

std::string CudaWith(const std::string& key, const std::string& value) {
  return "optimization { execution_accelerators { gpu_execution_accelerator { name: \"cuda\" "
         "parameters { key: \"" +
         key + "\" value: \"" + value + "\" } } } }";
}

// The CUDA EP arena (issue 4 §4): checked when the config is loaded, passed to the EP as is.
TEST(ExecutionProvidersTest, CudaArenaOptionsAreCheckedAndPassed) {
  const inference::ModelConfig config = Parse(R"pb(
    optimization {
      execution_accelerators {
        gpu_execution_accelerator {
          name: "cuda"
          parameters { key: "arena_extend_strategy" value: "kNextPowerOfTwo" }
          parameters { key: "gpu_mem_limit" value: "2147483648" }
        }
      }
    })pb");
  ASSERT_TRUE(ValidateModelConfig(config).ok());
  auto options = InstanceOptionsFor(config, Group(inference::ModelInstanceGroup::KIND_GPU), 0);
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_THAT(options->provider_options[ExecutionProvider::kCuda],
              ElementsAre(Pair("arena_extend_strategy", "kNextPowerOfTwo"),
                          Pair("gpu_mem_limit", "2147483648")));
  EXPECT_TRUE(
      ValidateModelConfig(Parse(CudaWith("arena_extend_strategy", "kSameAsRequested"))).ok());

  const std::string field = "optimization.execution_accelerators.gpu_execution_accelerator[0]: ";
  ExpectInvalid(CudaWith("arena_extend_strategy", "kNextPowerOf2"),
                field +
                    "parameter 'arena_extend_strategy' is 'kNextPowerOf2'; it must be "
                    "\"kNextPowerOfTwo\" or \"kSameAsRequested\"");
  const std::string limit_allowed =
      "; it must be the arena's limit in bytes, an integer between 1 and 18446744073709551615";
  for (const char* bad : {"", "0", "-1", "2GB", "1.5", "18446744073709551616"}) {
    ExpectInvalid(CudaWith("gpu_mem_limit", bad),
                  field + "parameter 'gpu_mem_limit' is '" + bad + "'" + limit_allowed);
  }
  ExpectInvalid(CudaWith("has_user_compute_stream", "1"),
                field +
                    "parameter 'has_user_compute_stream' is '1'; fastpath gives every instance "
                    "its own CUDA stream (its session creates it), and a stream shared between "
                    "instances would serialize them; remove the parameter");
  ExpectInvalid(CudaWith("device_id", "1"),
                field +
                    "parameter 'device_id' is '1'; the GPU comes from instance_group's gpus; "
                    "remove the parameter");
}

std::string TrtWith(const std::string& parameters) {
  return "optimization { execution_accelerators { gpu_execution_accelerator { name: "
         "\"tensorrt\" " +
         parameters + " } } }";
}

// The TensorRT options the engine cache is keyed by must be readable, and the cache's own
// options are fastpath's to set.
TEST(ExecutionProvidersTest, TensorRtEngineCacheOptions) {
  EXPECT_TRUE(ValidateModelConfig(Parse(TrtWith(R"(parameters { key: "trt_fp16_enable" value: "1" }
                                   parameters { key: "trt_profile_min_shapes" value: "X:1x4" }
                                   parameters { key: "trt_profile_opt_shapes" value: "X:4x4" }
                                   parameters { key: "trt_profile_max_shapes" value: "X:8x4" })")))
                  .ok());
  const std::string field = "optimization.execution_accelerators.gpu_execution_accelerator[0]: ";
  ExpectInvalid(TrtWith(R"(parameters { key: "trt_engine_cache_path" value: "/tmp/x" })"),
                field +
                    "parameter 'trt_engine_cache_path' is set by fastpath, which keys the "
                    "TensorRT engine cache itself (serve and build-engines --engine-cache DIR); "
                    "remove it");
  ExpectInvalid(TrtWith(R"(parameters { key: "trt_engine_cache_enable" value: "1" })"),
                field +
                    "parameter 'trt_engine_cache_enable' is set by fastpath, which keys the "
                    "TensorRT engine cache itself (serve and build-engines --engine-cache DIR); "
                    "remove it");
  ExpectInvalid(
      TrtWith(R"(parameters { key: "trt_int8_enable" value: "on" })"),
      field + "TensorRT option 'trt_int8_enable' is 'on'; it must be 0, 1, true or false");
  ExpectInvalid(TrtWith(R"(parameters { key: "trt_profile_max_shapes" value: "X:8x4" })"),
                field +
                    "a TensorRT shape profile needs trt_profile_min_shapes, trt_profile_opt_shapes "
                    "and trt_profile_max_shapes; missing: trt_profile_min_shapes, "
                    "trt_profile_opt_shapes");
}

}  // namespace
}  // namespace fastpath::config
