// ValidateInferInputs, ValidateRequestedOutputs, reshapes and InstanceOptionsFor.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fastpath/config/model_config.h"

namespace fastpath::config {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

inference::ModelConfig Parse(std::string_view text) {
  auto parsed = ParseModelConfig(text, "config.pbtxt");
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : inference::ModelConfig();
}

// A completed, batching config: x FP32 [-1,4], ids INT64 [-1,-1], opt optional, BYTES text.
inference::ModelConfig Batching() {
  return Parse(R"pb(
    name: "m"
    max_batch_size: 8
    input { name: "x" data_type: TYPE_FP32 dims: [ 4 ] }
    input { name: "ids" data_type: TYPE_INT64 dims: [ -1 ] }
    input { name: "opt" data_type: TYPE_FP32 dims: [ 1 ] optional: true }
    output { name: "y" data_type: TYPE_FP32 dims: [ 2 ] }
    output { name: "z" data_type: TYPE_STRING dims: [ 1 ] }
  )pb");
}

Tensor Make(const std::string& name, DataType dtype, std::vector<int64_t> shape) {
  Tensor t{name, dtype, std::move(shape), ""};
  auto count = ElementCount(t.shape);
  if (count.ok()) t.data.assign(static_cast<size_t>(*count) * ElementSize(dtype), '\0');
  return t;
}

// x and ids with batch `batch`.
std::vector<Tensor> Good(int64_t batch) {
  return {Make("x", DataType::kFp32, {batch, 4}), Make("ids", DataType::kInt64, {batch, 7})};
}

constexpr int64_t kMax = 1 << 24;

void ExpectInvalid(const Status& status, const std::string& substring) {
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  EXPECT_THAT(status.message(), HasSubstr(substring));
}

TEST(ValidateInferInputsTest, HappyPath) {
  EXPECT_TRUE(ValidateInferInputs(Batching(), Good(1), kMax).ok());
  EXPECT_TRUE(ValidateInferInputs(Batching(), Good(8), kMax).ok());
  auto with_optional = Good(2);
  with_optional.push_back(Make("opt", DataType::kFp32, {2, 1}));
  EXPECT_TRUE(ValidateInferInputs(Batching(), with_optional, kMax).ok());
}

TEST(ValidateInferInputsTest, MissingInput) {
  auto inputs = Good(1);
  inputs.pop_back();
  ExpectInvalid(ValidateInferInputs(Batching(), inputs, kMax),
                "missing input 'ids' (datatype INT64, shape [-1,-1])");
}

TEST(ValidateInferInputsTest, UnknownInput) {
  auto inputs = Good(1);
  inputs.push_back(Make("extra", DataType::kFp32, {1, 4}));
  const Status s = ValidateInferInputs(Batching(), inputs, kMax);
  ExpectInvalid(s, "unexpected input 'extra' for model 'm'");
  EXPECT_THAT(s.message(), HasSubstr("'x', 'ids', 'opt'"));
}

TEST(ValidateInferInputsTest, DuplicateInput) {
  auto inputs = Good(1);
  inputs.push_back(inputs[0]);
  ExpectInvalid(ValidateInferInputs(Batching(), inputs, kMax), "input 'x' appears more than once");
}

TEST(ValidateInferInputsTest, WrongDatatypeNamesBoth) {
  auto inputs = Good(1);
  inputs[0] = Make("x", DataType::kFp64, {1, 4});
  ExpectInvalid(ValidateInferInputs(Batching(), inputs, kMax),
                "input 'x': datatype is FP64 but the model expects FP32");
}

TEST(ValidateInferInputsTest, WrongRank) {
  auto inputs = Good(1);
  inputs[0] = Make("x", DataType::kFp32, {4});
  ExpectInvalid(ValidateInferInputs(Batching(), inputs, kMax),
                "input 'x': shape [4] has rank 1 but the model expects rank 2 [-1,4]");
}

TEST(ValidateInferInputsTest, WrongFixedDim) {
  auto inputs = Good(1);
  inputs[0] = Make("x", DataType::kFp32, {1, 5});
  ExpectInvalid(ValidateInferInputs(Batching(), inputs, kMax),
                "input 'x': shape [1,5] has 5 at index 1 but the model expects 4");
}

TEST(ValidateInferInputsTest, NegativeDim) {
  auto inputs = Good(1);
  inputs[1].shape = {1, -3};
  ExpectInvalid(ValidateInferInputs(Batching(), inputs, kMax), "input 'ids': shape [1,-3] has negative dim");
}

TEST(ValidateInferInputsTest, BatchOutOfRange) {
  ExpectInvalid(ValidateInferInputs(Batching(), Good(9), kMax),
                "input 'x': batch size 9 (shape[0]) must be between 1 and max_batch_size 8");
  ExpectInvalid(ValidateInferInputs(Batching(), Good(0), kMax), "batch size 0");
}

TEST(ValidateInferInputsTest, MismatchedBatch) {
  auto inputs = Good(2);
  inputs[1] = Make("ids", DataType::kInt64, {3, 7});
  ExpectInvalid(ValidateInferInputs(Batching(), inputs, kMax),
                "input 'ids': batch size 3 differs from 2 of input 'x'");
}

TEST(ValidateInferInputsTest, HugeDimsAreRejectedBeforeAnyAllocation) {
  // No data at all: the check must not depend on (or allocate) 10^12 elements.
  std::vector<Tensor> inputs = {Make("x", DataType::kFp32, {1, 4}),
                                Tensor{"ids", DataType::kInt64, {1, 1000000000000}, ""}};
  const Status s = ValidateInferInputs(Batching(), inputs, kMax);
  EXPECT_EQ(s.code(), StatusCode::kPayloadTooLarge) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("input 'ids'"));

