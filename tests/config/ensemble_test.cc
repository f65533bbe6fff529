// Ensemble configs: the wiring checks (ValidateEnsembleGraph, also reached through
// ValidateModelConfig) and the load-time checks against the step models
// (ValidateEnsembleSteps), one bad case per test, each on an otherwise valid ensemble.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "fastpath/config/ensemble_config.h"
#include "fastpath/config/model_config.h"

namespace fastpath::config {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

inference::ModelConfig Parse(std::string_view text) {
  auto parsed = ParseModelConfig(text, "config.pbtxt");
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : inference::ModelConfig();
}

// Step models, as the repository would hold them once completed.
constexpr std::string_view kAddOne = R"pb(
  name: "add_one"
  platform: "onnxruntime_onnx"
  max_batch_size: 8
  input {
    name: "INPUT0"
    data_type: TYPE_FP32
    dims: [ -1 ]
  }
  output {
    name: "OUTPUT0"
    data_type: TYPE_FP32
    dims: [ -1 ]
  }
)pb";
constexpr std::string_view kDouble = R"pb(
  name: "double"
  platform: "onnxruntime_onnx"
  max_batch_size: 8
  input {
    name: "INPUT0"
    data_type: TYPE_FP32
    dims: [ 16 ]
  }
  output {
    name: "OUTPUT0"
    data_type: TYPE_FP32
    dims: [ 16 ]
  }
)pb";
constexpr std::string_view kSimpleFp32 = R"pb(
  name: "simple_fp32"
  platform: "onnxruntime_onnx"
  max_batch_size: 8
  input {
    name: "INPUT0"
    data_type: TYPE_FP32
    dims: [ 16 ]
  }
  input {
    name: "INPUT1"
    data_type: TYPE_FP32
    dims: [ 16 ]
  }
  output {
    name: "OUTPUT0"
    data_type: TYPE_FP32
    dims: [ 16 ]
  }
  output {
    name: "OUTPUT1"
    data_type: TYPE_FP32
    dims: [ 16 ]
  }
)pb";
constexpr std::string_view kSimpleInt32 = R"pb(
  name: "simple"
  platform: "onnxruntime_onnx"
  max_batch_size: 8
  input {
    name: "INPUT0"
    data_type: TYPE_INT32
    dims: [ 16 ]
  }
  input {
    name: "INPUT1"
    data_type: TYPE_INT32
    dims: [ 16 ]
  }
  output {
    name: "OUTPUT0"
    data_type: TYPE_INT32
    dims: [ 16 ]
  }
  output {
    name: "OUTPUT1"
    data_type: TYPE_INT32
    dims: [ 16 ]
  }
)pb";

// A diamond: X -> add_one -> A, X -> double -> B, (A, B) -> simple_fp32 -> SUM, DIFF.
constexpr std::string_view kDiamond = R"pb(
  name: "diamond"
  platform: "ensemble"
  max_batch_size: 8
  input {
    name: "X"
    data_type: TYPE_FP32
    dims: [ 16 ]
  }
  output {
    name: "SUM"
    data_type: TYPE_FP32
    dims: [ 16 ]
  }
  output {
    name: "DIFF"
    data_type: TYPE_FP32
    dims: [ 16 ]
  }
  ensemble_scheduling {
    step {
      model_name: "add_one"
      model_version: -1
      input_map { key: "INPUT0" value: "X" }
      output_map { key: "OUTPUT0" value: "A" }
    }
    step {
      model_name: "double"
      model_version: -1
      input_map { key: "INPUT0" value: "X" }
      output_map { key: "OUTPUT0" value: "B" }
    }
    step {
      model_name: "simple_fp32"
      model_version: -1
      input_map { key: "INPUT0" value: "A" }
      input_map { key: "INPUT1" value: "B" }
      output_map { key: "OUTPUT0" value: "SUM" }
      output_map { key: "OUTPUT1" value: "DIFF" }
    }
  }
)pb";

class EnsembleConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto text : {kAddOne, kDouble, kSimpleFp32, kSimpleInt32}) {
      inference::ModelConfig c = Parse(text);
      models_[c.name()] = c;
    }
  }
  StepModelLookup Lookup() {
    return [this](const std::string& name, int64_t version) -> StatusOr<inference::ModelConfig> {
      auto it = models_.find(name);
      if (it == models_.end()) return NotFound("unknown model '" + name + "'");
      if (version != -1 && version != 1) {
        return NotFound("unknown version '" + std::to_string(version) + "' of model '" + name +
                        "'");
      }
      return it->second;
    };
  }
  // kDiamond with `edit` applied.
  template <typename Edit>
  inference::ModelConfig Diamond(Edit edit) {
    inference::ModelConfig c = Parse(kDiamond);
    edit(c);
    return c;
  }
  inference::ModelEnsembling* Steps(inference::ModelConfig& c) {
    return c.mutable_ensemble_scheduling();
  }
  std::map<std::string, inference::ModelConfig> models_;
};

void ExpectInvalid(const Status& status, const std::string& a, const std::string& b = "") {
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  EXPECT_THAT(status.message(), AllOf(HasSubstr(a), HasSubstr(b)));
}

TEST_F(EnsembleConfigTest, DiamondIsValid) {
  const inference::ModelConfig c = Parse(kDiamond);
  EXPECT_TRUE(ValidateModelConfig(c).ok()) << ValidateModelConfig(c).ToString();
  EXPECT_TRUE(ValidateEnsembleSteps(c, Lookup()).ok())
      << ValidateEnsembleSteps(c, Lookup()).ToString();
  inference::ModelConfig completed = c;
  ASSERT_TRUE(CompleteEnsembleConfig(&completed).ok());
  EXPECT_EQ(completed.version_policy().latest().num_versions(), 1u);
}

TEST_F(EnsembleConfigTest, ParserKnowsTritonFields) {
  // Triton's spelling, as users write it (map entries as key/value pairs).
  const inference::ModelConfig c = Parse(kDiamond);
  ASSERT_EQ(c.ensemble_scheduling().step_size(), 3);
  EXPECT_EQ(c.ensemble_scheduling().step(2).input_map().at("INPUT1"), "B");
  EXPECT_EQ(c.ensemble_scheduling().step(0).model_version(), -1);
  EXPECT_TRUE(IsEnsemble(c));
}

TEST_F(EnsembleConfigTest, MissingStepModel) {
  auto c = Diamond([&](auto& c) { Steps(c)->mutable_step(1)->set_model_name("triple"); });
  EXPECT_TRUE(ValidateModelConfig(c).ok());  // the wiring alone is fine
  const Status s = ValidateEnsembleSteps(c, Lookup());
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("step 2 (model 'triple')"), HasSubstr("unknown model 'triple'")));
}

TEST_F(EnsembleConfigTest, StepModelNotReadyKeepsTheCode) {
  auto c = Parse(kDiamond);
  auto lookup = [&](const std::string& name, int64_t v) -> StatusOr<inference::ModelConfig> {
    if (name == "double") return Unavailable("model 'double' is not ready: corrupt file");
    return Lookup()(name, v);
  };
  const Status s = ValidateEnsembleSteps(c, lookup);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("step 2 (model 'double')"), HasSubstr("corrupt file")));
}

TEST_F(EnsembleConfigTest, UnsetVersionHintsAtMinusOne) {
  auto c = Diamond([&](auto& c) { Steps(c)->mutable_step(0)->clear_model_version(); });
  const Status s = ValidateEnsembleSteps(c, Lookup());
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("step 1 (model 'add_one')"), HasSubstr("write model_version: -1")));
}

TEST_F(EnsembleConfigTest, TensorNobodyProduces) {
  auto c =
      Diamond([&](auto& c) { (*Steps(c)->mutable_step(2)->mutable_input_map())["INPUT1"] = "C"; });
  ExpectInvalid(ValidateModelConfig(c), "step 3 (model 'simple_fp32'): input 'INPUT1'",
                "tensor 'C', which is neither an ensemble input nor any step's output");
}

