#include "fastpath/onnxruntime/ort_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "fastpath/common/tensor.h"

namespace fastpath::onnxruntime {
namespace {

using backend::ExecutionProvider;
using backend::InstanceOptions;
using ::testing::HasSubstr;

const std::filesystem::path kModels = FASTPATH_TEST_MODELS_DIR;

std::filesystem::path ModelPath(const std::string& name) { return kModels / (name + ".onnx"); }

struct TypeCase {
  DataType dtype;
  std::string suffix;  // identity_<suffix>.onnx
};

const std::vector<TypeCase>& AllTypes() {
  static const std::vector<TypeCase> kTypes = {
      {DataType::kBool, "bool"},     {DataType::kUint8, "uint8"},   {DataType::kUint16, "uint16"},
      {DataType::kUint32, "uint32"}, {DataType::kUint64, "uint64"}, {DataType::kInt8, "int8"},
      {DataType::kInt16, "int16"},   {DataType::kInt32, "int32"},   {DataType::kInt64, "int64"},
      {DataType::kFp16, "fp16"},     {DataType::kFp32, "fp32"},     {DataType::kFp64, "fp64"},
      {DataType::kBf16, "bf16"},     {DataType::kBytes, "bytes"},
  };
  return kTypes;
}

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

template <typename T>
std::vector<T> Values(const Tensor& tensor) {
  std::vector<T> out(tensor.data.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), tensor.data.data(), tensor.data.size());
  return out;
}

Tensor MakeTensor(std::string name, DataType dtype, std::vector<int64_t> shape, std::string data) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = std::move(data);
  return t;
}

std::string BytesData(const std::vector<std::string>& elements) {
  std::string out;
  for (const auto& e : elements) AppendBytesElement(&out, e);
  return out;
}

// Test data for a [2,3] tensor of `dtype` that exercises its awkward values: for FP16 and
// BF16 the bit patterns of NaN, both infinities, -0 and a subnormal must survive exactly.
std::string SampleData(DataType dtype) {
  switch (dtype) {
    case DataType::kBool:
      return Bytes<uint8_t>({1, 0, 0, 1, 1, 1});
    case DataType::kFp16:
      // 1.0, NaN, +inf, -inf, -0, smallest subnormal
      return Bytes<uint16_t>({0x3c00, 0x7e01, 0x7c00, 0xfc00, 0x8000, 0x0001});
    case DataType::kBf16:
      return Bytes<uint16_t>({0x3f80, 0x7fc1, 0x7f80, 0xff80, 0x8000, 0x0001});
    case DataType::kFp32:
      return Bytes<float>({1.5f, -0.0f, 3.4e38f, -1.17549435e-38f, 1e-45f, 42.0f});
    case DataType::kFp64:
      return Bytes<double>({1.5, -0.0, 1.7e308, -2.2e-308, 5e-324, 42.0});
    case DataType::kBytes:
      return BytesData({"", "a", std::string("nul\0inside", 10), "\xc3\xbcnicode",
                        std::string(1000, 'x'), std::string(1, '\0')});
    default: {
      // Integers: extremes and a spread of bit patterns.
      const size_t size = ElementSize(dtype);
      std::string out(6 * size, '\0');
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(i * 37 + 11);
      std::memset(out.data(), 0xff, size);                 // -1 / max
      std::memset(out.data() + size, 0x00, size);          // 0
      out[2 * size + size - 1] = static_cast<char>(0x80);  // most negative when signed
      return out;
    }
  }
}

class OrtBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = CreateOrtBackend();
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    backend_ = std::move(backend).value();
  }

  std::unique_ptr<backend::ModelInstance> Load(const std::string& model,
                                               const InstanceOptions& options = {}) {
    auto instance = backend_->CreateInstance(ModelPath(model), options);
    EXPECT_TRUE(instance.ok()) << instance.status().ToString();
    return instance.ok() ? std::move(instance).value() : nullptr;
  }

  std::unique_ptr<backend::Backend> backend_;
};

