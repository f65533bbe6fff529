// The TensorRT engine cache's key, manifest and folder choice (engine_cache.h): pure
// functions and a temporary folder, no GPU.
#include "fastpath/onnxruntime/tensorrt/engine_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "fastpath/backend/backend.h"

namespace fastpath::onnxruntime {
namespace {

namespace fs = std::filesystem;
using backend::EngineCacheOptions;
using backend::ExecutionProvider;
using backend::InstanceOptions;
using ::testing::HasSubstr;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "fastpath-engines-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

EngineCacheKey Key() {
  EngineCacheKey key;
  key.model_sha256 = Sha256Hex("model bytes");
  key.tensorrt_version = "10.13.0";
  key.compute_capability = "9.0";
  key.precision = "fp16";
  key.shape_profile = "none";
  return key;
}

EngineCacheOptions Options(const fs::path& root) {
  EngineCacheOptions options;
  options.root = root;
  options.model_name = "resnet50";
  options.model_version = 1;
  return options;
}

TEST(EngineCacheTest, Sha256KnownAnswers) {
  // FIPS 180-4 examples, and a message that spans the padding boundary.
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");

  TempDir dir;
  const fs::path file = dir.path() / "model.onnx";
  std::ofstream(file, std::ios::binary) << std::string(200000, 'a') << "abc";
  auto digest = Sha256File(file);
  ASSERT_TRUE(digest.ok()) << digest.status().ToString();
  EXPECT_EQ(*digest, Sha256Hex(std::string(200000, 'a') + "abc"));
  EXPECT_EQ(Sha256File(dir.path() / "missing.onnx").status().code(), StatusCode::kNotFound);
}

TEST(EngineCacheTest, KeyIsCanonicalAndEveryComponentChangesIt) {
  const EngineCacheKey key = Key();
  EXPECT_EQ(key.Canonical(), "model_sha256: " + key.model_sha256 +
                                 "\ntensorrt: 10.13.0\ncompute_capability: 9.0\n"
                                 "precision: fp16\nshape_profile: none\n");
  EXPECT_EQ(key.Id(), Sha256Hex(key.Canonical()).substr(0, 16));
  EXPECT_EQ(key.Id(), Key().Id());  // deterministic
  for (int component = 0; component < 5; ++component) {
    EngineCacheKey other = Key();
    std::string* fields[] = {&other.model_sha256, &other.tensorrt_version,
                             &other.compute_capability, &other.precision, &other.shape_profile};
    *fields[component] += "x";
    EXPECT_NE(other.Id(), key.Id()) << component;
  }
}

TEST(EngineCacheTest, PrecisionAndShapeProfileFromTheTrtOptions) {
  EXPECT_EQ(*TrtPrecision({}), "fp32");
  EXPECT_EQ(*TrtPrecision({{"trt_fp16_enable", "1"}}), "fp16");
  EXPECT_EQ(*TrtPrecision({{"trt_fp16_enable", "false"}}), "fp32");
  EXPECT_EQ(*TrtPrecision({{"trt_fp16_enable", "true"}, {"trt_int8_enable", "1"}}), "int8");
  auto bad = TrtPrecision({{"trt_fp16_enable", "yes"}});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "TensorRT option 'trt_fp16_enable' is 'yes'; it must be 0, 1, true or false");

