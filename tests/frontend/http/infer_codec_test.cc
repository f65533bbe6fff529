// Direct tests of the HTTP inference codec: no sockets, just bytes in and out.
#include "infer_codec.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

namespace fastpath::frontend::http {
namespace {

using ::testing::HasSubstr;

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
  return s;
}

template <typename T>
std::vector<T> Values(const std::string& s) {
  std::vector<T> v(s.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), s.data(), v.size() * sizeof(T));
  return v;
}

StatusOr<DecodedInferRequest> Decode(std::string body, std::optional<size_t> json_length = std::nullopt,
                                     int64_t max_elements = 1 << 20) {
  InferCodecLimits limits;
  limits.max_elements = max_elements;
  return DecodeInferRequest(body, json_length, limits);
}

// Decode must fail with `code` and a message containing `fragment`.
void ExpectError(const std::string& body, StatusCode code, const std::string& fragment,
                 std::optional<size_t> json_length = std::nullopt) {
  auto r = Decode(body, json_length);
  ASSERT_FALSE(r.ok()) << body;
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_THAT(r.status().message(), HasSubstr(fragment)) << body;
}

TEST(InferCodecDecode, FlatAndNestedJsonDataAreRowMajor) {
  auto flat = Decode(R"({"inputs":[{"name":"x","datatype":"INT32","shape":[2,3],"data":[1,2,3,4,5,6]}]})");
  auto nested = Decode(R"({"inputs":[{"name":"x","datatype":"INT32","shape":[2,3],"data":[[1,2,3],[4,5,6]]}]})");
  ASSERT_TRUE(flat.ok()) << flat.status().ToString();
  ASSERT_TRUE(nested.ok()) << nested.status().ToString();
  const Tensor& t = flat->request.inputs.at(0);
  EXPECT_EQ(t.name, "x");
  EXPECT_EQ(t.dtype, DataType::kInt32);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<int32_t>(t.data), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(nested->request.inputs.at(0).data, t.data);
}

TEST(InferCodecDecode, IdParametersAndOutputs) {
  auto r = Decode(R"({"id":"req-7","parameters":{"binary_data_output":true,"priority":3,"s":"v","f":0.5},
      "inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1.5]}],
      "outputs":[{"name":"a","parameters":{"binary_data":false}},{"name":"b"}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->request.id, "req-7");
  EXPECT_EQ(std::get<int64_t>(r->request.parameters.at("priority")), 3);
  EXPECT_EQ(std::get<std::string>(r->request.parameters.at("s")), "v");
  EXPECT_EQ(std::get<double>(r->request.parameters.at("f")), 0.5);
  ASSERT_EQ(r->request.outputs.size(), 2u);
  EXPECT_EQ(r->request.outputs[0].name, "a");
  EXPECT_FALSE(r->encoding.IsBinary("a"));
  EXPECT_TRUE(r->encoding.IsBinary("b"));  // binary_data_output is the default
  EXPECT_TRUE(r->encoding.IsBinary("not-requested"));
}

TEST(InferCodecDecode, BinaryInputsFollowTheJsonInInputOrder) {
  const std::string json =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}},)"
      R"({"name":"j","datatype":"INT64","shape":[1],"data":[-5]},)"
      R"({"name":"b","datatype":"UINT8","shape":[3],"parameters":{"binary_data_size":3}}]})";
  std::string body = json + Bytes<float>({1.25f, -2.5f}) + std::string("\x01\x02\x03", 3);
  auto r = Decode(body, json.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Values<float>(r->request.inputs[0].data), (std::vector<float>{1.25f, -2.5f}));
  EXPECT_EQ(Values<int64_t>(r->request.inputs[1].data), (std::vector<int64_t>{-5}));
  EXPECT_EQ(r->request.inputs[2].data, std::string("\x01\x02\x03", 3));
}

