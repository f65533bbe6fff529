// `fastpath build-engines`, black-box: usage errors, a repository with nothing to build,
// and, on a machine where TensorRT cannot be registered (this one: the GPU package's
// TensorRT library needs libnvinfer), exit 17 naming why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "fakes/run_command.h"
#include "fakes/temp_repository.h"

namespace {

using ::testing::HasSubstr;

using fastpath::testing::CommandRun;

CommandRun BuildEngines(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {FASTPATH_BINARY, "build-engines"};
  argv.insert(argv.end(), args.begin(), args.end());
  return fastpath::testing::RunCommand(argv);
}

TEST(BuildEnginesTest, Usage) {
  CommandRun run = BuildEngines({});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("fastpath build-engines: --model-repository is required"));
  run = BuildEngines({"--model-repository", "/nonexistent-fastpath-repo"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("model repository '/nonexistent-fastpath-repo' is not a "
                                 "directory"));
  run = BuildEngines({"--help"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.out, HasSubstr("usage: fastpath build-engines"));
}

TEST(BuildEnginesTest, NothingToBuildWithoutTensorRtModels) {
  fastpath::testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  repo.AddVersion("mlp", 1, "mlp");
  repo.WriteConfig("mlp", "backend: \"onnxruntime\"\nmax_batch_size: 8\n");
  const CommandRun run = BuildEngines({"--model-repository", repo.root().string()});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("model 'mlp' does not list \"tensorrt\" in "
                                 "gpu_execution_accelerator; skipped"));
  EXPECT_THAT(run.err, HasSubstr("no model to build"));
}

// Without instance_group a model runs on the CPU (as serve loads it), so it has no GPU to
// build engines for, whatever its accelerators say.
TEST(BuildEnginesTest, AModelWithoutAGpuGroupIsSkipped) {
  fastpath::testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  repo.AddVersion("mlp", 1, "mlp");
  repo.WriteConfig("mlp", R"(backend: "onnxruntime"
max_batch_size: 8
optimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt" } ] } }
)");
  const CommandRun run = BuildEngines({"--model-repository", repo.root().string()});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("model 'mlp' lists \"tensorrt\" but has no KIND_GPU "
                                 "instance_group (without one it runs on the CPU, as serve "
                                 "loads it); skipped"));
  EXPECT_THAT(run.err, HasSubstr("no model to build"));
}

TEST(BuildEnginesTest, TensorRtThatCannotBeRegisteredExits17) {
  fastpath::testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  repo.AddVersion("mlp", 1, "mlp");
  repo.WriteConfig("mlp", R"(backend: "onnxruntime"
max_batch_size: 8
instance_group [ { kind: KIND_GPU gpus: [ 0 ] } ]
optimization { execution_accelerators { gpu_execution_accelerator [
  { name: "tensorrt" parameters { key: "trt_fp16_enable" value: "1" } } ] } }
)");
  const CommandRun run =
      BuildEngines({"--model-repository", repo.root().string(), "--model", "mlp"});
  if (run.exit_code == 0) GTEST_SKIP() << "TensorRT works on this machine: " << run.out;
  EXPECT_EQ(run.exit_code, 17) << run.err;
  EXPECT_THAT(run.err, HasSubstr("fastpath build-engines: TensorRT cannot be used on this "
                                 "machine, so no engine can be built: "));
  // The reason class, not one loader's wording: the npm package's core cannot load its
  // provider-bridge TensorRT library at all; another ORT may lack libnvinfer instead.
  EXPECT_THAT(run.err, ::testing::AnyOf(HasSubstr("this ONNX Runtime build cannot run "
                                                  "TensorrtExecutionProvider"),
                                        HasSubstr("it needs libnvinfer")));
  EXPECT_FALSE(std::filesystem::exists(repo.root() / ".engine-cache"));
}

}  // namespace
