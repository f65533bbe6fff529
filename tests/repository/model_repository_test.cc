#include "fastpath/repository/model_repository.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "fakes/as_nobody.h"
#include "fakes/manual_clock.h"
#include "fakes/temp_repository.h"
#include "fastpath/common/log.h"
#include "fastpath/onnxruntime/ort_backend.h"

namespace fastpath::repository {
namespace {

using server::ModelState;
using testing::kSimpleConfig;
using testing::TempRepository;

class ModelRepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = onnxruntime::CreateOrtBackend();
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    backend_ = std::move(backend).value();
  }
  std::unique_ptr<ModelRepository> Make(ControlMode mode = ControlMode::kNone) {
    RepositoryOptions options;
    options.roots = {repo_.root()};
    options.mode = mode;
    options.load_files_root = load_files_.root();
    return std::make_unique<ModelRepository>(options, backend_.get());
  }
  // Explicit mode on `clock`: the retire grace passes when the test moves it.
  std::unique_ptr<ModelRepository> MakeExplicit(Clock* clock) {
    RepositoryOptions options;
    options.roots = {repo_.root()};
    options.mode = ControlMode::kExplicit;
    options.clock = clock;
    return std::make_unique<ModelRepository>(options, backend_.get());
  }
  const server::RepositoryEntry* Entry(const std::vector<server::RepositoryEntry>& index,
                                       const std::string& name, const std::string& version) {
    for (const auto& e : index) {
      if (e.name == name && e.version == version) return &e;
    }
    return nullptr;
  }