TEST(InferCodecDecode, BytesJsonAndBinary) {
  auto r = Decode(R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[3],"data":["ab","","c\u0000d"]}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string expected;
  AppendBytesElement(&expected, "ab");
  AppendBytesElement(&expected, "");
  AppendBytesElement(&expected, std::string("c\0d", 3));
  EXPECT_EQ(r->request.inputs[0].data, expected);

  const std::string json = R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[3],"parameters":{"binary_data_size":)" +
                           std::to_string(expected.size()) + "}}]}";
  auto b = Decode(json + expected, json.size());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->request.inputs[0].data, expected);
}

TEST(InferCodecDecode, EveryDtypeFromJson) {
  struct Case {
    const char* dtype;
    const char* data;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"BOOL", "[true,false]", std::string("\x01\x00", 2)},
      {"UINT8", "[0,255]", Bytes<uint8_t>({0, 255})},
      {"UINT16", "[0,65535]", Bytes<uint16_t>({0, 65535})},
      {"UINT32", "[0,4294967295]", Bytes<uint32_t>({0, 4294967295u})},
      {"UINT64", "[0,18446744073709551615]", Bytes<uint64_t>({0, 18446744073709551615ull})},
      {"INT8", "[-128,127]", Bytes<int8_t>({-128, 127})},
      {"INT16", "[-32768,32767]", Bytes<int16_t>({-32768, 32767})},
      {"INT32", "[-2147483648,2147483647]", Bytes<int32_t>({std::numeric_limits<int32_t>::min(), 2147483647})},
      {"INT64", "[-9223372036854775808,9223372036854775807]",
       Bytes<int64_t>({std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()})},
      {"FP32", "[0.1,-3]", Bytes<float>({0.1f, -3.0f})},
      {"FP64", "[0.1,1e308]", Bytes<double>({0.1, 1e308})},
  };
  for (const auto& c : cases) {
    auto r = Decode(std::string(R"({"inputs":[{"name":"x","datatype":")") + c.dtype + R"(","shape":[2],"data":)" +
                    c.data + "}]}");
    ASSERT_TRUE(r.ok()) << c.dtype << ": " << r.status().ToString();
    EXPECT_EQ(r->request.inputs[0].data, c.expected) << c.dtype;
  }
}

TEST(InferCodecDecode, OutOfRangeAndWrongTypesNameTheTensorAndElement) {
  ExpectError(R"({"inputs":[{"name":"x","datatype":"UINT8","shape":[2],"data":[1,256]}]})",
              StatusCode::kInvalidArgument, "input 'x': 'data' element 1 is out of range for UINT8");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[-129]}]})",
              StatusCode::kInvalidArgument, "out of range for INT8");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"UINT32","shape":[1],"data":[-1]}]})",
              StatusCode::kInvalidArgument, "out of range for UINT32");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"INT64","shape":[1],"data":[18446744073709551615]}]})",
              StatusCode::kInvalidArgument, "out of range for INT64");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"INT32","shape":[2],"data":[1,1.5]}]})",
              StatusCode::kInvalidArgument, "element 1 is a number, expected an integer");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"BOOL","shape":[1],"data":[1]}]})",
              StatusCode::kInvalidArgument, "expected true or false");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":["1"]}]})",
              StatusCode::kInvalidArgument, "is a string, expected a number");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1e39]}]})",
              StatusCode::kInvalidArgument, "out of range for FP32");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"BYTES","shape":[1],"data":[7]}]})",
              StatusCode::kInvalidArgument, "expected a string");
}

TEST(InferCodecDecode, Fp16AndBf16CannotBeJson) {
  ExpectError(R"({"inputs":[{"name":"h","datatype":"FP16","shape":[1],"data":[1.0]}]})",
              StatusCode::kInvalidArgument, "input 'h': FP16 data cannot be sent as JSON");
  ExpectError(R"({"inputs":[{"name":"h","datatype":"BF16","shape":[1],"data":[1.0]}]})",
              StatusCode::kInvalidArgument, "BF16 data cannot be sent as JSON");
  const std::string json = R"({"inputs":[{"name":"h","datatype":"FP16","shape":[2],"parameters":{"binary_data_size":4}}]})";
  auto r = Decode(json + std::string("\x00\x3c\x00\xc0", 4), json.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->request.inputs[0].data.size(), 4u);
}