TEST_F(OrtBackendTest, NameAndVersion) {
  EXPECT_EQ(backend_->Name(), "onnxruntime");
  EXPECT_THAT(OrtVersion(), ::testing::MatchesRegex("[0-9]+\\.[0-9]+\\.[0-9]+.*"));
}

TEST_F(OrtBackendTest, InspectIdentityModels) {
  for (const auto& type : AllTypes()) {
    SCOPED_TRACE(type.suffix);
    auto signature = backend_->Inspect(ModelPath("identity_" + type.suffix));
    ASSERT_TRUE(signature.ok()) << signature.status().ToString();
    ASSERT_EQ(signature->inputs.size(), 1u);
    ASSERT_EQ(signature->outputs.size(), 1u);
    EXPECT_EQ(signature->inputs[0].name, "INPUT0");
    EXPECT_EQ(signature->inputs[0].dtype, type.dtype);
    EXPECT_EQ(signature->inputs[0].dims, (std::vector<int64_t>{-1, -1}));
    EXPECT_EQ(signature->outputs[0].name, "OUTPUT0");
    EXPECT_EQ(signature->outputs[0].dtype, type.dtype);
    EXPECT_EQ(signature->outputs[0].dims, (std::vector<int64_t>{-1, -1}));
  }
}

TEST_F(OrtBackendTest, InspectSimpleModels) {
  for (const auto& [model, dtype] : std::vector<std::pair<std::string, DataType>>{
           {"simple", DataType::kInt32}, {"simple_fp32", DataType::kFp32}}) {
    SCOPED_TRACE(model);
    auto signature = backend_->Inspect(ModelPath(model));
    ASSERT_TRUE(signature.ok()) << signature.status().ToString();
    ASSERT_EQ(signature->inputs.size(), 2u);
    ASSERT_EQ(signature->outputs.size(), 2u);
    const std::vector<int64_t> dims = {-1, 16};
    EXPECT_EQ(signature->inputs[0].name, "INPUT0");
    EXPECT_EQ(signature->inputs[1].name, "INPUT1");
    EXPECT_EQ(signature->outputs[0].name, "OUTPUT0");
    EXPECT_EQ(signature->outputs[1].name, "OUTPUT1");
    for (const auto* specs : {&signature->inputs, &signature->outputs}) {
      for (const auto& spec : *specs) {
        EXPECT_EQ(spec.dtype, dtype);
        EXPECT_EQ(spec.dims, dims);
      }
    }
  }
}

TEST_F(OrtBackendTest, RoundTripEveryDatatypeExactly) {
  for (const auto& type : AllTypes()) {
    SCOPED_TRACE(type.suffix);
    auto instance = Load("identity_" + type.suffix);
    ASSERT_NE(instance, nullptr);
    const Tensor input = MakeTensor("INPUT0", type.dtype, {2, 3}, SampleData(type.dtype));
    ASSERT_TRUE(ValidateTensorData(input).ok());
    auto outputs = instance->Run({input}, {"OUTPUT0"});
    ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
    ASSERT_EQ(outputs->size(), 1u);
    const Tensor& output = (*outputs)[0];
    EXPECT_EQ(output.name, "OUTPUT0");
    EXPECT_EQ(output.dtype, type.dtype);
    EXPECT_EQ(output.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(output.data, input.data);  // byte for byte: bit patterns, NULs, empty strings
  }
}

TEST_F(OrtBackendTest, RoundTripEmptyTensors) {
  for (const auto& type : AllTypes()) {
    SCOPED_TRACE(type.suffix);
    auto instance = Load("identity_" + type.suffix);
    ASSERT_NE(instance, nullptr);
    auto outputs = instance->Run({MakeTensor("INPUT0", type.dtype, {0, 3}, "")}, {});
    ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
    ASSERT_EQ(outputs->size(), 1u);
    EXPECT_EQ((*outputs)[0].shape, (std::vector<int64_t>{0, 3}));
    EXPECT_TRUE((*outputs)[0].data.empty());
  }
}

TEST_F(OrtBackendTest, RoundTripBytesOfEmptyStringsOnly) {
  auto instance = Load("identity_bytes");
  ASSERT_NE(instance, nullptr);
  const Tensor input = MakeTensor("INPUT0", DataType::kBytes, {1, 3}, BytesData({"", "", ""}));
  auto outputs = instance->Run({input}, {});
  ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
  EXPECT_EQ((*outputs)[0].data, input.data);
}

TEST_F(OrtBackendTest, SimpleModelMathIsExact) {
  auto instance = Load("simple");
  ASSERT_NE(instance, nullptr);
  std::vector<int32_t> a(32), b(32);
  for (int i = 0; i < 32; ++i) {
    a[i] = i * 1000 - 7;
    b[i] = (i % 5) - 2 + (i == 3 ? INT32_MIN / 2 : 0);
  }
  auto outputs = instance->Run({MakeTensor("INPUT0", DataType::kInt32, {2, 16}, Bytes(a)),
                                MakeTensor("INPUT1", DataType::kInt32, {2, 16}, Bytes(b))},
                               {"OUTPUT0", "OUTPUT1"});
  ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
  ASSERT_EQ(outputs->size(), 2u);
  const auto sum = Values<int32_t>((*outputs)[0]);
  const auto difference = Values<int32_t>((*outputs)[1]);
  ASSERT_EQ(sum.size(), 32u);
  ASSERT_EQ(difference.size(), 32u);
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(sum[i], a[i] + b[i]) << i;
    EXPECT_EQ(difference[i], a[i] - b[i]) << i;
  }
  EXPECT_EQ((*outputs)[0].shape, (std::vector<int64_t>{2, 16}));
  EXPECT_EQ((*outputs)[0].dtype, DataType::kInt32);
}