TEST_F(EnsembleConfigTest, EnsembleInputNotRead) {
  auto c = Diamond([&](auto& c) {
    auto* in = c.add_input();
    in->set_name("UNUSED");
    in->set_data_type(inference::TYPE_FP32);
    in->add_dims(1);
  });
  ExpectInvalid(ValidateModelConfig(c), "ensemble input 'UNUSED' is not read by any step");
}

TEST_F(EnsembleConfigTest, EnsembleOutputNotProduced) {
  auto c =
      Diamond([&](auto& c) { Steps(c)->mutable_step(2)->mutable_output_map()->erase("OUTPUT1"); });
  ExpectInvalid(ValidateModelConfig(c), "ensemble output 'DIFF' is not produced by any step");
}

TEST_F(EnsembleConfigTest, OutputProducedTwice) {
  auto c = Diamond(
      [&](auto& c) { (*Steps(c)->mutable_step(1)->mutable_output_map())["OUTPUT0"] = "A"; });
  ExpectInvalid(ValidateModelConfig(c), "ensemble tensor 'A' is produced twice",
                "step 1 (model 'add_one') output 'OUTPUT0' and by step 2 (model 'double')");
}

TEST_F(EnsembleConfigTest, StepWritesAnEnsembleInput) {
  auto c = Diamond(
      [&](auto& c) { (*Steps(c)->mutable_step(1)->mutable_output_map())["OUTPUT0"] = "X"; });
  ExpectInvalid(ValidateModelConfig(c), "step 2 (model 'double')", "which is an ensemble input");
}

TEST_F(EnsembleConfigTest, Cycle) {
  // add_one reads B (from double), double reads A (from add_one).
  auto c = Diamond([&](auto& c) {
    (*Steps(c)->mutable_step(0)->mutable_input_map())["INPUT0"] = "B";
    (*Steps(c)->mutable_step(1)->mutable_input_map())["INPUT0"] = "A";
    // X must still be read by something: feed it to simple_fp32.
    (*Steps(c)->mutable_step(2)->mutable_input_map())["INPUT1"] = "X";
  });
  const Status s = ValidateModelConfig(c);
  ExpectInvalid(s, "ensemble steps form a cycle", "step 1 (model 'add_one')");
  EXPECT_THAT(s.message(), HasSubstr("step 2 (model 'double')"));
}

TEST_F(EnsembleConfigTest, StepRunsTheEnsembleItself) {
  auto c = Diamond([&](auto& c) { Steps(c)->mutable_step(1)->set_model_name("diamond"); });
  ExpectInvalid(ValidateModelConfig(c), "step 2 (model 'diamond')", "cannot run itself");
}

TEST_F(EnsembleConfigTest, StepIsAnEnsembleThatRunsTheEnsembleAgain) {
  // "outer" runs "wrap", which runs "diamond": a diamond reloaded with "outer" as a step
  // would run itself in a ring, each request for ever.
  // Not a raw string with a "pb" delimiter: clang-format would reformat the fragments.
  auto wrapper = [](const std::string& name, const std::string& step) {
    return Parse("name: \"" + name +
                 "\" platform: \"ensemble\" max_batch_size: 8 "
                 "input { name: \"X\" data_type: TYPE_FP32 dims: [ 16 ] } "
                 "output { name: \"SUM\" data_type: TYPE_FP32 dims: [ 16 ] } "
                 "ensemble_scheduling { step { model_name: \"" +
                 step +
                 "\" model_version: -1 input_map { key: \"X\" value: \"X\" } "
                 "output_map { key: \"SUM\" value: \"SUM\" } } }");
  };
  models_["wrap"] = wrapper("wrap", "diamond");
  models_["outer"] = wrapper("outer", "wrap");
  auto c = Diamond([&](auto& c) { Steps(c)->mutable_step(1)->set_model_name("outer"); });
  ExpectInvalid(ValidateEnsembleSteps(c, Lookup()), "step 2 (model 'outer') runs 'diamond' again",
                "(diamond -> outer -> wrap -> diamond): an ensemble cannot run itself");
  // The same wrappers around another model are steps like any.
  models_["wrap"] = wrapper("wrap", "double");
  auto fine = Diamond([&](auto& c) {
    Steps(c)->mutable_step(1)->set_model_name("outer");
    (*Steps(c)->mutable_step(1)->mutable_input_map())["X"] = "X";
    Steps(c)->mutable_step(1)->mutable_input_map()->erase("INPUT0");
    Steps(c)->mutable_step(1)->mutable_output_map()->erase("OUTPUT0");
    (*Steps(c)->mutable_step(1)->mutable_output_map())["SUM"] = "B";
  });
  EXPECT_TRUE(ValidateEnsembleSteps(fine, Lookup()).ok())
      << ValidateEnsembleSteps(fine, Lookup()).ToString();
}