TEST(InferCodecDecode, MalformedRequestsNameTheField) {
  ExpectError(R"({"inputs":[)", StatusCode::kInvalidArgument, "malformed JSON in the request body at offset 11");
  ExpectError("", StatusCode::kInvalidArgument, "body is empty");
  ExpectError("[1]", StatusCode::kInvalidArgument, "must be an object");
  ExpectError(R"({"id":"x"})", StatusCode::kInvalidArgument, "missing 'inputs'");
  ExpectError(R"({"inputs":{}})", StatusCode::kInvalidArgument, "'inputs' must be an array");
  ExpectError(R"({"id":3,"inputs":[]})", StatusCode::kInvalidArgument, "'id' must be a string");
  ExpectError(R"({"inputs":[{"datatype":"FP32","shape":[1],"data":[1]}]})", StatusCode::kInvalidArgument,
              "input 0: missing 'name'");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP33","shape":[1],"data":[1]}]})",
              StatusCode::kInvalidArgument, "input 'x': unknown 'datatype' 'FP33'");
  ExpectError(R"({"inputs":[{"name":"x","shape":[1],"data":[1]}]})", StatusCode::kInvalidArgument,
              "input 'x': missing 'datatype'");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","data":[1]}]})", StatusCode::kInvalidArgument,
              "input 'x': missing 'shape'");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1.5],"data":[1]}]})",
              StatusCode::kInvalidArgument, "input 'x': 'shape' must be an array of integers");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1]}]})", StatusCode::kInvalidArgument,
              "input 'x': needs 'data' or 'parameters.binary_data_size'");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],"parameters":{"binary_data_size":4}}]})",
              StatusCode::kInvalidArgument, "sets both 'data' and 'parameters.binary_data_size'");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":1}]})", StatusCode::kInvalidArgument,
              "input 'x': 'data' must be an array");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]},{"name":"x","datatype":"FP32","shape":[1],"data":[1]}]})",
              StatusCode::kInvalidArgument, "input 'x' appears more than once");
  ExpectError(R"({"inputs":[],"outputs":[{"name":"o"},{"name":"o"}]})", StatusCode::kInvalidArgument,
              "output 'o' is requested more than once");
  ExpectError(R"({"inputs":[],"outputs":[{"nom":"o"}]})", StatusCode::kInvalidArgument, "output 0: missing 'name'");
  ExpectError(R"({"inputs":[],"outputs":[{"name":"o","parameters":{"binary_data":"yes"}}]})",
              StatusCode::kInvalidArgument, "output 'o': 'binary_data' must be true or false");
  ExpectError(R"({"inputs":[],"outputs":"o"})", StatusCode::kInvalidArgument, "'outputs' must be an array");
  ExpectError(R"({"inputs":[],"parameters":{"binary_data_output":1}})", StatusCode::kInvalidArgument,
              "'binary_data_output' must be true or false");
  ExpectError(R"({"inputs":[],"parameters":{"p":[1]}})", StatusCode::kInvalidArgument,
              "'parameters': 'p' must be a boolean, number or string");
  ExpectError(R"({"inputs":[],"outputs":[{"name":"o","parameters":{"classification":2}}]})",
              StatusCode::kUnimplemented, "classification");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"parameters":{"shared_memory_region":"r"}}]})",
              StatusCode::kUnimplemented, "shared memory");
}

TEST(InferCodecDecode, DataLengthMustMatchShape) {
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2,2],"data":[1,2,3]}]})",
              StatusCode::kInvalidArgument, "input 'x': 'data' has 3 elements but shape [2,2] needs 4");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1,2]}]})",
              StatusCode::kInvalidArgument, "input 'x': 'data' has more than 1 elements but shape [1] needs 1");
  ExpectError(R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[2],"data":["a"]}]})",
              StatusCode::kInvalidArgument, "input 's': 'data' has 1 elements");
}