  // Products that overflow int64 are caught the same way.
  inputs[1].shape = {1, INT64_MAX};
  EXPECT_EQ(ValidateInferInputs(Batching(), inputs, kMax).code(), StatusCode::kPayloadTooLarge);

  // A non-batching model with a fixed dim rejects it as a shape mismatch first.
  inference::ModelConfig fixed = Parse("input { name: \"a\" data_type: TYPE_FP32 dims: [ 1, 4 ] }");
  std::vector<Tensor> huge = {Tensor{"a", DataType::kFp32, {1, 1000000000000}, ""}};
  ExpectInvalid(ValidateInferInputs(fixed, huge, kMax), "has 1000000000000 at index 1");
}

TEST(ValidateInferInputsTest, ByteLengthMustMatch) {
  auto inputs = Good(1);
  inputs[0].data.pop_back();
  ExpectInvalid(ValidateInferInputs(Batching(), inputs, kMax), "tensor 'x'");
}

TEST(ValidateInferInputsTest, BytesTensors) {
  inference::ModelConfig c = Parse("input { name: \"s\" data_type: TYPE_STRING dims: [ 2 ] }");
  Tensor t{"s", DataType::kBytes, {2}, ""};
  AppendBytesElement(&t.data, "hello");
  AppendBytesElement(&t.data, "");
  EXPECT_TRUE(ValidateInferInputs(c, {t}, kMax).ok());
  t.data.resize(t.data.size() - 1);  // truncated length prefix
  ExpectInvalid(ValidateInferInputs(c, {t}, kMax), "'s'");
}

TEST(ValidateInferInputsTest, NonBatchingModelTakesTheShapeAsWritten) {
  inference::ModelConfig c = Parse("input { name: \"a\" data_type: TYPE_FP32 dims: [ -1, 3 ] }");
  EXPECT_TRUE(ValidateInferInputs(c, {Make("a", DataType::kFp32, {20, 3})}, kMax).ok());
  EXPECT_TRUE(ValidateInferInputs(c, {Make("a", DataType::kFp32, {0, 3})}, kMax).ok());
}

TEST(ValidateRequestedOutputsTest, KnownUnknownAndDuplicate) {
  EXPECT_TRUE(ValidateRequestedOutputs(Batching(), {}).ok());
  EXPECT_TRUE(ValidateRequestedOutputs(Batching(), {"z", "y"}).ok());
  const Status s = ValidateRequestedOutputs(Batching(), {"y", "nope"});
  ExpectInvalid(s, "unexpected output 'nope' requested from model 'm'");
  EXPECT_THAT(s.message(), HasSubstr("'y', 'z'"));
  ExpectInvalid(ValidateRequestedOutputs(Batching(), {"y", "y"}), "output 'y' is requested more than once");
}