TEST_F(OrtBackendTest, SimpleFp32MathIsExact) {
  auto instance = Load("simple_fp32");
  ASSERT_NE(instance, nullptr);
  std::vector<float> a(16), b(16);
  for (int i = 0; i < 16; ++i) {
    a[i] = 0.25f * i - 1.0f;
    b[i] = 1.0f / (i + 1);
  }
  // Inputs given in the other order, outputs asked for in the other order.
  auto outputs = instance->Run({MakeTensor("INPUT1", DataType::kFp32, {1, 16}, Bytes(b)),
                                MakeTensor("INPUT0", DataType::kFp32, {1, 16}, Bytes(a))},
                               {"OUTPUT1", "OUTPUT0"});
  ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
  ASSERT_EQ(outputs->size(), 2u);
  EXPECT_EQ((*outputs)[0].name, "OUTPUT1");
  EXPECT_EQ((*outputs)[1].name, "OUTPUT0");
  const auto difference = Values<float>((*outputs)[0]);
  const auto sum = Values<float>((*outputs)[1]);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(sum[i], a[i] + b[i]) << i;  // one IEEE operation: exact, not approximate
    EXPECT_EQ(difference[i], a[i] - b[i]) << i;
  }
}

TEST_F(OrtBackendTest, NoOutputNamesMeansAllInModelOrder) {
  auto instance = Load("simple");
  ASSERT_NE(instance, nullptr);
  const std::string zeros(16 * 4, '\0');
  auto outputs = instance->Run({MakeTensor("INPUT0", DataType::kInt32, {1, 16}, zeros),
                                MakeTensor("INPUT1", DataType::kInt32, {1, 16}, zeros)},
                               {});
  ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
  ASSERT_EQ(outputs->size(), 2u);
  EXPECT_EQ((*outputs)[0].name, "OUTPUT0");
  EXPECT_EQ((*outputs)[1].name, "OUTPUT1");
}