TEST(InferCodecDecode, HugeAndNegativeShapesAreRefusedBeforeAllocating) {
  // 10^12 elements of FP32 would be 4 TB: refused on the shape, nothing allocated.
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,1000000000000],"data":[1]}]})",
              StatusCode::kPayloadTooLarge, "input 'x'");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,1000000000000],"parameters":{"binary_data_size":4}}]})",
              StatusCode::kPayloadTooLarge, "input 'x'");
  // Overflowing products too.
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[4294967296,4294967296,4294967296],"data":[1]}]})",
              StatusCode::kPayloadTooLarge, "input 'x'");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[-1,2],"data":[1,2]}]})",
              StatusCode::kInvalidArgument, "input 'x': shape [-1,2] has negative dimension");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[18446744073709551615],"data":[1]}]})",
              StatusCode::kInvalidArgument, "'shape' must be an array of integers");
}

// RapidJSON 1.1.0's full-precision number path reads out of bounds on these (found by
// the fuzz target); numbers are converted by from_chars instead.
TEST(InferCodecDecode, PathologicalNumbers) {
  const std::string zeros = "0." + std::string(400, '0');
  const std::string tiny = "0." + std::string(400, '0') + "1";
  const std::string body = R"({"inputs":[{"name":"x","datatype":"FP64","shape":[4],"data":[)" + zeros + "," + tiny +
                           ",1e-400,-" + tiny + "]}]}";
  auto r = Decode(body);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto v = Values<double>(r->request.inputs[0].data);
  EXPECT_EQ(v, (std::vector<double>{0.0, 0.0, 0.0, -0.0}));
  EXPECT_TRUE(std::signbit(v[3]));
  // Beyond double's range the grammar check refuses it, with the offset.
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP64","shape":[1],"data":[1e400]}]})",
              StatusCode::kInvalidArgument, "Number too big");
  // Integers beyond 64 bits are numbers, just not integers.
  ExpectError(R"({"inputs":[{"name":"x","datatype":"INT64","shape":[1],"data":[99999999999999999999999]}]})",
              StatusCode::kInvalidArgument, "expected an integer");
}

TEST(InferCodecDecode, DeepNestingIsRefusedNotRecursed) {
  std::string deep = std::string(100000, '[') + "1" + std::string(100000, ']');
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":)" + deep + "}]}",
              StatusCode::kInvalidArgument, "input 'x': 'data' is nested too deeply");
}

TEST(InferCodecDecode, BinaryFramingErrors) {
  const std::string one = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]})";
  // Header length beyond the body.
  ExpectError(one, StatusCode::kInvalidArgument, "Inference-Header-Content-Length is 500 but the body has only",
              500);
  // binary_data_size beyond the bytes that follow.
  ExpectError(one + "1234", StatusCode::kInvalidArgument, "input 'x': 'binary_data_size' is 8 but only 4 bytes",
              one.size());
  // binary_data_size not matching the shape.
  const std::string six = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":6}}]})";
  ExpectError(six + "123456", StatusCode::kInvalidArgument, "input 'x': 'binary_data_size' is 6 but shape [2] of FP32 needs 8",
              six.size());
  // Bytes that no input claims.
  ExpectError(one + "12345678extra", StatusCode::kInvalidArgument, "5 bytes of binary data follow the JSON",
              one.size());
  // Binary input without the header at all: the bytes read as trailing garbage, and the
  // message says what is missing.
  ExpectError(one + "12345678", StatusCode::kInvalidArgument,
              "binary tensor data after the JSON needs the Inference-Header-Content-Length header");
  ExpectError(one, StatusCode::kInvalidArgument, "'binary_data_size' is set but the request has no "
                                                 "Inference-Header-Content-Length header");
  ExpectError(one, StatusCode::kInvalidArgument, "raw binary requests", 0);
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":-4}}]})",
              StatusCode::kInvalidArgument, "input 'x': 'binary_data_size' must be a non-negative integer");
}