TEST(ReshapeTest, InputsAndOutputs) {
  inference::ModelConfig c = Parse(R"pb(
    max_batch_size: 4
    input { name: "img" data_type: TYPE_UINT8 dims: [ 12 ] reshape { shape: [ 3, 4 ] } }
    input { name: "seq" data_type: TYPE_FP32 dims: [ -1, 6 ] reshape { shape: [ 2, -1, 3 ] } }
    input { name: "plain" data_type: TYPE_FP32 dims: [ 2 ] }
    input { name: "scalar" data_type: TYPE_FP32 dims: [ 1 ] reshape { } }
    output { name: "o" data_type: TYPE_FP32 dims: [ -1, 4 ] reshape { shape: [ -1, 2, 2 ] } }
  )pb");
  ASSERT_TRUE(ValidateModelConfig(c).ok()) << ValidateModelConfig(c).ToString();
  auto img = ReshapeForModel(c, c.input(0), {2, 12});
  ASSERT_TRUE(img.ok());
  EXPECT_THAT(*img, ElementsAre(2, 3, 4));
  auto seq = ReshapeForModel(c, c.input(1), {3, 5, 6});
  ASSERT_TRUE(seq.ok());
  EXPECT_THAT(*seq, ElementsAre(3, 2, 5, 3));
  auto plain = ReshapeForModel(c, c.input(2), {1, 2});
  ASSERT_TRUE(plain.ok());
  EXPECT_THAT(*plain, ElementsAre(1, 2));
  auto scalar = ReshapeForModel(c, c.input(3), {4, 1});
  ASSERT_TRUE(scalar.ok());
  EXPECT_THAT(*scalar, ElementsAre(4));
  auto out = ReshapeForClient(c, c.output(0), {2, 9, 2, 2});
  ASSERT_TRUE(out.ok());
  EXPECT_THAT(*out, ElementsAre(2, 9, 4));
  EXPECT_FALSE(ReshapeForModel(c, c.input(0), {12}).ok());
  // The model's own shape passes as it is: [batch] for the scalar, [batch, 3, 4] for img.
  auto own = ReshapeForModel(c, c.input(3), {4});
  ASSERT_TRUE(own.ok());
  EXPECT_THAT(*own, ElementsAre(4));
  auto own_img = ReshapeForModel(c, c.input(0), {2, 3, 4});
  ASSERT_TRUE(own_img.ok());
  EXPECT_THAT(*own_img, ElementsAre(2, 3, 4));
}

TEST(ReshapeTest, ScalarsAreAcceptedAsScalarsAndReturnedAsScalars) {
  inference::ModelConfig batched = Parse(R"pb(
    max_batch_size: 8
    input { name: "k" data_type: TYPE_INT64 dims: [ 1 ] reshape { shape: [ ] } }
    output { name: "loss" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } }
  )pb");
  ASSERT_TRUE(ValidateModelConfig(batched).ok()) << ValidateModelConfig(batched).ToString();
  EXPECT_TRUE(IsScalarReshape(batched.input(0)));
  EXPECT_TRUE(IsScalarReshape(batched.output(0)));
  // [batch] (the model's shape) and [batch, 1] (Triton's dims) are both requests for it.
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{3}, std::vector<int64_t>{3, 1}}) {
    Tensor k = Make("k", DataType::kInt64, shape);
    EXPECT_TRUE(ValidateInferInputs(batched, {k}, kMax).ok()) << ShapeToString(shape);
    auto model = ReshapeForModel(batched, batched.input(0), shape);
    ASSERT_TRUE(model.ok());
    EXPECT_THAT(*model, ElementsAre(3));
  }
  auto wrong = ValidateInferInputs(batched, {Make("k", DataType::kInt64, {3, 2})}, kMax);
  EXPECT_EQ(wrong.message(),
            "input 'k': shape [3,2] has 2 at index 1 but the model expects 1 [-1,1] (or [-1], "
            "the shape it reshapes to)");
  auto loss = ReshapeForClient(batched, batched.output(0), {3});
  ASSERT_TRUE(loss.ok());
  EXPECT_THAT(*loss, ElementsAre(3));  // not [3, 1]

  inference::ModelConfig single = Parse(R"pb(
    max_batch_size: 0
    input { name: "lo" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } }
    output { name: "mean" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } }
  )pb");
  ASSERT_TRUE(ValidateModelConfig(single).ok()) << ValidateModelConfig(single).ToString();
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{}, std::vector<int64_t>{1}}) {
    Tensor lo = Make("lo", DataType::kFp32, shape);
    EXPECT_TRUE(ValidateInferInputs(single, {lo}, kMax).ok()) << ShapeToString(shape);
    auto model = ReshapeForModel(single, single.input(0), shape);
    ASSERT_TRUE(model.ok());
    EXPECT_TRUE(model->empty());
  }
  auto two = ValidateInferInputs(single, {Make("lo", DataType::kFp32, {2})}, kMax);
  EXPECT_EQ(two.message(),
            "input 'lo': shape [2] has 2 at index 0 but the model expects 1 [1] (or [], the shape "
            "it reshapes to)");
  auto mean = ReshapeForClient(single, single.output(0), {});
  ASSERT_TRUE(mean.ok());
  EXPECT_TRUE(mean->empty());
}

