// `fastpath build-engines`, black-box: usage errors, a repository with nothing to build,
// and, on a machine where TensorRT cannot be registered (this one: the GPU package's
// TensorRT library needs libnvinfer), exit 17 naming why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "fakes/temp_repository.h"

namespace {

using ::testing::HasSubstr;

struct CommandRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

CommandRun BuildEngines(const std::string& args) {
  const std::string err_path = std::filesystem::temp_directory_path() /
                               ("fastpath_build_engines_err_" + std::to_string(::getpid()));
  const std::string command =
      "'" FASTPATH_BINARY "' build-engines " + args + " 2>'" + err_path + "'";
  CommandRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.out.append(buffer, n);
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  std::stringstream text;
  text << err.rdbuf();
  run.err = text.str();
  std::filesystem::remove(err_path);
  return run;
}

TEST(BuildEnginesTest, Usage) {
  CommandRun run = BuildEngines("");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("fastpath build-engines: --model-repository is required"));
  run = BuildEngines("--model-repository /nonexistent-fastpath-repo");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("model repository '/nonexistent-fastpath-repo' is not a "
                                 "directory"));
  run = BuildEngines("--help");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.out, HasSubstr("usage: fastpath build-engines"));
}

TEST(BuildEnginesTest, NothingToBuildWithoutTensorRtModels) {
  fastpath::testing::TempRepository repo(FASTPATH_TEST_MODELS_DIR);
  repo.AddVersion("mlp", 1, "mlp");
  repo.WriteConfig("mlp", "backend: \"onnxruntime\"\nmax_batch_size: 8\n");
  const CommandRun run = BuildEngines("--model-repository " + repo.root().string());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("model 'mlp' does not list \"tensorrt\" in "
                                 "gpu_execution_accelerator; skipped"));
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
      BuildEngines("--model-repository " + repo.root().string() + " --model mlp");
  if (run.exit_code == 0) GTEST_SKIP() << "TensorRT works on this machine: " << run.out;
  EXPECT_EQ(run.exit_code, 17) << run.err;
  EXPECT_THAT(run.err, HasSubstr("fastpath build-engines: TensorRT cannot be used on this "
                                 "machine, so no engine can be built: "));
  EXPECT_FALSE(std::filesystem::exists(repo.root() / ".engine-cache"));
}

}  // namespace