TEST(InferCodecDecode, InvalidBinaryBytesElements) {
  const std::string json = R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":9}}]})";
  // First element claims 200 bytes.
  std::string bad("\xc8\x00\x00\x00" "abcde", 9);
  ExpectError(json + bad, StatusCode::kInvalidArgument, "'s'", json.size());
  // One well-formed element where the shape needs two.
  std::string one;
  AppendBytesElement(&one, "abcde");
  ExpectError(json + one, StatusCode::kInvalidArgument, "'s' has 1 elements but its shape needs 2", json.size());
}

TEST(InferCodecDecode, BinaryPartSurvivesInSituParsing) {
  // The JSON is parsed in place with a temporary terminator on the first binary byte.
  const std::string json = R"({"inputs":[{"name":"x","datatype":"UINT8","shape":[1],"parameters":{"binary_data_size":1}}]})";
  auto r = Decode(json + "Z", json.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->request.inputs[0].data, "Z");
}

// --- Encoding ---

rapidjson::Document ParseJson(const std::string& s) {
  rapidjson::Document d;
  d.Parse<rapidjson::kParseFullPrecisionFlag | rapidjson::kParseNanAndInfFlag>(s.c_str(), s.size());
  EXPECT_FALSE(d.HasParseError()) << s;
  return d;
}

TEST(InferCodecEncode, JsonShapeFollowsTriton) {
  InferResponse r;
  r.model_name = "m";
  r.model_version = "3";
  r.id = "abc";
  r.outputs.push_back({"o", DataType::kInt32, {2}, Bytes<int32_t>({7, -8})});
  auto e = EncodeInferResponse(r, {});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_FALSE(e->has_binary);
  EXPECT_EQ(e->body,
            R"({"id":"abc","model_name":"m","model_version":"3","outputs":[{"name":"o","datatype":"INT32","shape":[2],"data":[7,-8]}]})");
  EXPECT_EQ(e->json_length, e->body.size());
}

TEST(InferCodecEncode, BinaryOutputsFollowTheJson) {
  InferResponse r;
  r.model_name = "m";
  r.model_version = "1";
  r.outputs.push_back({"a", DataType::kFp32, {1}, Bytes<float>({2.0f})});
  r.outputs.push_back({"b", DataType::kInt8, {2}, Bytes<int8_t>({1, 2})});
  r.outputs.push_back({"c", DataType::kFp16, {1}, std::string("\x00\x3c", 2)});
  OutputEncoding enc;
  enc.binary["a"] = true;
  enc.binary["c"] = true;
  auto e = EncodeInferResponse(r, enc);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_TRUE(e->has_binary);
  const std::string json = e->body.substr(0, e->json_length);
  EXPECT_EQ(json,
            R"({"model_name":"m","model_version":"1","outputs":[)"
            R"({"name":"a","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}},)"
            R"({"name":"b","datatype":"INT8","shape":[2],"data":[1,2]},)"
            R"({"name":"c","datatype":"FP16","shape":[1],"parameters":{"binary_data_size":2}}]})");
  EXPECT_EQ(e->body.substr(e->json_length), Bytes<float>({2.0f}) + std::string("\x00\x3c", 2));
}

TEST(InferCodecEncode, Fp16AsJsonIsRefusedWithAHint) {
  InferResponse r;
  r.outputs.push_back({"h", DataType::kFp16, {1}, std::string("\x00\x3c", 2)});
  auto e = EncodeInferResponse(r, {});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(e.status().message(), HasSubstr("output 'h' is FP16"));
  EXPECT_THAT(e.status().message(), HasSubstr("binary_data"));
}

TEST(InferCodecEncode, InconsistentOutputIsInternal) {
  InferResponse r;
  r.outputs.push_back({"o", DataType::kFp32, {3}, Bytes<float>({1.0f})});
  auto e = EncodeInferResponse(r, {});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInternal);
  EXPECT_THAT(e.status().message(), HasSubstr("output 'o'"));
}