TEST(InstanceOptionsForTest, CpuWithDefaultThreads) {
  inference::ModelConfig c = Batching();
  inference::ModelInstanceGroup g;
  g.set_kind(inference::ModelInstanceGroup::KIND_CPU);
  auto o = InstanceOptionsFor(c, g, 0);
  ASSERT_TRUE(o.ok());
  EXPECT_THAT(o->providers, ElementsAre(backend::ExecutionProvider::kCpu));
  EXPECT_EQ(o->intra_op_threads, 1);
  EXPECT_EQ(o->inter_op_threads, 1);
}

TEST(InstanceOptionsForTest, GpuWithThreadsFromParameters) {
  inference::ModelConfig c = Parse(R"pb(
    parameters { key: "intra_op_thread_count" value { string_value: "6" } }
    parameters { key: "inter_op_thread_count" value { string_value: "2" } }
  )pb");
  inference::ModelInstanceGroup g;
  g.set_kind(inference::ModelInstanceGroup::KIND_GPU);
  auto o = InstanceOptionsFor(c, g, 3);
  ASSERT_TRUE(o.ok());
  EXPECT_THAT(o->providers, ElementsAre(backend::ExecutionProvider::kCuda));
  EXPECT_EQ(o->device_id, 3);
  EXPECT_EQ(o->intra_op_threads, 6);
  EXPECT_EQ(o->inter_op_threads, 2);
  EXPECT_FALSE(InstanceOptionsFor(c, g, -1).ok());
}

// execution_mode 0 is sequential, as in Triton, whatever inter_op_thread_count says: the
// inter-op pool is one thread (fastpath runs parallel exactly when it has more).
TEST(InstanceOptionsForTest, SequentialExecutionModeKeepsOneInterOpThread) {
  inference::ModelConfig c = Parse(R"pb(
    parameters {
      key: "inter_op_thread_count"
      value { string_value: "4" }
    }
    parameters {
      key: "execution_mode"
      value { string_value: "0" }
    }
    parameters {
      key: "enable_mem_arena"
      value { string_value: "1" }
    }
  )pb");
  inference::ModelInstanceGroup g;
  g.set_kind(inference::ModelInstanceGroup::KIND_CPU);
  auto o = InstanceOptionsFor(c, g, 0);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->inter_op_threads, 1);
  (*c.mutable_parameters())["execution_mode"].set_string_value("1");
  o = InstanceOptionsFor(c, g, 0);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->inter_op_threads, 4);
  // What fastpath does not read is named for the load's log.
  EXPECT_THAT(UnreadParameters(c), ElementsAre("enable_mem_arena"));
}

TEST(InstanceOptionsForTest, BadThreadValueNamesKeyAndValue) {
  inference::ModelConfig c = Parse("parameters { key: \"intra_op_thread_count\" value { string_value: \"0\" } }");
  inference::ModelInstanceGroup g;
  g.set_kind(inference::ModelInstanceGroup::KIND_CPU);
  ExpectInvalid(InstanceOptionsFor(c, g, 0).status(), "'intra_op_thread_count' is '0'");
}

TEST(InstanceOptionsForTest, AutoAndModelKindsGiveNoProvider) {
  inference::ModelInstanceGroup g;
  g.set_kind(inference::ModelInstanceGroup::KIND_AUTO);
  ExpectInvalid(InstanceOptionsFor(Batching(), g, 0).status(), "KIND_AUTO");
  g.set_kind(inference::ModelInstanceGroup::KIND_MODEL);
  ExpectInvalid(InstanceOptionsFor(Batching(), g, 0).status(), "KIND_MODEL");
}

}  // namespace
}  // namespace fastpath::config