TEST_F(EnsembleConfigTest, DtypeMismatch) {
  // simple (INT32) where simple_fp32 was: its inputs read FP32 tensors.
  auto c = Diamond([&](auto& c) { Steps(c)->mutable_step(2)->set_model_name("simple"); });
  const Status s = ValidateEnsembleSteps(c, Lookup());
  ExpectInvalid(s, "tensor 'A'", "TYPE_FP32");
  EXPECT_THAT(s.message(), AllOf(HasSubstr("step 3 (model 'simple') input 'INPUT0' is TYPE_INT32"),
                                 HasSubstr("step 1 (model 'add_one') output 'OUTPUT0'")));
}

TEST_F(EnsembleConfigTest, ShapeMismatch) {
  auto c = Diamond([&](auto& c) { c.mutable_input(0)->set_dims(0, 15); });
  const Status s = ValidateEnsembleSteps(c, Lookup());
  ExpectInvalid(s, "tensor 'X'", "ensemble input 'X' has shape [-1,15]");
  EXPECT_THAT(s.message(), HasSubstr("step 2 (model 'double') input 'INPUT0' has shape [-1,16]"));
}

TEST_F(EnsembleConfigTest, NonBatchingStepTakesTheFullShape) {
  // A step that does not batch, written with the batch dim, fits a batching ensemble.
  models_["double"] = Parse(R"pb(
    name: "double"
    platform: "onnxruntime_onnx"
    max_batch_size: 0
    input {
      name: "INPUT0"
      data_type: TYPE_FP32
      dims: [ -1, 16 ]
    }
    output {
      name: "OUTPUT0"
      data_type: TYPE_FP32
      dims: [ -1, 16 ]
    })pb");
  EXPECT_TRUE(ValidateEnsembleSteps(Parse(kDiamond), Lookup()).ok());
}

TEST_F(EnsembleConfigTest, NonBatchingStepWithoutTheBatchDimDoesNotFit) {
  // It would get [n, 16] where it takes [16].
  models_["double"] = Parse(R"pb(
    name: "double"
    platform: "onnxruntime_onnx"
    max_batch_size: 0
    input {
      name: "INPUT0"
      data_type: TYPE_FP32
      dims: [ 16 ]
    }
    output {
      name: "OUTPUT0"
      data_type: TYPE_FP32
      dims: [ 16 ]
    })pb");
  ExpectInvalid(ValidateEnsembleSteps(Parse(kDiamond), Lookup()),
                "ensemble input 'X' has shape [-1,16]",
                "step 2 (model 'double') input 'INPUT0' has shape [16]");
}

TEST_F(EnsembleConfigTest, StepBatchesLessThanTheEnsemble) {
  auto c = Diamond([&](auto& c) { c.set_max_batch_size(16); });
  ExpectInvalid(ValidateEnsembleSteps(c, Lookup()), "allows batches of 16",
                "step 1 (model 'add_one') allows only 8");
}

TEST_F(EnsembleConfigTest, InputMapNamesAnUnknownInput) {
  auto c = Diamond([&](auto& c) {
    auto* m = Steps(c)->mutable_step(0)->mutable_input_map();
    m->erase("INPUT0");
    (*m)["IMAGE"] = "X";
  });
  ExpectInvalid(ValidateEnsembleSteps(c, Lookup()), "step 1 (model 'add_one')",
                "input_map names input 'IMAGE', which the model does not have (its inputs: "
                "'INPUT0')");
}