TEST_F(OrtBackendTest, CorruptModelIsInvalidArgumentNamingTheFile) {
  const auto path = ModelPath("corrupt");
  auto signature = backend_->Inspect(path);
  ASSERT_FALSE(signature.ok());
  EXPECT_EQ(signature.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(signature.status().message(), HasSubstr(path.string()));
  auto instance = backend_->CreateInstance(path, {});
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(instance.status().message(), HasSubstr(path.string()));
}

TEST_F(OrtBackendTest, MissingModelIsNotFoundNamingThePath) {
  const auto path = kModels / "no_such_model.onnx";
  auto signature = backend_->Inspect(path);
  ASSERT_FALSE(signature.ok());
  EXPECT_EQ(signature.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(signature.status().message(), HasSubstr(path.string()));
  auto instance = backend_->CreateInstance(path, {});
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(instance.status().message(), HasSubstr(path.string()));
}

// Models ORT loads but the protocol cannot serve are refused at load, saying why: before,
// each was READY and every request to it failed (or, over gRPC, its metadata broke the
// client).
TEST_F(OrtBackendTest, ASignatureTheProtocolCannotServeIsRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"no_outputs", "the model's graph has no outputs"},
      {"nul_names", "the model has two inputs named 'a'"},
      {"bad_utf8_name",
       "input 'in\xEF\xBF\xBD\xEF\xBF\xBDput' of the model has a name that is not UTF-8"},
  };
  for (const auto& [model, why] : cases) {
    auto signature = backend_->Inspect(ModelPath(model));
    ASSERT_FALSE(signature.ok()) << model;
    EXPECT_EQ(signature.status().code(), StatusCode::kInvalidArgument) << model;
    EXPECT_THAT(signature.status().message(), HasSubstr(why)) << model;
    // (An instance of the graph with no outputs fails in ORT's own initialisation first.)
    EXPECT_FALSE(backend_->CreateInstance(ModelPath(model), {}).ok()) << model;
  }
}

TEST_F(OrtBackendTest, DirectoryIsNotAModel) {
  auto signature = backend_->Inspect(kModels);
  ASSERT_FALSE(signature.ok());
  EXPECT_EQ(signature.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(signature.status().message(), HasSubstr("not a regular file"));
}

// Without a GPU every GPU provider list fails at the provider (no driver, no device, or
// "cpu" refused beside it), never with a session that quietly runs on the CPU. The exact
// messages are asserted in ep_admission_test.cc.
TEST_F(OrtBackendTest, GpuProvidersWithoutAGpuFailNeverCpuFallback) {
  for (const auto& providers : std::vector<std::vector<ExecutionProvider>>{
           {ExecutionProvider::kCuda},
           {ExecutionProvider::kTensorRt},
           {ExecutionProvider::kCuda, ExecutionProvider::kCpu},
           {ExecutionProvider::kTensorRt, ExecutionProvider::kCuda, ExecutionProvider::kCpu}}) {
    InstanceOptions options;
    options.providers = providers;
    auto instance = backend_->CreateInstance(ModelPath("simple"), options);
    if (instance.ok()) {
      // A machine with a GPU: then the placement must be on it.
      ASSERT_NE((*instance)->placement(), nullptr);
      EXPECT_GT((*instance)->placement()->total_nodes -
                    (*instance)->placement()->NodesOn(backend::kCpuProviderName),
                0);
      continue;
    }
    EXPECT_EQ(instance.status().code(), StatusCode::kFailedPrecondition)
        << instance.status().message();
    EXPECT_THAT(instance.status().message(), HasSubstr("execution provider"));
  }
}

TEST_F(OrtBackendTest, ProviderListMustBeExplicitAndOrdered) {
  InstanceOptions none;
  none.providers = {};
  auto instance = backend_->CreateInstance(ModelPath("simple"), none);
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().code(), StatusCode::kInvalidArgument);

  InstanceOptions cpu_first;
  cpu_first.providers = {ExecutionProvider::kCpu, ExecutionProvider::kCuda};
  instance = backend_->CreateInstance(ModelPath("simple"), cpu_first);
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(instance.status().message(), HasSubstr("last"));
}