  EXPECT_EQ(*TrtShapeProfile({}), "none");
  EXPECT_EQ(*TrtShapeProfile({{"trt_profile_min_shapes", "x:1x3"},
                              {"trt_profile_opt_shapes", "x:8x3"},
                              {"trt_profile_max_shapes", "x:32x3"}}),
            "min=x:1x3;opt=x:8x3;max=x:32x3");
  auto partial = TrtShapeProfile({{"trt_profile_opt_shapes", "x:8x3"}});
  EXPECT_EQ(partial.status().message(),
            "a TensorRT shape profile needs trt_profile_min_shapes, trt_profile_opt_shapes and "
            "trt_profile_max_shapes; missing: trt_profile_min_shapes, trt_profile_max_shapes");
}

TEST(EngineCacheTest, OnlyEngineFilesCount) {
  TempDir dir;
  EXPECT_EQ(CountEngineFiles(dir.path() / "missing"), 0);
  EXPECT_EQ(CountEngineFiles(dir.path()), 0);
  ASSERT_TRUE(WriteManifest(dir.path(), Key()).ok());
  std::ofstream(dir.path() / "TensorrtExecutionProvider_cache.profile") << "x";
  fs::create_directories(dir.path() / "sub.engine");
  EXPECT_EQ(CountEngineFiles(dir.path()), 0);  // a manifest, a profile, a folder: no engine
  std::ofstream(dir.path() / "TensorrtExecutionProvider_TRTKernel_graph_0_sm90.engine") << "x";
  EXPECT_EQ(CountEngineFiles(dir.path()), 1);
}

TEST(EngineCacheTest, ManifestRoundTripAndMalformedManifests) {
  TempDir dir;
  ASSERT_TRUE(WriteManifest(dir.path() / "k", Key()).ok());
  auto read = ReadManifest(dir.path() / "k" / kEngineManifestFile);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, Key());

  const fs::path bad = dir.path() / "bad.manifest";
  std::ofstream(bad) << "model_sha256: x\nprecison: fp16\n";
  EXPECT_EQ(ReadManifest(bad).status().message(),
            "engine manifest '" + bad.string() +
                "' line 2: 'precison: fp16' is not one of model_sha256, tensorrt, "
                "compute_capability, precision, shape_profile followed by ': ' and a value");
  std::ofstream(bad, std::ios::trunc) << "model_sha256: x\n";
  EXPECT_EQ(ReadManifest(bad).status().message(),
            "engine manifest '" + bad.string() + "' has no tensorrt line");
}

TEST(EngineCacheTest, EmptyCacheBuildsIntoTheKeyedFolder) {
  TempDir root;
  auto decision = ChooseEngineDir(Options(root.path()), Key());
  ASSERT_TRUE(decision.ok()) << decision.status().ToString();
  EXPECT_EQ(decision->dir, root.path() / "resnet50" / "1" / Key().Id());
  EXPECT_FALSE(decision->found);
  EXPECT_EQ(decision->stale_reason, "");
  // A folder without a manifest (a build that did not finish) does not count.
  fs::create_directories(root.path() / "resnet50" / "1" / "0123456789abcdef");
  decision = ChooseEngineDir(Options(root.path()), Key());
  ASSERT_TRUE(decision.ok());
  EXPECT_EQ(decision->stale_reason, "");
}

TEST(EngineCacheTest, MatchingEnginesAreUsed) {
  TempDir root;
  EngineCacheKey other = Key();
  other.precision = "fp32";
  const fs::path model_dir = root.path() / "resnet50" / "1";
  ASSERT_TRUE(WriteManifest(model_dir / other.Id(), other).ok());
  ASSERT_TRUE(WriteManifest(model_dir / Key().Id(), Key()).ok());
  auto decision = ChooseEngineDir(Options(root.path()), Key());
  ASSERT_TRUE(decision.ok()) << decision.status().ToString();
  EXPECT_TRUE(decision->found);
  EXPECT_EQ(decision->dir, model_dir / Key().Id());
}