// As Triton refuses it ("ensemble tensor 'DIFF' is unused"): its step would run on every
// request for nothing, and fail requests whose outputs need none of it.
TEST_F(EnsembleConfigTest, AStepOutputThatNothingReadsIsRefused) {
  auto c = Diamond([&](auto& c) { c.mutable_output()->RemoveLast(); });  // DIFF
  ExpectInvalid(ValidateModelConfig(c),
                "ensemble tensor 'DIFF' (step 3 (model 'simple_fp32') output 'OUTPUT1') is unused",
                "leave the step output out of output_map");
  // A step whose only output goes nowhere is to be removed, not emptied (an empty
  // output_map is refused too).
  auto dead = Diamond([&](auto& c) {
    auto* step = Steps(c)->add_step();
    *step = Steps(c)->step(0);
    (*step->mutable_output_map())["OUTPUT0"] = "DEAD";
  });
  ExpectInvalid(ValidateModelConfig(dead), "ensemble tensor 'DEAD' (step 4 (model 'add_one')",
                "it is the step's only output: remove the step");
}

TEST_F(EnsembleConfigTest, RequiredStepInputNotMapped) {
  auto c = Diamond([&](auto& c) {
    Steps(c)->mutable_step(2)->mutable_input_map()->erase("INPUT1");
    (*Steps(c)->mutable_step(2)->mutable_input_map())["INPUT0"] = "A";
    // INPUT1 of simple_fp32 is not fed; B, which no step reads now, is an output instead.
    *c.add_output() = c.output(0);
    c.mutable_output(c.output_size() - 1)->set_name("B");
  });
  ExpectInvalid(ValidateEnsembleSteps(c, Lookup()), "step 3 (model 'simple_fp32')",
                "input 'INPUT1' is not in input_map");
}

TEST_F(EnsembleConfigTest, OutputMapNamesAnUnknownOutput) {
  auto c = Diamond([&](auto& c) {
    auto* m = Steps(c)->mutable_step(0)->mutable_output_map();
    m->erase("OUTPUT0");
    (*m)["logits"] = "A";
  });
  ExpectInvalid(ValidateEnsembleSteps(c, Lookup()), "step 1 (model 'add_one')",
                "output_map names output 'logits'");
}

TEST_F(EnsembleConfigTest, StructuralRules) {
  ExpectInvalid(ValidateModelConfig(Diamond([&](auto& c) { c.clear_ensemble_scheduling(); })),
                "needs ensemble_scheduling");
  ExpectInvalid(ValidateModelConfig(Diamond([&](auto& c) {
                  c.add_instance_group()->set_kind(inference::ModelInstanceGroup::KIND_CPU);
                })),
                "an ensemble has no instance_group");
  ExpectInvalid(ValidateModelConfig(Diamond([&](auto& c) { c.set_backend("onnxruntime"); })),
                "no backend");
  ExpectInvalid(ValidateModelConfig(Diamond([&](auto& c) { c.mutable_output(0)->clear_dims(); })),
                "SUM");
  ExpectInvalid(ValidateModelConfig(Diamond([&](auto& c) { c.set_platform("onnxruntime_onnx"); })),
                "ensemble_scheduling needs platform: \"ensemble\"");
  ExpectInvalid(
      ValidateModelConfig(Diamond([&](auto& c) { Steps(c)->mutable_step(0)->clear_output_map(); })),
      "step 1 (model 'add_one'): output_map is empty");
  ExpectInvalid(ValidateModelConfig(
                    Diamond([&](auto& c) { Steps(c)->mutable_step(0)->set_model_version(-2); })),
                "model_version -2");
  ExpectInvalid(ValidateModelConfig(
                    Diamond([&](auto& c) { Steps(c)->mutable_step(0)->set_model_name("../x"); })),
                "model_name must not contain");
}

TEST_F(EnsembleConfigTest, UnknownPlatformMentionsEnsembles) {
  inference::ModelConfig c;
  c.set_platform("tensorflow_savedmodel");
  ExpectInvalid(ValidateModelConfig(c), "platform 'tensorflow_savedmodel'", "\"ensemble\"");
}

}  // namespace
}  // namespace fastpath::config