TEST_F(OrtBackendTest, ThreadOptionsAreApplied) {
  InstanceOptions options;
  options.intra_op_threads = 2;
  options.inter_op_threads = 2;
  auto instance = Load("simple_fp32", options);
  ASSERT_NE(instance, nullptr);
  const std::string zeros(16 * 4, '\0');
  auto outputs = instance->Run({MakeTensor("INPUT0", DataType::kFp32, {1, 16}, zeros),
                                MakeTensor("INPUT1", DataType::kFp32, {1, 16}, zeros)},
                               {"OUTPUT0"});
  EXPECT_TRUE(outputs.ok()) << outputs.status().ToString();

  for (auto [intra, inter] : std::vector<std::pair<int, int>>{{0, 1}, {1, 0}, {-1, 1}}) {
    InstanceOptions bad;
    bad.intra_op_threads = intra;
    bad.inter_op_threads = inter;
    auto refused = backend_->CreateInstance(ModelPath("simple"), bad);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  }
}

class OrtBackendRunErrorsTest : public OrtBackendTest {
 protected:
  void SetUp() override {
    OrtBackendTest::SetUp();
    instance_ = Load("simple");
    ASSERT_NE(instance_, nullptr);
  }
  static Tensor Int32(const std::string& name, std::vector<int64_t> shape = {1, 16}) {
    return MakeTensor(name, DataType::kInt32, shape, std::string(16 * 4, '\1'));
  }
  Status RunStatus(const std::vector<Tensor>& inputs,
                   const std::vector<std::string>& outputs = {}) {
    auto result = instance_->Run(inputs, outputs);
    return result.ok() ? Status::Ok() : result.status();
  }
  std::unique_ptr<backend::ModelInstance> instance_;
};

TEST_F(OrtBackendRunErrorsTest, UnknownInputName) {
  Status status = RunStatus({Int32("INPUT0"), Int32("INPUT9")});
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("INPUT9"));
}

TEST_F(OrtBackendRunErrorsTest, MissingAndDuplicateInputs) {
  Status missing = RunStatus({Int32("INPUT0")});
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.message(), HasSubstr("missing input 'INPUT1'"));
  Status twice = RunStatus({Int32("INPUT0"), Int32("INPUT0")});
  EXPECT_EQ(twice.code(), StatusCode::kInvalidArgument);
}

TEST_F(OrtBackendRunErrorsTest, WrongDatatype) {
  Tensor fp32 = Int32("INPUT1");
  fp32.dtype = DataType::kFp32;
  Status status = RunStatus({Int32("INPUT0"), fp32});
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("FP32"));
  EXPECT_THAT(status.message(), HasSubstr("INT32"));
}

TEST_F(OrtBackendRunErrorsTest, WrongShapeOrLength) {
  EXPECT_EQ(RunStatus({Int32("INPUT0"), Int32("INPUT1", {16})}).code(),
            StatusCode::kInvalidArgument);  // rank
  Tensor wide = MakeTensor("INPUT1", DataType::kInt32, {1, 17}, std::string(17 * 4, '\0'));
  EXPECT_EQ(RunStatus({Int32("INPUT0"), wide}).code(), StatusCode::kInvalidArgument);  // fixed dim
  Tensor short_data = Int32("INPUT1");
  short_data.data.pop_back();
  EXPECT_EQ(RunStatus({Int32("INPUT0"), short_data}).code(), StatusCode::kInvalidArgument);
  // A huge shape is refused from its size, before anything is allocated for it.
  Tensor huge = MakeTensor("INPUT1", DataType::kInt32, {1000000000000, 16}, std::string(64, '\0'));
  EXPECT_FALSE(RunStatus({Int32("INPUT0"), huge}).ok());
}

TEST_F(OrtBackendRunErrorsTest, ShapesOrtRejectsAreErrorsNotCrashes) {
  // Both inputs fit the signature on their own ([-1,16]), but Add cannot broadcast 2 rows
  // against 3: only ORT can tell, and its error must come back as a Status.
  Tensor two = MakeTensor("INPUT0", DataType::kInt32, {2, 16}, std::string(2 * 16 * 4, '\0'));
  Tensor three = MakeTensor("INPUT1", DataType::kInt32, {3, 16}, std::string(3 * 16 * 4, '\0'));
  Status status = RunStatus({two, three});
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("running model"));
  // The instance is still usable afterwards.
  EXPECT_TRUE(RunStatus({Int32("INPUT0"), Int32("INPUT1")}).ok());
}