TEST(EngineCacheTest, EnginesUnderAnotherKeyAreRefusedInProductionAndRebuiltInDev) {
  TempDir root;
  EngineCacheKey old_trt = Key();
  old_trt.tensorrt_version = "10.12.0";
  old_trt.compute_capability = "8.6";
  EngineCacheKey other_model = Key();
  other_model.model_sha256 = Sha256Hex("older model");
  const fs::path model_dir = root.path() / "resnet50" / "1";
  ASSERT_TRUE(WriteManifest(model_dir / old_trt.Id(), old_trt).ok());
  ASSERT_TRUE(WriteManifest(model_dir / other_model.Id(), other_model).ok());

  // Folders are listed in name order.
  std::string first = old_trt.Id() +
                      ": tensorrt 10.12.0 (here 10.13.0), compute_capability "
                      "8.6 (here 9.0)";
  std::string second = other_model.Id() + ": model_sha256 " + other_model.model_sha256 + " (here " +
                       Key().model_sha256 + ")";
  if (other_model.Id() < old_trt.Id()) std::swap(first, second);
  const std::string reason = "the TensorRT engine cache '" + model_dir.string() +
                             "' holds only engines built under another key (" + first + "; " +
                             second + ")";

  auto refused = ChooseEngineDir(Options(root.path()), Key());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(),
            reason +
                "; production never rebuilds them silently: run `fastpath build-engines` on a "
                "machine like this one, or remove them");

  EngineCacheOptions dev = Options(root.path());
  dev.rebuild_stale = true;
  auto rebuilt = ChooseEngineDir(dev, Key());
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().ToString();
  EXPECT_FALSE(rebuilt->found);
  EXPECT_EQ(rebuilt->dir, model_dir / Key().Id());
  EXPECT_EQ(rebuilt->stale_reason, reason + "; rebuilt under key " + Key().Id());
}

TEST(EngineCacheTest, UnreadableManifestIsAnError) {
  TempDir root;
  const fs::path folder = root.path() / "resnet50" / "1" / "k";
  fs::create_directories(folder);
  std::ofstream(folder / kEngineManifestFile) << "garbage\n";
  auto decision = ChooseEngineDir(Options(root.path()), Key());
  ASSERT_FALSE(decision.ok());
  EXPECT_THAT(decision.status().message(), HasSubstr("line 1: 'garbage' is not one of"));
}

// What an instance that lists "tensorrt" gets: the key from its model file, its TensorRT
// options and the machine; the folder from ChooseEngineDir.
TEST(EngineCacheTest, PlanKeysTheInstance) {
  TempDir root;
  const fs::path model = root.path() / "model.onnx";
  std::ofstream(model, std::ios::binary) << "model bytes";
  InstanceOptions options;
  options.providers = {ExecutionProvider::kTensorRt, ExecutionProvider::kCuda};
  options.device_id = 1;
  options.provider_options[ExecutionProvider::kTensorRt] = {{"trt_fp16_enable", "1"}};
  options.engine_cache = Options(root.path() / "cache");

  auto unknown_trt = PlanTrtEngineCache(options, model);
  EXPECT_EQ(unknown_trt.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(unknown_trt.status().message(),
            "TensorRT engine cache of model 'resnet50' version 1: the TensorRT version is unknown "
            "(libnvinfer was not found; `fastpath doctor` shows the library search), so no "
            "engine can be keyed");
  options.engine_cache.tensorrt_version = "10.13.0";
  auto unknown_cc = PlanTrtEngineCache(options, model);
  EXPECT_EQ(unknown_cc.status().message(),
            "TensorRT engine cache of model 'resnet50' version 1: the compute capability of GPU 1 "
            "is unknown (the driver does not report it), so no engine can be keyed");
  options.engine_cache.compute_capability = "9.0";

  auto plan = PlanTrtEngineCache(options, model);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->key, Key());
  EXPECT_EQ(plan->decision.dir, root.path() / "cache" / "resnet50" / "1" / Key().Id());

  // The same model built as fp32 is another key: production refuses it, naming precision.
  EngineCacheKey fp32 = Key();
  fp32.precision = "fp32";
  ASSERT_TRUE(WriteManifest(plan->decision.dir.parent_path() / fp32.Id(), fp32).ok());
  auto refused = PlanTrtEngineCache(options, model);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("(" + fp32.Id() + ": precision fp32 (here fp16))"));
  EXPECT_EQ(Sha256File(root.path() / "nope").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace fastpath::onnxruntime