  // The folders a load request's files are written into, one per load.
  size_t LoadFolders() const {
    return std::distance(std::filesystem::directory_iterator(load_files_.root()),
                         std::filesystem::directory_iterator());
  }
  // Waits for the retire grace to pass and the load folders to go down to `n`.
  bool LoadFoldersBecome(size_t n) const {
    for (int i = 0; i < 500 && LoadFolders() != n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return LoadFolders() == n;
  }
  static std::string TestModel(const std::string& name) {
    std::ifstream in(std::filesystem::path(FASTPATH_TEST_MODELS_DIR) / (name + ".onnx"),
                     std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  TempRepository repo_{FASTPATH_TEST_MODELS_DIR};
  TempRepository load_files_{FASTPATH_TEST_MODELS_DIR};  // used as a plain temporary folder
  std::unique_ptr<backend::Backend> backend_;
};

TEST_F(ModelRepositoryTest, LoadsAGoodModelAndCompletesItsConfig) {
  repo_.AddVersion("simple", 1, "simple");
  repo_.WriteConfig("simple", kSimpleConfig);
  auto repo = Make();
  ASSERT_TRUE(repo->LoadStartupModels({}).ok());
  auto v = repo->FindReady("simple", "");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ((*v)->version, 1);
  EXPECT_EQ((*v)->config.platform(), "onnxruntime_onnx");
  EXPECT_TRUE(repo->AllReady());
}

TEST_F(ModelRepositoryTest, ConfigIsOptional) {
  repo_.AddVersion("simple", 1, "simple");
  auto repo = Make();
  ASSERT_TRUE(repo->LoadStartupModels({}).ok());
  auto v = repo->FindReady("simple", "1");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ((*v)->config.input_size(), 2);
  EXPECT_EQ((*v)->config.output_size(), 2);
  EXPECT_EQ((*v)->config.name(), "simple");
}

TEST_F(ModelRepositoryTest, BadModelsAreUnavailableWithTheirReasonAndOthersServe) {
  repo_.AddVersion("simple", 1, "simple");
  repo_.AddVersion("corrupt", 1, "corrupt");
  repo_.WriteConfig("missing_file", "max_batch_size: 0");
  std::filesystem::create_directories(repo_.root() / "missing_file" / "1");
  repo_.AddVersion("mismatch", 1, "simple");
  repo_.WriteConfig("mismatch", "name: \"other\"");
  repo_.AddVersion("contradiction", 1, "simple");
  repo_.WriteConfig("contradiction",
                    "max_batch_size: 8\ninput [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 16 ] } ]");
  repo_.AddVersion("unknown_field", 1, "simple");
  repo_.WriteConfig("unknown_field", "sequence_batching { }");
  repo_.AddVersion("config_folder", 1, "simple");
  std::filesystem::create_directories(repo_.root() / "config_folder" / "config.pbtxt");
  // A folder whose name is not UTF-8 cannot be a model (its name goes into JSON, labels and
  // protobuf strings): listed UNAVAILABLE with the reason, never served.
  repo_.AddVersion("bad\xffname", 1, "simple");
  auto repo = Make();
  ASSERT_TRUE(repo->LoadStartupModels({}).ok());

  EXPECT_TRUE(repo->FindReady("simple", "").ok());
  EXPECT_FALSE(repo->AllReady());
  const auto index = repo->Index(false);
  auto corrupt = Entry(index, "corrupt", "1");
  ASSERT_NE(corrupt, nullptr);
  EXPECT_EQ(corrupt->state, ModelState::kUnavailable);
  EXPECT_FALSE(corrupt->reason.empty());
  auto missing = Entry(index, "missing_file", "1");
  ASSERT_NE(missing, nullptr);
  EXPECT_NE(missing->reason.find("model.onnx"), std::string::npos) << missing->reason;
  auto mismatch = Entry(index, "mismatch", "");
  ASSERT_NE(mismatch, nullptr);
  EXPECT_NE(mismatch->reason.find("other"), std::string::npos) << mismatch->reason;
  auto contradiction = Entry(index, "contradiction", "1");
  ASSERT_NE(contradiction, nullptr);
  EXPECT_NE(contradiction->reason.find("INPUT0"), std::string::npos) << contradiction->reason;
  auto unknown = Entry(index, "unknown_field", "");
  ASSERT_NE(unknown, nullptr);
  EXPECT_NE(unknown->reason.find("sequence_batching"), std::string::npos) << unknown->reason;
  auto config_folder = Entry(index, "config_folder", "");
  ASSERT_NE(config_folder, nullptr);
  EXPECT_NE(config_folder->reason.find("config.pbtxt is not a file"), std::string::npos)
      << config_folder->reason;
  auto bad_name = Entry(index, "bad\xffname", "");
  ASSERT_NE(bad_name, nullptr);
  EXPECT_EQ(bad_name->state, ModelState::kUnavailable);
  EXPECT_NE(bad_name->reason.find("is not valid UTF-8"), std::string::npos) << bad_name->reason;
  EXPECT_EQ(repo->FindReady("bad\xffname", "").status().code(), StatusCode::kUnavailable);
  // And once its folder is gone, a poll unloads it like any other.
  repo_.Remove("bad\xffname");
  repo->Poll();
  EXPECT_EQ(Entry(repo->Index(false), "bad\xffname", ""), nullptr);

  EXPECT_EQ(repo->FindReady("corrupt", "").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(repo->FindReady("nope", "").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(repo->FindReady("simple", "7").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(repo->Index(true).size(), 1u);
}

TEST_F(ModelRepositoryTest, VersionPolicies) {
  for (int v : {1, 2, 3}) repo_.AddVersion("latest", v, "simple");
  for (int v : {1, 2, 3}) repo_.AddVersion("all", v, "simple");
  repo_.WriteConfig("all", "version_policy { all { } }");
  for (int v : {1, 2, 3}) repo_.AddVersion("specific", v, "simple");
  repo_.WriteConfig("specific", "version_policy { specific { versions: [1, 3] } }");
  repo_.AddVersion("latest2", 1, "simple");
  repo_.AddVersion("latest2", 5, "simple");
  repo_.WriteConfig("latest2", "version_policy { latest { num_versions: 2 } }");
  // As Triton: a folder with a leading zero is no version (it made "02" version 2, here an
  // empty one that failed the model), nor is one with a sign, a fraction or past int64. Each
  // is logged, as meant for a version; a folder of another name (assets) is not.
  repo_.AddVersion("zeros", 1, "simple");
  const std::vector<std::string> not_versions = {"02", "-3", "+5", "1.0", "9223372036854775808"};
  for (const std::string& name : not_versions) {
    std::filesystem::create_directories(repo_.root() / "zeros" / name);
  }
  std::filesystem::create_directories(repo_.root() / "zeros" / "assets");
  const log::Options saved = log::CurrentOptions();
  std::ostringstream logged;
  log::SetOutputForTesting(&logged);
  auto repo = Make();
  const Status loaded = repo->LoadStartupModels({});
  log::SetOutputForTesting(nullptr);
  log::Configure(saved);
  ASSERT_TRUE(loaded.ok());
  for (const std::string& name : not_versions) {
    EXPECT_THAT(logged.str(),
                ::testing::HasSubstr("zeros/" + name + " is ignored: a version is a whole number"))
        << name;
  }
  EXPECT_THAT(logged.str(), ::testing::Not(::testing::HasSubstr("zeros/assets")));

  EXPECT_TRUE(*repo->IsReady("latest", "3"));
  EXPECT_EQ(repo->FindReady("latest", "1").status().code(), StatusCode::kNotFound);
  for (const char* v : {"1", "2", "3"}) EXPECT_TRUE(*repo->IsReady("all", v)) << v;
  EXPECT_TRUE(*repo->IsReady("specific", "1"));
  EXPECT_TRUE(*repo->IsReady("specific", "3"));
  EXPECT_FALSE(repo->IsReady("specific", "2").ok());
  EXPECT_EQ((*repo->FindReady("latest2", ""))->version, 5);
  EXPECT_EQ(repo->ReadyVersions("latest2").size(), 2u);
  EXPECT_EQ((*repo->FindReady("zeros", ""))->version, 1);
}

// Triton's layout for a model with external data: <version>/model.onnx/ is a folder that
// holds model.onnx and its weight files. It was refused as "missing".
TEST_F(ModelRepositoryTest, AModelFileThatIsAFolderIsTheModelOnnxInIt) {
  const std::filesystem::path folder = repo_.root() / "external" / "1" / "model.onnx";
  std::filesystem::create_directories(folder);
  std::filesystem::copy_file(std::filesystem::path(FASTPATH_TEST_MODELS_DIR) / "simple.onnx",
                             folder / "model.onnx");
  auto repo = Make();
  ASSERT_TRUE(repo->LoadStartupModels({}).ok());
  EXPECT_TRUE(repo->FindReady("external", "").ok());
  std::filesystem::remove(folder / "model.onnx");
  std::filesystem::create_directories(folder / "model.onnx");  // a folder all the way down
  auto again = Make();
  ASSERT_TRUE(again->LoadStartupModels({}).ok());
  const auto index = again->Index(false);
  const server::RepositoryEntry* e = Entry(index, "external", "1");
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->reason.find("model.onnx/model.onnx is not a regular file"), std::string::npos)
      << e->reason;
}

TEST_F(ModelRepositoryTest, ExplicitModeLoadsOnlyWhatIsAsked) {
  repo_.AddVersion("simple", 1, "simple");
  repo_.AddVersion("simple_fp32", 1, "simple_fp32");
  auto repo = Make(ControlMode::kExplicit);
  ASSERT_TRUE(repo->LoadStartupModels({"simple"}).ok());
  EXPECT_TRUE(repo->FindReady("simple", "").ok());
  // Not loaded, and not a typo either: the answer says which.
  EXPECT_EQ(repo->FindReady("simple_fp32", "").status().code(), StatusCode::kNotFound);
  EXPECT_THAT(repo->FindReady("simple_fp32", "").status().message(),
              ::testing::StartsWith("model 'simple_fp32' is not loaded: its folder is in the "
                                    "repository"));
  EXPECT_EQ(repo->FindReady("simple_fp33", "").status().message(), "unknown model 'simple_fp33'");
  EXPECT_EQ(repo->FindReady("../simple", "").status().message(), "unknown model '../simple'");
  const auto index = repo->Index(false);
  auto unloaded = Entry(index, "simple_fp32", "");
  ASSERT_NE(unloaded, nullptr);
  EXPECT_EQ(unloaded->state, ModelState::kUnavailable);

  EXPECT_TRUE(repo->Load("simple_fp32").ok());
  EXPECT_TRUE(repo->FindReady("simple_fp32", "").ok());
  EXPECT_TRUE(repo->Unload("simple").ok());
  EXPECT_EQ(repo->FindReady("simple", "").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(repo->Unload("simple").ok());  // not loaded: nothing to do, as Triton answers
  EXPECT_EQ(repo->Unload("absent").code(), StatusCode::kNotFound);
  EXPECT_EQ(repo->Unload("../etc").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(repo->Load("absent").code(), StatusCode::kNotFound);
  EXPECT_EQ(repo->Load("../etc").code(), StatusCode::kInvalidArgument);
  // Cut at the NUL, the name would be another folder's.
  EXPECT_EQ(repo->Load(std::string("simple\0x", 8)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(repo->Unload(std::string("simple\0x", 8)).code(), StatusCode::kInvalidArgument);
}

TEST_F(ModelRepositoryTest, AFailedReloadReportsItsReason) {
  repo_.AddVersion("simple", 1, "simple");
  auto repo = Make(ControlMode::kExplicit);
  ASSERT_TRUE(repo->Load("simple").ok());
  repo_.WriteConfig("simple", "max_batch_size: -3");
  Status s = repo->Load("simple");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("max_batch_size"), std::string::npos) << s.message();
}

// A failure that may pass when the load is tried again keeps its own code, where a broken
// file is INVALID_ARGUMENT (above): a folder written while it was read is UNAVAILABLE, a
// refusal for memory RESOURCE_EXHAUSTED, whatever else failed beside it.
TEST_F(ModelRepositoryTest, ALoadThatMayPassWhenTriedAgainKeepsItsCode) {
  repo_.AddVersion("simple", 1, "simple");
  repo_.AddVersion("simple", 2, "simple");
  repo_.WriteConfig("simple", std::string(kSimpleConfig) + "version_policy: { all {} }");
  RepositoryOptions options;
  options.roots = {repo_.root()};
  options.mode = ControlMode::kExplicit;
  std::function<Status(ModelVersion&)> admit;
  options.admit = [&](const std::filesystem::path&, ModelVersion& version) {
    return admit(version);
  };
  ModelRepository repo(options, backend_.get());

  admit = [](ModelVersion& version) {
    return version.version == 1 ? FailedPrecondition("the self-test failed")
                                : ResourceExhausted("out of memory: the budget is spent");
  };
  Status s = repo.Load("simple");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("the self-test failed"), std::string::npos) << s.message();

  int writes = 0;
  admit = [&](ModelVersion&) {
    std::ofstream(repo_.root() / "simple" / ("notes-" + std::to_string(++writes) + ".txt"))
        << "copied meanwhile";
    return Status::Ok();
  };
  s = repo.Load("simple");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("changed while it was read"), std::string::npos) << s.message();

  admit = [](ModelVersion&) { return Status::Ok(); };
  EXPECT_TRUE(repo.Load("simple").ok());
}

// In poll mode a reload that failed for a reason of the model's is not read again until its
// files change, but one that may pass when tried again (UNAVAILABLE: the rollout gate found
// the serving version too busy to time) is read again, at the next poll first and then
// backing off (1, 3, 7 ... poll intervals) while it keeps failing so. It was never retried:
// a version 2 refused during a burst stayed out until its files changed.
TEST_F(ModelRepositoryTest, APollRetriesAReloadThatMayPassWhenTriedAgain) {
  repo_.AddVersion("simple", 1, "simple");
  fastpath::testing::ManualClock clock;
  RepositoryOptions options;
  options.roots = {repo_.root()};
  options.mode = ControlMode::kPoll;
  options.clock = &clock;
  const auto interval = options.poll_interval;
  std::function<Status(ModelVersion&)> admit = [](ModelVersion&) { return Status::Ok(); };
  int admitted_2 = 0;
  options.admit = [&](const std::filesystem::path&, ModelVersion& version) {
    if (version.version == 2) ++admitted_2;
    return admit(version);
  };
  ModelRepository repo(options, backend_.get());
  repo.Poll();
  ASSERT_EQ((*repo.FindReady("simple", ""))->version, 1);

  admit = [](ModelVersion& version) {
    return version.version == 2 ? Unavailable("the serving version is busy") : Status::Ok();
  };
  repo_.AddVersion("simple", 2, "simple");
  repo.Poll();
  EXPECT_EQ((*repo.FindReady("simple", ""))->version, 1);
  EXPECT_EQ(admitted_2, 1);
  clock.Advance(interval);
  repo.Poll();  // no file changed: read again
  EXPECT_EQ(admitted_2, 2);
  clock.Advance(interval);
  repo.Poll();  // failed twice: not before 3 intervals
  EXPECT_EQ(admitted_2, 2);
  admit = [](ModelVersion&) { return Status::Ok(); };
  clock.Advance(2 * interval);
  repo.Poll();
  EXPECT_EQ(admitted_2, 3);
  EXPECT_EQ((*repo.FindReady("simple", ""))->version, 2);

  // A refusal of the model's own stays until its files change.
  admit = [](ModelVersion& version) {
    return version.version == 3 ? FailedPrecondition("the self-test failed") : Status::Ok();
  };
  repo_.AddVersion("simple", 3, "simple");
  int admitted_3 = 0;
  const auto refusing = admit;
  admit = [&](ModelVersion& version) {
    if (version.version == 3) ++admitted_3;
    return refusing(version);
  };
  repo.Poll();
  clock.Advance(40 * interval);
  repo.Poll();
  EXPECT_EQ(admitted_3, 1);
  EXPECT_EQ((*repo.FindReady("simple", ""))->version, 2);

  // A new model that fails RESOURCE_EXHAUSTED (out of memory, the thread limit: what other
  // models hold may be given back) is read again too, though nothing of it served. It stayed
  // down until its files changed.
  int admitted_new = 0;
  admit = [&](ModelVersion& version) {
    if (version.model_name != "later") return Status::Ok();
    ++admitted_new;
    return admitted_new < 3 ? ResourceExhausted("could not start the model's threads")
                            : Status::Ok();
  };
  repo_.AddVersion("later", 1, "simple");
  clock.Advance(interval);
  repo.Poll();
  EXPECT_EQ(admitted_new, 1);
  EXPECT_FALSE(repo.FindReady("later", "").ok());
  clock.Advance(interval);
  repo.Poll();
  EXPECT_EQ(admitted_new, 2);
  clock.Advance(3 * interval);
  repo.Poll();
  EXPECT_EQ(admitted_new, 3);
  EXPECT_TRUE(repo.FindReady("later", "").ok());
  clock.Advance(40 * interval);
  repo.Poll();
  EXPECT_EQ(admitted_new, 3);  // serving, its files unchanged: not read again
}

// A config.pbtxt that is a link to nothing (a ConfigMap mounted elsewhere) is an error: the
// model was served on a config completed from the model alone, its instance groups, limits
// and policies dropped without a word.
TEST_F(ModelRepositoryTest, AConfigLinkedToNothingIsAnError) {
  repo_.AddVersion("simple", 1, "simple");
  std::filesystem::create_symlink("/nonexistent/config.pbtxt",
                                  repo_.root() / "simple" / "config.pbtxt");
  auto repo = Make(ControlMode::kExplicit);
  const Status s = repo->Load("simple");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("config.pbtxt is a symbolic link to /nonexistent/config.pbtxt, "
                             "which does not exist"),
            std::string::npos)
      << s.message();
}

// Loads `model` as a user other than root (whom permissions do not bind) and exits 0 when
// the load failed naming `cause`.
[[noreturn]] void LoadAsNobody(ModelRepository& repo, const std::string& model,
                               const std::string& cause) {
  testing::BecomeNobody();
  const Status s = repo.Load(model);
  if (s.ok() || s.message().find(cause) == std::string::npos) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    std::_Exit(1);
  }
  std::_Exit(0);
}

// A model or version folder the server may not read is named with the cause, where it read
// as "no numeric version folder" or "model file ... is missing".
TEST_F(ModelRepositoryTest, AFolderThatCannotBeReadIsNamedWithItsCause) {
  if (!testing::CanRunAsNobody()) GTEST_SKIP() << "cannot run a child as another user here";
  repo_.AddVersion("simple", 1, "simple");
  repo_.AddVersion("simple_fp32", 1, "simple_fp32");
  repo_.AddVersion("simple_int8", 1, "simple");
  repo_.AddVersion("simple_int16", 1, "simple");
  using std::filesystem::perms;
  std::filesystem::permissions(repo_.root(),
                               perms::owner_all | perms::others_read | perms::others_exec);
  std::filesystem::permissions(repo_.root() / "simple", std::filesystem::perms::none);
  std::filesystem::permissions(repo_.root() / "simple_fp32" / "1", std::filesystem::perms::none);
  auto repo = Make(ControlMode::kExplicit);
  EXPECT_EXIT(LoadAsNobody(*repo, "simple", "simple/config.pbtxt: Permission denied"),
              ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(LoadAsNobody(*repo, "simple_fp32", "cannot be read: Permission denied"),
              ::testing::ExitedWithCode(0), "");
  // A model folder that may be entered but not listed (--x): its versions cannot be read.
  std::filesystem::permissions(repo_.root() / "simple_int16",
                               perms::owner_exec | perms::others_exec);
  EXPECT_EXIT(LoadAsNobody(*repo, "simple_int16", "cannot list"), ::testing::ExitedWithCode(0), "");
  // A repository folder that may be listed but not entered (r--): the model's folder is
  // named behind the permission, not as absent.
  std::filesystem::permissions(repo_.root(), perms::owner_read | perms::others_read);
  EXPECT_EXIT(LoadAsNobody(*repo, "simple_int8", "simple_int8: Permission denied"),
              ::testing::ExitedWithCode(0), "");
  for (const char* folder : {"", "simple", "simple_fp32/1", "simple_int16"}) {
    std::filesystem::permissions(repo_.root() / folder, perms::owner_all);
  }
}

// Triton's load parameter "config": used instead of config.pbtxt for this load only; a
// load without it reads the folder again.
TEST_F(ModelRepositoryTest, ALoadsConfigIsUsedInsteadOfConfigPbtxt) {
  repo_.AddVersion("simple", 1, "simple");
  repo_.WriteConfig("simple", kSimpleConfig);
  auto repo = Make(ControlMode::kExplicit);
  ASSERT_TRUE(repo->Load("simple").ok());
  EXPECT_EQ((*repo->FindReady("simple", ""))->config.max_batch_size(), 8);

  LoadOverride load;
  load.config_json =
      R"({"max_batch_size": 0, "instance_group": [{"kind": "KIND_CPU", "count": 2}]})";
  ASSERT_TRUE(repo->Load("simple", load).ok());
  auto v = repo->FindReady("simple", "");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ((*v)->config.max_batch_size(), 0);  // written as 0: never batch
  EXPECT_EQ((*v)->config.instance_group(0).count(), 2);
  EXPECT_EQ((*v)->config.input(0).name(), "INPUT0");  // completed from the model
  EXPECT_EQ(LoadFolders(), 0u);                       // no files: the repository's folder

  ASSERT_TRUE(repo->Load("simple").ok());
  EXPECT_EQ((*repo->FindReady("simple", ""))->config.max_batch_size(), 8);

  // Without files, the repository's folder must hold the versions.
  load.config_json = "{}";
  const Status absent = repo->Load("absent", load);
  EXPECT_EQ(absent.code(), StatusCode::kNotFound);
  EXPECT_NE(absent.message().find("a load's config without files"), std::string::npos)
      << absent.message();
}

// Triton's "file:<path>" parameters: the model's folder, written by the server, read
// instead of the repository's (which need not exist), and removed when the load goes.
TEST_F(ModelRepositoryTest, ALoadsFilesAreTheModelsFolderUntilItGoes) {
  auto repo = Make(ControlMode::kExplicit);
  LoadOverride load;
  load.config_json = R"({"name": "uploaded", "max_batch_size": 8})";
  load.files["1/model.onnx"] = TestModel("simple");
  load.files["3/model.onnx"] = TestModel("simple");
  load.files["labels/names.txt"] = "a\nb\n";
  ASSERT_TRUE(repo->Load("uploaded", load).ok());
  {
    auto v = repo->FindReady("uploaded", "");
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ((*v)->version, 3);
    EXPECT_NE((*v)->load_folder, nullptr);  // held by the version, as here
  }
  EXPECT_EQ(LoadFolders(), 1u);
  const auto index = repo->Index(false);
  ASSERT_NE(Entry(index, "uploaded", "3"), nullptr);
  EXPECT_EQ(Entry(index, "uploaded", "3")->state, ModelState::kReady);

  // A reload with other files replaces the folder; the old one goes with its versions.
  load.files.erase("3/model.onnx");
  ASSERT_TRUE(repo->Load("uploaded", load).ok());
  EXPECT_EQ((*repo->FindReady("uploaded", ""))->version, 1);
  EXPECT_TRUE(LoadFoldersBecome(1));

  // A load without them reads the repository, which has no such folder: what serves stays.
  EXPECT_EQ(repo->Load("uploaded").code(), StatusCode::kNotFound);
  EXPECT_TRUE(repo->FindReady("uploaded", "").ok());

  ASSERT_TRUE(repo->Unload("uploaded").ok());
  EXPECT_TRUE(LoadFoldersBecome(0));
  EXPECT_EQ(repo->FindReady("uploaded", "").status().code(), StatusCode::kNotFound);
}

TEST_F(ModelRepositoryTest, ALoadsBadConfigOrFilesFailAndWhatServesStays) {
  repo_.AddVersion("simple", 1, "simple");
  auto repo = Make(ControlMode::kExplicit);
  ASSERT_TRUE(repo->Load("simple").ok());
  const auto still_serving = [&] {
    auto v = repo->FindReady("simple", "1");
    return v.ok() && (*v)->load_folder == nullptr;
  };

  // Not a config: refused before anything changes, and no folder is written.
  LoadOverride load;
  load.config_json = R"({"max_batch_size": 8, "maxBatchSize": 4})";
  load.files["1/model.onnx"] = TestModel("simple");
  Status s = repo->Load("simple", load);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "load parameter 'config': field 'max_batch_size' is written twice");
  EXPECT_TRUE(still_serving());
  EXPECT_EQ(LoadFolders(), 0u);

  struct Case {
    std::string config;
    std::map<std::string, std::string> files;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {R"({"name": "other"})",
       {{"1/model.onnx", TestModel("simple")}},
       "the load's config names the model 'other' but the request loads 'simple'"},
      {"{}",
       {{"labels.txt", "a"}},
       "no numeric version folder among the load's files (give e.g. "
       "'file:1/model.onnx')"},
      {"{}", {{"1/model.onnx", "not a model"}}, "version 1:"},
      {R"({"max_batch_size": 8, "input": [{"name": "INPUT0", "data_type": "TYPE_FP32"}]})",
       {{"1/model.onnx", TestModel("simple")}},
       "INPUT0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.reason);
    load.config_json = c.config;
    load.files = c.files;
    // A new name: nothing serves, and the failed model is listed; its files go at once.
    const Status fresh = repo->Load("fresh", load);
    EXPECT_EQ(fresh.code(), StatusCode::kInvalidArgument) << fresh.ToString();
    EXPECT_EQ(LoadFolders(), 0u);
    s = repo->Load("simple", load);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(c.reason), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("the previous load keeps serving"), std::string::npos)
        << s.message();
    EXPECT_TRUE(still_serving());
    EXPECT_TRUE(LoadFoldersBecome(0));  // the failed load's files are gone with it
  }
}

// As Triton, which reads a label file at load: one named but absent fails the load.
TEST_F(ModelRepositoryTest, ALabelFileNamedButAbsentFailsTheLoad) {
  repo_.AddVersion("labelled", 1, "simple");
  repo_.WriteConfig("labelled", R"(output [ { name: "OUTPUT0" label_filename: "labels.txt" } ])");
  auto repo = Make(ControlMode::kExplicit);
  const Status absent = repo->Load("labelled");
  EXPECT_EQ(absent.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(
      absent.message().find("output 'OUTPUT0': label_filename 'labels.txt' is not a file in " +
                            (repo_.root() / "labelled").string()),
      std::string::npos)
      << absent.message();
  std::ofstream(repo_.root() / "labelled" / "labels.txt") << "a\nb\n";
  EXPECT_TRUE(repo->Load("labelled").ok());
}

// Several roots served as one, as Triton serves a repeated --model-repository; a name
// with a folder in two is refused, saying where, and whatever served keeps serving.
TEST_F(ModelRepositoryTest, SeveralRootsServeAsOneAndANameInTwoIsRefused) {
  TempRepository second{FASTPATH_TEST_MODELS_DIR};
  repo_.AddVersion("simple", 1, "simple");
  second.AddVersion("simple_fp32", 1, "simple_fp32");
  repo_.AddVersion("twice", 1, "simple");
  second.AddVersion("twice", 1, "simple");
  RepositoryOptions options;
  options.roots = {repo_.root(), second.root()};
  options.mode = ControlMode::kPoll;
  ModelRepository repo(options, backend_.get());
  repo.Poll();
  EXPECT_TRUE(repo.FindReady("simple", "").ok());
  EXPECT_TRUE(repo.FindReady("simple_fp32", "").ok());
  const std::string where =
      (repo_.root() / "twice").string() + ", " + (second.root() / "twice").string();
  auto twice = repo.FindReady("twice", "");
  EXPECT_EQ(twice.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(twice.status().message().find("the model name is not unique across the repositories: " +
                                          where),
            std::string::npos)
      << twice.status().message();
  const auto index = repo.Index(false);
  const auto* listed = Entry(index, "twice", "");
  ASSERT_NE(listed, nullptr);
  EXPECT_EQ(listed->state, ModelState::kUnavailable);

  second.Remove("twice");  // now unique: the next poll loads it
  repo.Poll();
  EXPECT_TRUE(repo.FindReady("twice", "").ok());

  // A second folder for a model that serves: the reload fails and the load serves on.
  repo_.AddVersion("simple_fp32", 1, "simple_fp32");
  repo.Poll();
  EXPECT_TRUE(repo.FindReady("simple_fp32", "").ok());
  const auto index_after = repo.Index(false);
  const auto* kept = Entry(index_after, "simple_fp32", "1");
  ASSERT_NE(kept, nullptr);
  EXPECT_NE(kept->reason.find("not unique"), std::string::npos) << kept->reason;
}

// A root that cannot be listed (a volume gone) is no sign its models were removed.
TEST_F(ModelRepositoryTest, ARootThatCannotBeListedUnloadsNothing) {
  auto second = std::make_unique<TempRepository>(FASTPATH_TEST_MODELS_DIR);
  repo_.AddVersion("simple", 1, "simple");
  second->AddVersion("simple_fp32", 1, "simple_fp32");
  RepositoryOptions options;
  options.roots = {repo_.root(), second->root()};
  options.mode = ControlMode::kPoll;
  ModelRepository repo(options, backend_.get());
  repo.Poll();
  ASSERT_TRUE(repo.FindReady("simple_fp32", "").ok());
  second.reset();  // the whole root goes
  repo.Poll();
  EXPECT_TRUE(repo.FindReady("simple_fp32", "").ok());
  repo_.Remove("simple");  // and nothing else is unloaded meanwhile either
  repo.Poll();
  EXPECT_TRUE(repo.FindReady("simple", "").ok());
}

TEST_F(ModelRepositoryTest, AnExplicitLoadFindsItsFolderInAnyRoot) {
  TempRepository second{FASTPATH_TEST_MODELS_DIR};
  second.AddVersion("simple_fp32", 1, "simple_fp32");
  RepositoryOptions options;
  options.roots = {repo_.root(), second.root()};
  options.mode = ControlMode::kExplicit;
  ModelRepository repo(options, backend_.get());
  EXPECT_TRUE(repo.Unload("simple_fp32").ok());  // a folder, not loaded: nothing to do
  ASSERT_TRUE(repo.Load("simple_fp32").ok());
  EXPECT_TRUE(repo.FindReady("simple_fp32", "").ok());
  const Status absent = repo.Load("nowhere");
  EXPECT_EQ(absent.code(), StatusCode::kNotFound);
  EXPECT_EQ(absent.message(), "no model folder 'nowhere' in any of " + repo_.root().string() +
                                  ", " + second.root().string());
}

TEST_F(ModelRepositoryTest, PollPicksUpNewChangedAndRemovedModels) {
  repo_.AddVersion("simple", 1, "simple");
  auto repo = Make(ControlMode::kPoll);
  repo->Poll();
  EXPECT_TRUE(repo->FindReady("simple", "").ok());
  repo_.AddVersion("simple_fp32", 1, "simple_fp32");
  repo_.AddVersion("simple", 2, "simple");
  repo->Poll();
  EXPECT_TRUE(repo->FindReady("simple_fp32", "").ok());
  EXPECT_EQ((*repo->FindReady("simple", ""))->version, 2);
  repo_.Remove("simple_fp32");
  repo->Poll();
  EXPECT_EQ(repo->FindReady("simple_fp32", "").status().code(), StatusCode::kNotFound);
}

// A file made readable again (chmod) is a change: its failed load was never tried again,
// since names, sizes and times had not changed. (Run as root here, where the mode does not
// stop a read: the reload is what is seen.)
TEST_F(ModelRepositoryTest, PollReloadsAModelWhoseFilesPermissionsChanged) {
  repo_.AddVersion("simple", 1, "simple");
  auto repo = Make(ControlMode::kPoll);
  repo->Poll();
  const auto before = repo->FindReady("simple", "");
  ASSERT_TRUE(before.ok());
  const std::filesystem::path file = repo_.root() / "simple" / "1" / "model.onnx";
  std::filesystem::permissions(file, std::filesystem::perms::owner_exec,
                               std::filesystem::perm_options::add);
  repo->Poll();
  const auto after = repo->FindReady("simple", "");
  ASSERT_TRUE(after.ok());
  EXPECT_NE(before->get(), after->get()) << "the poll did not load it again";
}

// A version folder that is a symbolic link, swapped to another folder (git-sync, a
// ConfigMap's ..data): the poll reloads it, as Triton's does. Files replaced inside the
// linked folder are seen too, and a link loop does not stop the poll.
TEST_F(ModelRepositoryTest, PollFollowsSymbolicLinks) {
  const std::filesystem::path store = repo_.root() / ".store";
  std::filesystem::create_directories(store / "a");
  std::filesystem::create_directories(store / "b");
  std::filesystem::copy_file(std::filesystem::path(FASTPATH_TEST_MODELS_DIR) / "simple.onnx",
                             store / "a" / "model.onnx");
  std::filesystem::copy_file(std::filesystem::path(FASTPATH_TEST_MODELS_DIR) / "simple_fp32.onnx",
                             store / "b" / "model.onnx");
  std::filesystem::create_directories(repo_.root() / "linked");
  std::filesystem::create_directory_symlink(store / "a", repo_.root() / "linked" / "1");
  std::filesystem::create_directory_symlink("..", store / "a" / "loop");
  auto repo = Make(ControlMode::kPoll);
  repo->Poll();
  const auto input_type = [&] {
    auto found = repo->FindReady("linked", "");
    return found.ok() ? (*found)->config.input(0).data_type() : inference::TYPE_INVALID;
  };
  ASSERT_EQ(input_type(), inference::TYPE_INT32);

  // The link swapped, as `ln -s b 1.new && mv -T 1.new 1` does.
  std::filesystem::create_directory_symlink(store / "b", repo_.root() / "linked" / "1.new");
  std::filesystem::rename(repo_.root() / "linked" / "1.new", repo_.root() / "linked" / "1");
  repo->Poll();
  EXPECT_EQ(input_type(), inference::TYPE_FP32);

  // The model folder itself a link, swapped to a copy whose names, sizes and times are the
  // same (rsync -a, cp -p): where it points is the change.
  for (const char* batch : {"4", "8"}) {
    const std::filesystem::path copy = store / (std::string("m") + batch);
    std::filesystem::create_directories(copy / "1");
    std::filesystem::copy_file(std::filesystem::path(FASTPATH_TEST_MODELS_DIR) / "simple.onnx",
                               copy / "1" / "model.onnx");
    std::ofstream(copy / "config.pbtxt") << "max_batch_size: " << batch << "\n";
    const auto when = std::filesystem::file_time_type::clock::now() - std::chrono::hours(1);
    for (const char* file : {"config.pbtxt", "1/model.onnx", "1", "."}) {
      std::filesystem::last_write_time(copy / file, when);
    }
  }
  std::filesystem::create_directory_symlink(store / "m4", repo_.root() / "swapped");
  repo->Poll();
  const auto batch = [&] {
    auto found = repo->FindReady("swapped", "");
    return found.ok() ? (*found)->config.max_batch_size() : -1;
  };
  ASSERT_EQ(batch(), 4);
  std::filesystem::create_directory_symlink(store / "m8", repo_.root() / "swapped.new");
  std::filesystem::rename(repo_.root() / "swapped.new", repo_.root() / "swapped");
  repo->Poll();
  EXPECT_EQ(batch(), 8);

  // A file replaced inside the folder the link points to.
  std::filesystem::copy_file(std::filesystem::path(FASTPATH_TEST_MODELS_DIR) / "simple.onnx",
                             store / "b" / "model.onnx",
                             std::filesystem::copy_options::overwrite_existing);
  repo->Poll();
  EXPECT_EQ(input_type(), inference::TYPE_INT32);
}

// Issue 12: what serves is never given up for what failed.
TEST_F(ModelRepositoryTest, AModelFileReplacedByABrokenOneKeepsThePreviousLoadServing) {
  repo_.AddVersion("simple", 1, "simple");
  auto repo = Make(ControlMode::kPoll);
  repo->Poll();
  auto before = repo->FindReady("simple", "");
  ASSERT_TRUE(before.ok());
  // Half a file, as an unfinished copy leaves it.
  std::ofstream(repo_.root() / "simple" / "1" / "model.onnx", std::ios::trunc) << "\x08\x07garbage";
  repo->Poll();
  auto after = repo->FindReady("simple", "");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->get(), before->get());  // the very load that served, still serving
  const auto index = repo->Index(false);
  const server::RepositoryEntry* e = Entry(index, "simple", "1");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->state, ModelState::kReady);
  EXPECT_NE(e->reason.find("the previous load keeps serving"), std::string::npos) << e->reason;
  EXPECT_TRUE(repo->AllReady());

  // The same broken file is not loaded again at every poll; a good one is.
  repo->Poll();
  EXPECT_EQ(repo->FindReady("simple", "")->get(), before->get());
  repo_.AddVersion("simple", 1, "simple");
  repo->Poll();
  auto fixed = repo->FindReady("simple", "");
  ASSERT_TRUE(fixed.ok());
  EXPECT_NE(fixed->get(), before->get());
  EXPECT_EQ(Entry(repo->Index(false), "simple", "1")->reason, "");
}

TEST_F(ModelRepositoryTest, AConfigThatNoLongerParsesKeepsThePreviousLoadServing) {
  repo_.AddVersion("simple", 1, "simple");
  auto repo = Make(ControlMode::kExplicit);
  ASSERT_TRUE(repo->Load("simple").ok());
  repo_.WriteConfig("simple", "max_batch_size: -3");
  const Status s = repo->Load("simple");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("the previous load keeps serving"), std::string::npos)
      << s.message();
  EXPECT_TRUE(repo->FindReady("simple", "").ok());
}

TEST_F(ModelRepositoryTest, ANewVersionThatFailsLeavesTheServingOneServing) {
  repo_.AddVersion("simple", 1, "simple");
  auto repo = Make(ControlMode::kPoll);
  repo->Poll();
  // Version 2 arrives broken: the policy (latest 1) selects it alone, and it fails.
  std::filesystem::create_directories(repo_.root() / "simple" / "2");
  std::ofstream(repo_.root() / "simple" / "2" / "model.onnx") << "not a model";
  repo->Poll();
  auto serving = repo->FindReady("simple", "");
  ASSERT_TRUE(serving.ok()) << serving.status().ToString();
  EXPECT_EQ((*serving)->version, 1);
  // Once version 2 is good, it takes over.
  repo_.AddVersion("simple", 2, "simple");
  repo->Poll();
  EXPECT_EQ((*repo->FindReady("simple", ""))->version, 2);
}

// One `simple` request straight to `version`'s scheduler, as the server sends it after
// finding the version.
Status RunOn(ModelVersion& version) {
  scheduler::Job job;
  job.request.model_name = "simple";
  for (const char* name : {"INPUT0", "INPUT1"}) {
    job.request.inputs.push_back({name, DataType::kInt32, {1, 16}, std::string(64, '\1')});
  }
  job.output_names = {"OUTPUT0", "OUTPUT1"};
  std::promise<Status> answered;
  job.done = [&answered](StatusOr<InferResponse> r) { answered.set_value(r.status()); };
  version.scheduler->Enqueue(std::move(job));
  return answered.get_future().get();
}

// Sends requests to `version` until one fails (it is stopped once its grace is over), for
// up to 20 s; returns that answer (Ok when none failed).
Status StoppedAnswer(ModelVersion& version) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  Status answer = Status::Ok();
  while (answer.ok() && std::chrono::steady_clock::now() < deadline) {
    answer = RunOn(version);
    if (answer.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return answer;
}

TEST_F(ModelRepositoryTest, AReplacedVersionServesWhatFoundItUntilItsGraceEnds) {
  repo_.AddVersion("simple", 1, "simple");
  fastpath::testing::ManualClock clock;
  auto made = MakeExplicit(&clock);
  ModelRepository& repo = *made;
  ASSERT_TRUE(repo.Load("simple").ok());
  const std::shared_ptr<ModelVersion> old = *repo.FindReady("simple", "");
  repo_.Touch("simple/1/model.onnx");
  ASSERT_TRUE(repo.Load("simple").ok());  // a reload: a new load takes its place
  EXPECT_NE(repo.FindReady("simple", "")->get(), old.get());
  // A request that found the old load just before the swap still runs on it.
  EXPECT_TRUE(RunOn(*old).ok());
  // After the grace it is stopped (drained), and refuses.
  clock.Advance(ModelRepository::kRetireGrace);
  const Status late = StoppedAnswer(*old);
  EXPECT_EQ(late.code(), StatusCode::kUnavailable);
  EXPECT_NE(late.message().find("shutting down"), std::string::npos) << late.message();
}

// As Triton (24.08 on): a version added or removed reloads no version whose files are as
// they were; that one serves on as loaded, its statistics with it. It was loaded again and
// admitted beside the serving one, twice its memory for a while, its statistics and drift
// baseline started over. The version the policy no longer selects is unloaded, and logged.
// A version whose files changed, or a changed config, loads again; a load of files that
// have not changed keeps what serves.
TEST_F(ModelRepositoryTest, AVersionAddedOrRemovedLoadsNoUnchangedVersionAgain) {
  for (int v : {1, 2}) repo_.AddVersion("simple", v, "simple");
  repo_.WriteConfig("simple", "version_policy { latest { num_versions: 2 } }");
  fastpath::testing::ManualClock clock;
  auto made = MakeExplicit(&clock);
  ModelRepository& repo = *made;
  ASSERT_TRUE(repo.Load("simple").ok());
  const std::shared_ptr<ModelVersion> one = *repo.FindReady("simple", "1");
  const std::shared_ptr<ModelVersion> two = *repo.FindReady("simple", "2");
  ASSERT_TRUE(RunOn(*two).ok());
  const auto load = [&](const char* step) {
    SCOPED_TRACE(step);
    const Status s = repo.Load("simple");
    EXPECT_TRUE(s.ok()) << s.ToString();
    return std::make_pair(*repo.FindReady("simple", "1"), *repo.FindReady("simple", "2"));
  };

  repo_.AddVersion("simple", 3, "simple");
  const log::Options saved = log::CurrentOptions();
  std::ostringstream logged;
  log::SetOutputForTesting(&logged);
  const Status added = repo.Load("simple");
  log::SetOutputForTesting(nullptr);
  log::Configure(saved);
  ASSERT_TRUE(added.ok()) << added.ToString();
  EXPECT_EQ(repo.FindReady("simple", "2")->get(), two.get()) << "version 2 was loaded again";
  EXPECT_EQ(two->stats.Snapshot("simple", "2").execution_count, 1u) << "its statistics restarted";
  EXPECT_TRUE(*repo.IsReady("simple", "3"));
  EXPECT_EQ(repo.FindReady("simple", "1").status().code(), StatusCode::kNotFound);
  EXPECT_THAT(logged.str(), ::testing::HasSubstr("model 'simple' version 2 is unchanged"));
  EXPECT_THAT(logged.str(), ::testing::HasSubstr("model 'simple' version 1 unloaded"));
  // Version 1 goes after its grace; version 2, kept, does not.
  clock.Advance(ModelRepository::kRetireGrace);
  EXPECT_FALSE(StoppedAnswer(*one).ok());
  EXPECT_TRUE(RunOn(*two).ok());

  // Version 3 removed: version 1 loads again, version 2 stays.
  std::filesystem::remove_all(repo_.root() / "simple" / "3");
  auto [one_again, two_still] = load("version 3 removed");
  EXPECT_NE(one_again.get(), one.get());
  EXPECT_EQ(two_still.get(), two.get());
  // Nothing changed: nothing loads.
  auto [one_same, two_same] = load("nothing changed");
  EXPECT_EQ(one_same.get(), one_again.get());
  EXPECT_EQ(two_same.get(), two.get());
  // Version 2's file changed: it alone loads again.
  repo_.Touch("simple/2/model.onnx");
  auto [one_kept, two_new] = load("version 2 changed");
  EXPECT_EQ(one_kept.get(), one_again.get());
  EXPECT_NE(two_new.get(), two.get());
  // The config changed: every version loads again.
  repo_.Touch("simple/config.pbtxt");
  auto [one_last, two_last] = load("the config changed");
  EXPECT_NE(one_last.get(), one_again.get());
  EXPECT_NE(two_last.get(), two_new.get());
  EXPECT_TRUE(RunOn(*one_last).ok());
  EXPECT_TRUE(RunOn(*two_last).ok());
}

TEST(ControlModeTest, Parses) {
  EXPECT_EQ(*ParseControlMode("poll"), ControlMode::kPoll);
  EXPECT_EQ(ParseControlMode("auto").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fastpath::repository