TEST_F(OrtBackendRunErrorsTest, UnknownOrDuplicateOutput) {
  Status unknown = RunStatus({Int32("INPUT0"), Int32("INPUT1")}, {"OUTPUT7"});
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  EXPECT_THAT(unknown.message(), HasSubstr("OUTPUT7"));
  Status twice = RunStatus({Int32("INPUT0"), Int32("INPUT1")}, {"OUTPUT0", "OUTPUT0"});
  EXPECT_EQ(twice.code(), StatusCode::kInvalidArgument);
}

TEST_F(OrtBackendTest, InvalidBoolAndBytesInputsAreRefused) {
  auto bools = Load("identity_bool");
  ASSERT_NE(bools, nullptr);
  auto result =
      bools->Run({MakeTensor("INPUT0", DataType::kBool, {1, 2}, std::string("\x01\x02"))}, {});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);

  auto strings = Load("identity_bytes");
  ASSERT_NE(strings, nullptr);
  // Declares 9 bytes, carries 2.
  std::string truncated("\x09\x00\x00\x00hi", 6);
  result = strings->Run({MakeTensor("INPUT0", DataType::kBytes, {1, 1}, truncated)}, {});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  // Two elements for a shape of one.
  result =
      strings->Run({MakeTensor("INPUT0", DataType::kBytes, {1, 1}, BytesData({"a", "b"}))}, {});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(OrtBackendTest, InstanceOutlivesBackend) {
  auto instance = Load("identity_int64");
  ASSERT_NE(instance, nullptr);
  backend_.reset();
  const Tensor input = MakeTensor("INPUT0", DataType::kInt64, {1, 2}, Bytes<int64_t>({-1, 7}));
  auto outputs = instance->Run({input}, {});
  ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
  EXPECT_EQ((*outputs)[0].data, input.data);
}

TEST_F(OrtBackendTest, ConcurrentRunsOnTwoInstances) {
  // The scheduler gives each instance its own thread; two instances of one model must not
  // interfere. Each thread checks every result it gets.
  auto first = Load("simple");
  auto second = Load("simple");
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  auto worker = [](backend::ModelInstance* instance, int seed, int* failures) {
    for (int iteration = 0; iteration < 200; ++iteration) {
      std::vector<int32_t> a(16), b(16);
      for (int i = 0; i < 16; ++i) {
        a[i] = seed * 100000 + iteration * 16 + i;
        b[i] = seed - i;
      }
      auto outputs = instance->Run({MakeTensor("INPUT0", DataType::kInt32, {1, 16}, Bytes(a)),
                                    MakeTensor("INPUT1", DataType::kInt32, {1, 16}, Bytes(b))},
                                   {"OUTPUT0", "OUTPUT1"});
      if (!outputs.ok()) {
        ++*failures;
        continue;
      }
      const auto sum = Values<int32_t>((*outputs)[0]);
      const auto difference = Values<int32_t>((*outputs)[1]);
      for (int i = 0; i < 16; ++i) {
        if (sum[i] != a[i] + b[i] || difference[i] != a[i] - b[i]) ++*failures;
      }
    }
  };
  int first_failures = 0;
  int second_failures = 0;
  std::thread one(worker, first.get(), 1, &first_failures);
  std::thread two(worker, second.get(), 2, &second_failures);
  one.join();
  two.join();
  EXPECT_EQ(first_failures, 0);
  EXPECT_EQ(second_failures, 0);
}

TEST(OrtBackendCreateTest, TwoBackendsCoexist) {
  // ORT keeps one environment per process; a second backend shares it.
  OrtBackendOptions first_options;
  first_options.log_id = "first";
  OrtBackendOptions second_options;
  second_options.log_id = "second";
  second_options.log_severity = OrtLogSeverity::kError;
  auto first = CreateOrtBackend(first_options);
  auto second = CreateOrtBackend(second_options);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  auto signature = (*second)->Inspect(ModelPath("simple"));
  EXPECT_TRUE(signature.ok()) << signature.status().ToString();
}

}  // namespace
}  // namespace fastpath::onnxruntime