TEST(InferCodecEncode, BytesBoolAndParameters) {
  InferResponse r;
  std::string s;
  AppendBytesElement(&s, "hi");
  AppendBytesElement(&s, std::string("a\0\"b", 4));
  r.outputs.push_back({"s", DataType::kBytes, {2}, s});
  r.outputs.push_back({"b", DataType::kBool, {2}, std::string("\x01\x00", 2)});
  r.parameters["flag"] = true;
  r.parameters["n"] = int64_t{-3};
  r.parameters["t"] = std::string("x");
  auto e = EncodeInferResponse(r, {});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  auto d = ParseJson(e->body);
  EXPECT_TRUE(d["parameters"]["flag"].GetBool());
  EXPECT_EQ(d["parameters"]["n"].GetInt64(), -3);
  const auto& data = d["outputs"][0]["data"];
  EXPECT_EQ(std::string(data[0].GetString(), data[0].GetStringLength()), "hi");
  EXPECT_EQ(std::string(data[1].GetString(), data[1].GetStringLength()), std::string("a\0\"b", 4));
  EXPECT_TRUE(d["outputs"][1]["data"][0].GetBool());
  EXPECT_FALSE(d["outputs"][1]["data"][1].GetBool());
}

// Every float must come back bit for bit through our writer and our parser.
TEST(InferCodecRoundTrip, FloatingPointIsExact) {
  std::mt19937_64 rng(42);
  std::vector<float> floats = {0.0f, -0.0f, 1.0f, 0.1f, std::numeric_limits<float>::min(),
                               std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::lowest(), std::numeric_limits<float>::epsilon(),
                               std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  std::vector<double> doubles = {0.0, -0.0, 0.1, 1e308, 5e-324, std::numeric_limits<double>::max(),
                                 std::numeric_limits<double>::min(), 1.0 / 3.0,
                                 std::numeric_limits<double>::infinity()};
  for (int i = 0; i < 20000; ++i) {
    uint32_t fb = static_cast<uint32_t>(rng());
    uint64_t db = rng();
    float f;
    double d;
    std::memcpy(&f, &fb, 4);
    std::memcpy(&d, &db, 8);
    if (std::isfinite(f)) floats.push_back(f);
    if (std::isfinite(d)) doubles.push_back(d);
  }
  InferResponse r;
  r.outputs.push_back({"f", DataType::kFp32, {static_cast<int64_t>(floats.size())}, Bytes(floats)});
  r.outputs.push_back({"d", DataType::kFp64, {static_cast<int64_t>(doubles.size())}, Bytes(doubles)});
  auto e = EncodeInferResponse(r, {});
  ASSERT_TRUE(e.ok()) << e.status().ToString();

  // Feed the rendered data straight back as a request.
  auto slice = [&](const char* key) {
    // Extract the raw text of an output's "data" array from the body.
    const std::string marker = std::string("\"name\":\"") + key + "\"";
    size_t at = e->body.find(marker);
    size_t start = e->body.find("\"data\":", at) + 7;
    size_t end = e->body.find(']', start) + 1;
    return e->body.substr(start, end - start);
  };
  const std::string req = std::string(R"({"inputs":[)") + R"({"name":"f","datatype":"FP32","shape":[)" +
                          std::to_string(floats.size()) + "],\"data\":" + slice("f") + "}," +
                          R"({"name":"d","datatype":"FP64","shape":[)" + std::to_string(doubles.size()) +
                          "],\"data\":" + slice("d") + "}]}";
  auto back = Decode(req, std::nullopt, 1 << 24);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->request.inputs[0].data, Bytes(floats));
  EXPECT_EQ(back->request.inputs[1].data, Bytes(doubles));
}

TEST(InferCodecRoundTrip, NanSurvives) {
  InferResponse r;
  r.outputs.push_back({"f", DataType::kFp32, {1}, Bytes<float>({std::numeric_limits<float>::quiet_NaN()})});
  auto e = EncodeInferResponse(r, {});
  ASSERT_TRUE(e.ok());
  EXPECT_THAT(e->body, HasSubstr("[NaN]"));
  auto back = Decode(R"({"inputs":[{"name":"f","datatype":"FP32","shape":[1],"data":[NaN]}]})");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(std::isnan(Values<float>(back->request.inputs[0].data)[0]));
}

}  // namespace
}  // namespace fastpath::frontend::http
