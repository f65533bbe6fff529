// CompleteAndValidate and SelectVersions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fastpath/config/model_config.h"

namespace fastpath::config {
namespace {

using backend::ModelSignature;
using backend::TensorSpec;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

inference::ModelConfig Parse(std::string_view text) {
  auto parsed = ParseModelConfig(text, "config.pbtxt");
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : inference::ModelConfig();
}

// An image classifier that batches: [batch,3,8,8] -> [batch,10].
ModelSignature Classifier() {
  return {{{"image", DataType::kFp32, {-1, 3, 8, 8}, {"batch", "", "", ""}}},
          {{"logits", DataType::kFp32, {-1, 10}, {"batch", ""}}}};
}

// A model with a fixed first dim: it cannot batch.
ModelSignature Fixed() {
  return {{{"x", DataType::kInt64, {1, 4}, {}}, {"mask", DataType::kBool, {1, 4}, {}}},
          {{"y", DataType::kFp32, {1, 2}, {}}}};
}

void ExpectInvalid(const Status& status, const std::string& substring) {
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  EXPECT_THAT(status.message(), HasSubstr(substring));
}

TEST(CompleteTest, MissingConfigIsCompletedEntirely) {
  inference::ModelConfig c;  // no config.pbtxt at all
  ASSERT_TRUE(CompleteAndValidate(Classifier(), &c).ok());
  EXPECT_EQ(c.name(), "");  // the caller names the model after its folder
  EXPECT_EQ(c.platform(), "onnxruntime_onnx");
  EXPECT_EQ(c.backend(), "onnxruntime");
  EXPECT_EQ(c.max_batch_size(), kDefaultMaxBatchSize);
  // As Triton's ONNX Runtime backend: a model that batches gets its dynamic batcher.
  ASSERT_TRUE(c.has_dynamic_batching());
  EXPECT_EQ(c.dynamic_batching().max_queue_delay_microseconds(), 0u);
  EXPECT_TRUE(c.dynamic_batching().preferred_batch_size().empty());
  ASSERT_EQ(c.input_size(), 1);
  EXPECT_EQ(c.input(0).name(), "image");
  EXPECT_EQ(c.input(0).data_type(), inference::TYPE_FP32);
  EXPECT_THAT(c.input(0).dims(), ElementsAre(3, 8, 8));
  ASSERT_EQ(c.output_size(), 1);
  EXPECT_THAT(c.output(0).dims(), ElementsAre(10));
  ASSERT_EQ(c.instance_group_size(), 1);
  EXPECT_EQ(c.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(c.instance_group(0).count(), 1);
  EXPECT_EQ(c.version_policy().latest().num_versions(), 1u);
  EXPECT_THAT(ProtocolShape(c, c.input(0).dims()), ElementsAre(-1, 3, 8, 8));
}

TEST(CompleteTest, FixedFirstDimMeansNoBatching) {
  inference::ModelConfig c;
  c.set_name("fixed");
  ASSERT_TRUE(CompleteAndValidate(Fixed(), &c).ok());
  EXPECT_EQ(c.max_batch_size(), 0);
  ASSERT_EQ(c.input_size(), 2);
  EXPECT_THAT(c.input(0).dims(), ElementsAre(1, 4));
  EXPECT_EQ(c.input(1).data_type(), inference::TYPE_BOOL);
  EXPECT_EQ(c.instance_group(0).name(), "fixed_0");
  EXPECT_THAT(ProtocolShape(c, c.input(0).dims()), ElementsAre(1, 4));
}

TEST(CompleteTest, TheDynamicBatcherIsAddedOnlyWhereTritonAddsIt) {
  auto complete = [](const std::string& text, const ModelSignature& signature) {
    ParseDetails details;
    auto parsed = ParseModelConfig(text, "config.pbtxt", &details);
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    inference::ModelConfig c = parsed.ok() ? *parsed : inference::ModelConfig();
    CompletionOptions options;
    options.max_batch_size_set = details.max_batch_size_set;
    const Status status = CompleteAndValidate(signature, &c, options);
    EXPECT_TRUE(status.ok()) << text << ": " << status.ToString();
    return c;
  };
  // Inputs left to the model, max_batch_size written: added.
  EXPECT_TRUE(complete("max_batch_size: 8", Classifier()).has_dynamic_batching());
  // Outputs left to the model: added.
  EXPECT_TRUE(complete(R"(input { name: "image" })", Classifier()).has_dynamic_batching());
  // A config that lists its inputs and outputs is taken as written.
  EXPECT_FALSE(complete(R"(max_batch_size: 8
                           input { name: "image" data_type: TYPE_FP32 dims: [ 3, 8, 8 ] }
                           output { name: "logits" data_type: TYPE_FP32 dims: [ 10 ] })",
                        Classifier())
                   .has_dynamic_batching());
  // A batch of one has nothing to gather; no batching at all has no batcher.
  EXPECT_FALSE(complete("max_batch_size: 1", Classifier()).has_dynamic_batching());
  EXPECT_FALSE(complete("max_batch_size: 0", Classifier()).has_dynamic_batching());
  EXPECT_FALSE(complete("", Fixed()).has_dynamic_batching());
  // The user's own section is kept as written.
  const inference::ModelConfig own =
      complete("dynamic_batching { max_queue_delay_microseconds: 300 }", Classifier());
  EXPECT_EQ(own.dynamic_batching().max_queue_delay_microseconds(), 300u);
}

// Unlike Triton's, the batcher is added only where every first dim is one dim of the model:
// an output whose first dim is another size (a sum over the rows, NonZero's count) would give
// one request another's rows once requests are batched together. Such a model keeps its
// max_batch_size and runs each request alone, and the notes say why.
TEST(CompleteTest, NoDynamicBatcherWhereAnOutputsFirstDimMayNotBeTheBatch) {
  CompletionNotes notes;
  inference::ModelConfig added;
  ASSERT_TRUE(CompleteAndValidate(Classifier(), &added, CompletionOptions{}, &notes).ok());
  EXPECT_TRUE(notes.max_batch_size_filled);
  EXPECT_TRUE(notes.dynamic_batching_added);
  EXPECT_EQ(notes.dynamic_batching_withheld, "");

  // y = ReduceSum(x, axes=[0]): [N, M] -> [M].
  const ModelSignature reduce = {{{"x", DataType::kFp32, {-1, -1}, {"N", "M"}}},
                                 {{"y", DataType::kFp32, {-1}, {"M"}}}};
  notes = {};
  inference::ModelConfig c;
  ASSERT_TRUE(CompleteAndValidate(reduce, &c, CompletionOptions{}, &notes).ok());
  EXPECT_EQ(c.max_batch_size(), kDefaultMaxBatchSize);  // as Triton fills it
  EXPECT_FALSE(c.has_dynamic_batching());
  EXPECT_FALSE(notes.dynamic_batching_added);
  EXPECT_EQ(notes.dynamic_batching_withheld,
            "the first dim of 'y' is 'M' in the model, not 'N' as that of 'x'");

  // A first dim with no name cannot be told to be the batch.
  ModelSignature unnamed = Classifier();
  unnamed.outputs[0].dim_names.clear();
  notes = {};
  inference::ModelConfig d;
  ASSERT_TRUE(CompleteAndValidate(unnamed, &d, CompletionOptions{}, &notes).ok());
  EXPECT_FALSE(d.has_dynamic_batching());
  EXPECT_THAT(notes.dynamic_batching_withheld, HasSubstr("'logits' has no name in the model"));

  // A config that writes its batcher is taken as written, and nothing is withheld.
  notes = {};
  inference::ModelConfig written = Parse("dynamic_batching { }");
  ASSERT_TRUE(CompleteAndValidate(reduce, &written, CompletionOptions{}, &notes).ok());
  EXPECT_TRUE(written.has_dynamic_batching());
  EXPECT_EQ(notes.dynamic_batching_withheld, "");
}

TEST(CompleteTest, OneFixedOutputPreventsBatching) {
  ModelSignature s = Classifier();
  s.outputs.push_back({"count", DataType::kInt64, {1}, {}});
  inference::ModelConfig c;
  ASSERT_TRUE(CompleteAndValidate(s, &c).ok());
  EXPECT_EQ(c.max_batch_size(), 0);
  EXPECT_THAT(c.input(0).dims(), ElementsAre(-1, 3, 8, 8));
}

TEST(CompleteTest, PartialConfigKeepsWhatIsWrittenAndFillsTheRest) {
  inference::ModelConfig c = Parse(R"pb(
    name: "cls"
    max_batch_size: 2
    input { name: "image" }
    instance_group { kind: KIND_CPU count: 3 }
    parameters { key: "intra_op_thread_count" value { string_value: "2" } }
  )pb");
  ASSERT_TRUE(CompleteAndValidate(Classifier(), &c).ok());
  EXPECT_EQ(c.max_batch_size(), 2);
  EXPECT_EQ(c.input(0).data_type(), inference::TYPE_FP32);
  EXPECT_THAT(c.input(0).dims(), ElementsAre(3, 8, 8));
  EXPECT_EQ(c.output(0).name(), "logits");
  EXPECT_EQ(c.instance_group(0).count(), 3);
  EXPECT_EQ(c.instance_group(0).name(), "cls_0");
}

// As Triton's: a config that lists some outputs serves those only (the model's others are
// not computed for clients, nor in its metadata); one that lists none takes them all.
TEST(CompleteTest, AConfigsOutputsAreAllItServes) {
  const ModelSignature two{
      {{"x", DataType::kFp32, {-1, 4}, {}}},
      {{"sum", DataType::kFp32, {-1, 4}, {}}, {"diff", DataType::kFp32, {-1, 4}, {}}}};
  inference::ModelConfig listed = Parse(R"(output { name: "diff" })");
  ASSERT_TRUE(CompleteAndValidate(two, &listed).ok());
  ASSERT_EQ(listed.output_size(), 1);
  EXPECT_EQ(listed.output(0).name(), "diff");
  EXPECT_THAT(listed.output(0).dims(), ElementsAre(4));
  inference::ModelConfig none = Parse(R"(input { name: "x" })");
  ASSERT_TRUE(CompleteAndValidate(two, &none).ok());
  EXPECT_EQ(none.output_size(), 2);
}

TEST(CompleteTest, ConfigMayNarrowDynamicDims) {
  ModelSignature s = {{{"tokens", DataType::kInt64, {-1, -1}, {}}},
                      {{"out", DataType::kFp32, {-1, -1, 16}, {}}}};
  inference::ModelConfig c = Parse(R"pb(
    max_batch_size: 4
    input { name: "tokens" data_type: TYPE_INT64 dims: [ 128 ] }
  )pb");
  ASSERT_TRUE(CompleteAndValidate(s, &c).ok());
  EXPECT_THAT(c.input(0).dims(), ElementsAre(128));
  EXPECT_THAT(c.output(0).dims(), ElementsAre(-1, 16));
}

TEST(CompleteTest, FullRankDimsMeanNoBatchingEvenWhenTheModelCould) {
  inference::ModelConfig c = Parse(R"pb(
    input { name: "image" data_type: TYPE_FP32 dims: [ -1, 3, 8, 8 ] }
  )pb");
  ASSERT_TRUE(CompleteAndValidate(Classifier(), &c).ok());
  EXPECT_EQ(c.max_batch_size(), 0);
  EXPECT_THAT(c.output(0).dims(), ElementsAre(-1, 10));
}

TEST(CompleteTest, ExplicitZeroMaxBatchSizeIsHonouredWhenTheCallerSaysSo) {
  ParseDetails details;
  auto parsed = ParseModelConfig("max_batch_size: 0", "config.pbtxt", &details);
  ASSERT_TRUE(parsed.ok());
  inference::ModelConfig c = *parsed;
  CompletionOptions options;
  options.max_batch_size_set = details.max_batch_size_set;
  ASSERT_TRUE(CompleteAndValidate(Classifier(), &c, options).ok());
  EXPECT_EQ(c.max_batch_size(), 0);
  EXPECT_THAT(c.input(0).dims(), ElementsAre(-1, 3, 8, 8));

  // The default max batch size is an option too.
  inference::ModelConfig d;
  CompletionOptions eight;
  eight.default_max_batch_size = 8;
  ASSERT_TRUE(CompleteAndValidate(Classifier(), &d, eight).ok());
  EXPECT_EQ(d.max_batch_size(), 8);
}

TEST(CompleteTest, ScalarsBecomeDimsOneWithAnEmptyReshape) {
  ModelSignature s = {{{"alpha", DataType::kFp32, {}, {}}}, {{"beta", DataType::kFp32, {}, {}}}};
  inference::ModelConfig c;
  ASSERT_TRUE(CompleteAndValidate(s, &c).ok());
  EXPECT_EQ(c.max_batch_size(), 0);
  EXPECT_THAT(c.input(0).dims(), ElementsAre(1));
  EXPECT_TRUE(c.input(0).has_reshape());
  EXPECT_EQ(c.input(0).reshape().shape_size(), 0);

  ModelSignature batched = {{{"alpha", DataType::kFp32, {-1}, {}}},
                            {{"beta", DataType::kFp32, {-1}, {}}}};
  inference::ModelConfig b;
  ASSERT_TRUE(CompleteAndValidate(batched, &b).ok());
  EXPECT_EQ(b.max_batch_size(), kDefaultMaxBatchSize);
  EXPECT_THAT(b.input(0).dims(), ElementsAre(1));
  EXPECT_TRUE(b.input(0).has_reshape());
}

// A model that does not batch, with a rank-0 tensor written dims [1] (what Triton's own
// auto-complete writes with max_batch_size 0): the scalar, as Triton reads it. It was
// refused as a rank mismatch.
TEST(CompleteTest, DimsOneIsAScalarOfAModelThatDoesNotBatch) {
  const ModelSignature scalars{{{"x", DataType::kFp32, {}, {}}}, {{"y", DataType::kFp32, {}, {}}}};
  inference::ModelConfig c = Parse(R"(
    max_batch_size: 0
    input { name: "x" data_type: TYPE_FP32 dims: [ 1 ] }
    output { name: "y" data_type: TYPE_FP32 dims: [ 1 ] })");
  ASSERT_TRUE(CompleteAndValidate(scalars, &c, {.max_batch_size_set = true}).ok());
  EXPECT_TRUE(IsScalarReshape(c.input(0)));
  EXPECT_TRUE(IsScalarReshape(c.output(0)));
}

TEST(CompleteTest, ReshapeIsWhatTheModelSees) {
  ModelSignature s = {{{"img", DataType::kUint8, {-1, 2, 6}, {}}},
                      {{"o", DataType::kFp32, {-1, 12}, {}}}};
  inference::ModelConfig c = Parse(R"pb(
    max_batch_size: 2
    input { name: "img" data_type: TYPE_UINT8 dims: [ 12 ] reshape { shape: [ 2, 6 ] } }
    output { name: "o" data_type: TYPE_FP32 dims: [ 3, 4 ] reshape { shape: [ 12 ] } }
  )pb");
  ASSERT_TRUE(CompleteAndValidate(s, &c).ok());

  inference::ModelConfig bad = Parse(R"pb(
    max_batch_size: 2
    input { name: "img" data_type: TYPE_UINT8 dims: [ 12 ] reshape { shape: [ 3, 4 ] } }
  )pb");
  ExpectInvalid(CompleteAndValidate(s, &bad), "input 'img': dim 1 is 3 in the config");
}

TEST(CompleteTest, UnknownInputOrOutputIsNamed) {
  inference::ModelConfig c = Parse("input { name: \"picture\" data_type: TYPE_FP32 dims: [ 3, 8, 8 ] }");
  const Status s = CompleteAndValidate(Classifier(), &c);
  ExpectInvalid(s, "input 'picture' is in the config but not in the model");
  EXPECT_THAT(s.message(), HasSubstr("'image'"));

  inference::ModelConfig d = Parse("output { name: \"probs\" data_type: TYPE_FP32 dims: [ 10 ] }");
  ExpectInvalid(CompleteAndValidate(Classifier(), &d),
                "output 'probs' is in the config but not in the model (the model's outputs: 'logits')");
}

TEST(CompleteTest, WrongDatatypeNamesBoth) {
  inference::ModelConfig c = Parse("max_batch_size: 4 input { name: \"image\" data_type: TYPE_FP16 dims: [ 3, 8, 8 ] }");
  ExpectInvalid(CompleteAndValidate(Classifier(), &c),
                "input 'image': data_type is TYPE_FP16 in the config but TYPE_FP32 in the model");
}

TEST(CompleteTest, RankMismatchNamesBothShapes) {
  inference::ModelConfig c = Parse("max_batch_size: 4 input { name: \"image\" data_type: TYPE_FP32 dims: [ 3, 64 ] }");
  const Status s = CompleteAndValidate(Classifier(), &c);
  ExpectInvalid(s, "input 'image': the config's dims [3,64] give the model shape [-1,3,64] (rank 3)");
  EXPECT_THAT(s.message(), HasSubstr("[-1,3,8,8] (rank 4)"));

  // The classic mistake: the batch dim written in dims while batching.
  inference::ModelConfig d = Parse("max_batch_size: 4 input { name: \"image\" data_type: TYPE_FP32 dims: [ -1, 3, 8, 8 ] }");
  ExpectInvalid(CompleteAndValidate(Classifier(), &d), "dims leave out the batch dim");
}

TEST(CompleteTest, FixedDimMismatchNamesConfigAndModelValues) {
  inference::ModelConfig c = Parse("max_batch_size: 4 output { name: \"logits\" data_type: TYPE_FP32 dims: [ 1000 ] }");
  ExpectInvalid(CompleteAndValidate(Classifier(), &c),
                "output 'logits': dim 1 is 1000 in the config");
  EXPECT_THAT(CompleteAndValidate(Classifier(), &c).message(), HasSubstr("but 10 in the model"));

  // A config -1 where the model is fixed would let through requests the model rejects.
  inference::ModelConfig d = Parse("input { name: \"x\" data_type: TYPE_INT64 dims: [ 1, -1 ] }");
  ExpectInvalid(CompleteAndValidate(Fixed(), &d), "input 'x': dim 1 is -1 in the config");
}

TEST(CompleteTest, BatchingAModelWithAFixedFirstDimIsAContradiction) {
  inference::ModelConfig c = Parse("max_batch_size: 8");
  const Status s = CompleteAndValidate(Fixed(), &c);
  ExpectInvalid(s, "max_batch_size is 8 but the model's shape [1,4] has no dynamic (-1) first dim");
}

TEST(CompleteTest, ValidationRulesStillApply) {
  inference::ModelConfig c = Parse("instance_group { kind: KIND_AUTO }");
  ExpectInvalid(CompleteAndValidate(Classifier(), &c), "KIND_AUTO");
  inference::ModelConfig d = Parse("platform: \"pytorch_libtorch\"");
  ExpectInvalid(CompleteAndValidate(Classifier(), &d), "platform 'pytorch_libtorch'");
  // dynamic_batching on a model that cannot batch.
  inference::ModelConfig e = Parse("dynamic_batching { }");
  ExpectInvalid(CompleteAndValidate(Fixed(), &e), "dynamic_batching requires max_batch_size > 0");
  // dynamic_batching on a model that can: max_batch_size is inferred first.
  inference::ModelConfig f = Parse("dynamic_batching { }");
  EXPECT_TRUE(CompleteAndValidate(Classifier(), &f).ok());
  EXPECT_EQ(f.max_batch_size(), kDefaultMaxBatchSize);
}

// The repository's order: parse, check what is written, complete from the model.
TEST(CompleteTest, PartialConfigPassesWrittenChecksThenCompletes) {
  inference::ModelConfig c = Parse(R"pb(
    input { name: "image" }
    dynamic_batching { preferred_batch_size: [ 2 ] }
    model_warmup { batch_size: 2 inputs { key: "image" value { data_type: TYPE_FP32 dims: [ 3, 8, 8 ] zero_data: true } } }
    instance_group { kind: KIND_CPU }
  )pb");
  c.set_name("cls");
  ASSERT_TRUE(ValidateModelConfig(c).ok()) << ValidateModelConfig(c).ToString();
  ASSERT_TRUE(CompleteAndValidate(Classifier(), &c).ok());
  EXPECT_EQ(c.max_batch_size(), kDefaultMaxBatchSize);
  EXPECT_TRUE(ValidateCompletedModelConfig(c).ok());

  // A warmup sample that misses an input the model has is caught after completion.
  ModelSignature two = Classifier();
  two.inputs.push_back({"bias", DataType::kFp32, {-1, 1}, {}});
  inference::ModelConfig d = Parse(R"pb(
    model_warmup { batch_size: 1 inputs { key: "image" value { data_type: TYPE_FP32 dims: [ 3, 8, 8 ] zero_data: true } } }
  )pb");
  ASSERT_TRUE(ValidateModelConfig(d).ok());
  ExpectInvalid(CompleteAndValidate(two, &d), "inputs lack the model's input 'bias'");
}

TEST(CompleteTest, GpuGroupIsKeptAsWritten) {
  inference::ModelConfig c = Parse("instance_group { kind: KIND_GPU gpus: [ 1 ] }");
  ASSERT_TRUE(CompleteAndValidate(Classifier(), &c).ok());
  ASSERT_EQ(c.instance_group_size(), 1);
  EXPECT_EQ(c.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_GPU);
  EXPECT_EQ(c.instance_group(0).count(), 1);
}

TEST(CompleteTest, UnsupportedModelElementTypeIsNamed) {
  ModelSignature s = {{{"weird", DataType::kInvalid, {-1}, {}}}, {}};
  inference::ModelConfig c;
  ExpectInvalid(CompleteAndValidate(s, &c), "'weird'");
}

TEST(CompleteTest, CompletedConfigIsAFixedPoint) {
  inference::ModelConfig c;
  c.set_name("m");
  ASSERT_TRUE(CompleteAndValidate(Classifier(), &c).ok());
  inference::ModelConfig again = c;
  ASSERT_TRUE(CompleteAndValidate(Classifier(), &again).ok());
  EXPECT_EQ(again.SerializeAsString(), c.SerializeAsString());
}

TEST(SelectVersionsTest, LatestIsTheDefault) {
  auto v = SelectVersions(inference::ModelVersionPolicy(), {3, 1, 2});
  ASSERT_TRUE(v.ok());
  EXPECT_THAT(*v, ElementsAre(3));
}

TEST(SelectVersionsTest, LatestN) {
  inference::ModelVersionPolicy p;
  p.mutable_latest()->set_num_versions(2);
  auto v = SelectVersions(p, {10, 2, 7, 1, 7});
  ASSERT_TRUE(v.ok());
  EXPECT_THAT(*v, ElementsAre(7, 10));
  p.mutable_latest()->set_num_versions(9);
  v = SelectVersions(p, {2, 1});
  ASSERT_TRUE(v.ok());
  EXPECT_THAT(*v, ElementsAre(1, 2));
}

TEST(SelectVersionsTest, All) {
  inference::ModelVersionPolicy p;
  p.mutable_all();
  auto v = SelectVersions(p, {5, 1, 3});
  ASSERT_TRUE(v.ok());
  EXPECT_THAT(*v, ElementsAre(1, 3, 5));
}

TEST(SelectVersionsTest, Specific) {
  inference::ModelVersionPolicy p;
  p.mutable_specific()->add_versions(3);
  p.mutable_specific()->add_versions(1);
  auto v = SelectVersions(p, {1, 2, 3});
  ASSERT_TRUE(v.ok());
  EXPECT_THAT(*v, ElementsAre(1, 3));

  p.mutable_specific()->add_versions(4);
  v = SelectVersions(p, {1, 2, 3});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(v.status().message(), HasSubstr("version 4"));
  EXPECT_THAT(v.status().message(), HasSubstr("found: 1, 2, 3"));
}

TEST(SelectVersionsTest, NothingOnDisk) {
  auto v = SelectVersions(inference::ModelVersionPolicy(), {});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kNotFound);
  inference::ModelVersionPolicy all;
  all.mutable_all();
  EXPECT_FALSE(SelectVersions(all, {}).ok());
}

}  // namespace
}  // namespace fastpath::config
