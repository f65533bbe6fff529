// Direct tests of the HTTP inference codec: no sockets, just bytes in and out.
#include "infer_codec.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "decode_outcome.h"

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

// Which of two values a reader keeps is a guess: a parameter given twice is refused, on
// the fast path and the fallback alike.
TEST(InferCodecDecode, AParameterGivenTwiceIsRefused) {
  ExpectError(R"({"parameters":{"priority":1,"priority":2},)"
              R"("inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1.5]}]})",
              StatusCode::kInvalidArgument, "'parameters': 'priority' is given twice");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1.5]}],)"
              R"("outputs":[{"name":"a","parameters":{"binary_data":true,"binary_data":false}}]})",
              StatusCode::kInvalidArgument, "'binary_data' is given twice");
  // Any member, at any level a decoder reads by name.
  ExpectError(R"({"parameters":{},"parameters":{},)"
              R"("inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1.5]}]})",
              StatusCode::kInvalidArgument, "the request JSON: 'parameters' is given twice");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1.5],"data":[2]}]})",
              StatusCode::kInvalidArgument, "input 0: 'data' is given twice");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1.5]}],)"
              R"("outputs":[{"name":"a","name":"b"}]})",
              StatusCode::kInvalidArgument, "output 0: 'name' is given twice");
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
  // Integers beyond 64 bits (read as doubles) are out of range, as any other; a number with
  // a fraction or an exponent is no integer, whatever its value.
  ExpectError(
      R"({"inputs":[{"name":"x","datatype":"UINT64","shape":[1],"data":[18446744073709551616]}]})",
      StatusCode::kInvalidArgument, "element 0 is out of range for UINT64");
  ExpectError(
      R"({"inputs":[{"name":"x","datatype":"INT64","shape":[1],"data":[-9223372036854775809]}]})",
      StatusCode::kInvalidArgument, "element 0 is out of range for INT64");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[3.0]}]})",
              StatusCode::kInvalidArgument, "element 0 is a number, expected an integer");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"UINT64","shape":[1],"data":[1e19]}]})",
              StatusCode::kInvalidArgument,
              "element 0 is a number, expected a non-negative integer");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"BOOL","shape":[1],"data":[1]}]})",
              StatusCode::kInvalidArgument, "expected true or false");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":["1"]}]})",
              StatusCode::kInvalidArgument, "is a string, expected a number");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1e39]}]})",
              StatusCode::kInvalidArgument, "out of range for FP32");
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[3.4028236e38]}]})",
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
  // 10^12 elements of FP32 would be 4 TB: refused on the shape, nothing allocated. No body
  // within the limit holds them, so the request contradicts itself: 400, not 413 (which
  // invites a retry).
  ExpectError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,1000000000000],"data":[1]}]})",
              StatusCode::kInvalidArgument,
              "input 'x': shape [1,1000000000000] has more elements than a request body within "
              "the server's limit can hold");
  ExpectError(
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,1000000000000],"parameters":{"binary_data_size":4}}]})",
      StatusCode::kInvalidArgument, "input 'x'");
  // Overflowing products too.
  ExpectError(
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[4294967296,4294967296,4294967296],"data":[1]}]})",
      StatusCode::kInvalidArgument, "input 'x'");
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
  // Integers beyond 64 bits are integers out of range, as any other.
  ExpectError(
      R"({"inputs":[{"name":"x","datatype":"INT64","shape":[1],"data":[99999999999999999999999]}]})",
      StatusCode::kInvalidArgument, "element 0 is out of range for INT64");
}

// JSON is UTF-8: text that is not is refused at its first bad byte, on both paths. A body
// that ends inside a multi-byte sequence, inside a string, is the case RapidJSON's own
// check read past the end of the buffer on (the codec's fuzz target; ASan builds see it).
TEST(InferCodecDecode, TextThatIsNotUtf8IsRefusedAtItsOffset) {
  ExpectError(R"({"id":"x)"
              "\xff"
              R"(","inputs":[]})",
              StatusCode::kInvalidArgument, "at offset 8: not valid UTF-8");
  ExpectError(R"({"inputs":[{"name":"a","datatype":"BYTES","shape":[1],"data":[")"
              "\xed\xa0\x80"
              R"("]}]})",
              StatusCode::kInvalidArgument, "not valid UTF-8");
  for (const char* tail : {"\xeb", "\xf0\x9f", "\xc3"}) {
    ExpectError(std::string(R"({"inputs":[{"name":"u","datat)") + tail,
                StatusCode::kInvalidArgument, "at offset 29: not valid UTF-8");
    std::string body = std::string(R"({"inputs":[{"name":"u","datat)") + tail;
    auto reference = internal::DecodeInferRequest(body, std::nullopt, InferCodecLimits{},
                                                  internal::JsonPath::kRapidJsonOnly);
    EXPECT_FALSE(reference.ok());
  }
  // Well-formed UTF-8 beyond ASCII decodes.
  auto r = Decode(R"({"id":"caf)"
                  "\xc3\xa9"
                  R"(","inputs":[{"name":"a","datatype":"BYTES","shape":[1],"data":[")"
                  "\xe6\xa8\xa1"
                  R"("]}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->request.id, "caf\xc3\xa9");
}

// A NUL ended the JSON text for the parser, and what followed it went unread. NULs alone
// are a C client's string terminator, which Triton accepts too.
TEST(InferCodecDecode, TextAfterANulIsRefusedAsAnyOther) {
  const std::string json = R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[7]}]})";
  ExpectError(json + std::string("\0 not JSON {{{", 14), StatusCode::kInvalidArgument,
              "at offset " + std::to_string(json.size()));
  for (const std::string& tail : {std::string("\0", 1), std::string("\0\0", 2)}) {
    auto r = Decode(json + tail);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->request.inputs[0].data, std::string("\x07\0\0\0", 4));
  }
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
  // The same where the bytes are not UTF-8, as most tensor bytes are not: the body's first
  // stray byte is found before its JSON is read.
  ExpectError(one + std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8),
              StatusCode::kInvalidArgument,
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

// --- The simdjson fast path, held to the RapidJSON path ---

// Decodes `body` through DecodeInferRequest and through the RapidJSON path alone, and
// requires the same outcome; `fast` says whether the fast path's parse should be the one
// decoded (false: it should give up). The body is given no spare capacity, so the fast
// path's own padding is exercised too.
void ExpectSameAsRapidJson(const std::string& body, bool fast, std::optional<size_t> json_length = std::nullopt,
                           int64_t max_elements = 1 << 20) {
  InferCodecLimits limits;
  limits.max_elements = max_elements;
  std::string fast_body = body;
  fast_body.shrink_to_fit();
  std::string reference_body = body;
  bool used = false;
  const auto decoded = internal::DecodeInferRequest(fast_body, json_length, limits,
                                                    internal::JsonPath::kFastWithFallback, &used);
  const auto reference = internal::DecodeInferRequest(reference_body, json_length, limits,
                                                      internal::JsonPath::kRapidJsonOnly);
  EXPECT_EQ(DescribeDecodeOutcome(decoded), DescribeDecodeOutcome(reference)) << body;
  EXPECT_EQ(used, fast) << body;
}

// {"inputs":[{"name":"x","datatype":<dtype>,"shape":<shape>,"data":<data>}]}
std::string OneInput(const std::string& dtype, const std::string& shape, const std::string& data) {
  return R"({"inputs":[{"name":"x","datatype":")" + dtype + R"(","shape":)" + shape + R"(,"data":)" + data + "}]}";
}

TEST(InferCodecFastPath, DecodesDataAsRapidJsonDoes) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"FP32",
       "[0.1,-2,3.4028234663852886e38,-3.4028234663852886e38,1e-46,123,0.10000000149011612]"},
      // FLT_MAX as numpy, Rust and std::to_chars write it: above FLT_MAX as a double, but it
      // rounds to FLT_MAX, not to infinity.
      {"FP32", "[3.4028235e38,-3.4028235e38,3.40282356e38]"},
      {"FP32", "[[1.5,-0.30000001192092896],[7,-1.1754943508222875e-38],[2e-45,0.0],[-0.0,-0]]"},
      // 17 significant digits, as Python's repr, with and without exponents.
      {"FP64",
       "[0.10000000149011612,-0.30000001192092896,1.2345678901234567e-05,-9.8765432109876543e+"
       "200]"},
      // Zeros: "-0" is the integer 0 to RapidJSON, so +0.0; "-0.0" stays negative.
      {"FP64", "[-0,-0.0,0,0.0,0e5,-0E-5,1e-400,-1e-400]"},
      // Subnormals, the smallest normal, a halfway integer, integers beyond 64 bits.
      {"FP64",
       "[4.9e-324,-2.4e-324,2.2250738585072011e-308,9007199254740993,"
       "123456789012345678901234567890]"},
      // Long mantissas (simdjson 3.0.1 misreads the first two on its own).
      {"FP64",
       "[0.95000000000000000000,0.1234567890123456789012345678901234567890,"
       "3.14159265358979323846264338327950288,-1."
       "00000000000000011102230246251565404236316680908203125]"},
      {"FP64", "[1.7976931348623157e308,-1.7976931348623157e308,2.2250738585072014e-308]"},
      // 2^64 as the digits of a fraction (the fuzz target's find): 20 significant digits
      // whose accumulator wraps to a small one.
      {"FP64", "[0.018446744073709551616,18446744073709551616e-21,0.18446744073709551617]"},
      {"INT8", "[-128,127,-0,0]"},
      {"INT16", "[-32768,32767,1,-1]"},
      {"INT32", "[-2147483648,2147483647,0,5]"},
      {"INT64", "[-9223372036854775808,9223372036854775807,0,-1]"},
      {"UINT8", "[0,255,1,2]"},
      {"UINT16", "[0,65535,1,2]"},
      {"UINT32", "[0,4294967295,1,2]"},
      {"UINT64", "[0,18446744073709551615,9223372036854775808,10000000000000000000]"},
      {"BOOL", "[true,false,[true],[[false]]]"},
  };
  for (const auto& [dtype, data] : cases) {
    const std::string body = OneInput(dtype, "[" + std::to_string(std::count(data.begin(), data.end(), ',') + 1) + "]",
                                      data);
    ExpectSameAsRapidJson(body, true);
    EXPECT_TRUE(Decode(body).ok()) << body;
  }
  // Below double's range without an exponent (RapidJSON's path reads them as ±0).
  const std::string tiny = "0." + std::string(400, '0') + "1";
  ExpectSameAsRapidJson(OneInput("FP64", "[4]", "[" + tiny + ",-" + tiny + ",0.000,-0.000]"), true);
  ExpectSameAsRapidJson(OneInput("FP32", "[2]", "[" + tiny + ",-" + tiny + "]"), true);
  ExpectSameAsRapidJson(OneInput("INT32", "[2,3]", "[[1,2,3],[4,5,6]]"), true);
  ExpectSameAsRapidJson(OneInput("FP32", "[0]", "[]"), true);
  ExpectSameAsRapidJson(OneInput("FP32", "[2,0]", "[[],[]]"), true);
}

TEST(InferCodecFastPath, GivesUpOnRefusedOrUnusualData) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"FP32", "[3.4028236e38]"},          // over FLT_MAX
      {"FP64", "[1e400]"},                 // "Number too big" (simdjson refuses it too)
      {"FP64", "[NaN]"},                   // accepted by RapidJSON, not by simdjson
      {"FP64", "[-Infinity]"},
      {"FP64", "[\"1\"]"},
      {"FP64", "[0e400]"},                 // zero to simdjson, "Number too big" to RapidJSON
      {"FP64", "[1" + std::string(400, '0') + "e-300]"},  // likewise for the integer part
      {"INT8", "[128]"},
      {"INT8", "[-129]"},
      {"INT32", "[1.5]"},
      {"INT32", "[1e2]"},
      {"INT32", "[2147483648]"},
      {"INT64", "[9223372036854775808]"},
      {"INT64", "[99999999999999999999999]"},
      {"UINT8", "[-1]"},
      {"UINT8", "[-0]"},                   // RapidJSON's Int64 0 is in range: decoded by it
      {"UINT64", "[18446744073709551616]"},
      {"BOOL", "[1]"},
      {"BOOL", "[null]"},
  };
  for (const auto& [dtype, data] : cases) ExpectSameAsRapidJson(OneInput(dtype, "[1]", data), false);
  // Too many, too few, too deep, and not an array.
  ExpectSameAsRapidJson(OneInput("FP32", "[2]", "[1,2,3]"), false);
  ExpectSameAsRapidJson(OneInput("FP32", "[2]", "[1]"), false);
  ExpectSameAsRapidJson(OneInput("FP32", "[1]", std::string(33, '[') + "1" + std::string(33, ']')), false);
  ExpectSameAsRapidJson(OneInput("FP32", "[1]", std::string(32, '[') + "1" + std::string(32, ']')), true);
  ExpectSameAsRapidJson(OneInput("FP32", "[1]", "1"), false);
}

TEST(InferCodecFastPath, OtherValuesAndKeysAsRapidJsonHasThem) {
  const std::vector<std::pair<std::string, bool>> cases = {
      // Decoded by the fast path. Escaped keys name the same members.
      {R"({"inputs":[{"n\u0061me":"x","d\u0061tatype":"FP32","sh\u0061pe":[1],"d\u0061ta":[1]}]})",
       true},
      // Parameters of every type, on the request, inputs and outputs; outputs' binary_data.
      {R"({"id":"r","parameters":{"b":true,"i":-3,"u":18446744073709551615,"d":0.5,"e":1e300,"z":-0,"s":"v",)"
       R"("binary_data_output":true},"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],)"
       R"("parameters":{"p":1.25,"q":"w"}}],"outputs":[{"name":"a","parameters":{"binary_data":false,"k":2}},)"
       R"({"name":"b"}]})",
       true},
      // Strings: NUL and non-ASCII escapes, raw UTF-8.
      {R"({"id":"a\u0000b\u00ff\u4e2d","inputs":[{"name":"é中😀","datatype":"BOOL","shape":[1],"data":[true]}]})",
       true},
      {R"({"inputs":[],"parameters":{"p":0.001e309}})", true},  // 1e306 to both
      // Left to the RapidJSON path, which decides. Duplicates: RapidJSON keeps all, the
      // decoding reads the first.
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],"data":[2]}]})", false},
      {R"({"inputs":[{"name":"x","name":"y","datatype":"FP32","shape":[1],"data":[1]}]})", false},
      {R"({"inputs":[{"name":"x","datatype":"FP32","datatype":"INT8","shape":[1],"shape":[2],"data":[1.5]}]})",
       false},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}],"inputs":[]})", false},
      {R"({"id":"a","id":"b","inputs":[]})", false},
      // Data before its shape or datatype.
      {R"({"inputs":[{"name":"x","data":[1,2],"datatype":"FP32","shape":[2]}]})", false},
      {R"({"inputs":[{"data":[[1],[2]],"shape":[2,1],"name":"x","datatype":"INT16"}]})", false},
      {R"({"inputs":[{"name":"x","datatype":"FP32","data":[1,2],"shape":[2]}]})", false},
      // Unknown keys with nested values of every kind.
      {R"({"x":{"a":[1,{"b":null,"c":true,"d":[]}],"e":"s","f":-0.5e-3},"inputs":[{"name":"x","u":[[{}]],)"
       R"("datatype":"UINT8","shape":[1],"data":[7]}],"y":[null,false,"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"]})",
       false},
      // BYTES and FP16 data (DecodeJsonData refuses FP16).
      {R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[2],"data":["ab","\u0000"]}]})", false},
      {R"({"inputs":[{"name":"h","datatype":"FP16","shape":[1],"data":[1.0]}]})", false},
      // Refused by the decoding.
      {R"({"inputs":[{"datatype":"FP32","shape":[1],"data":[1]}]})", false},
      {R"({"inputs":[{"name":"x","datatype":"FP33","shape":[1],"data":[1]}]})", false},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1.5],"data":[1]}]})", false},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[-1],"data":[1]}]})", false},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1000000000000],"data":[1]}]})", false},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[100000],"data":[1]}]})",
       false},  // more than the JSON
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],"parameters":{"binary_data_size":4}}]})",
       false},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"parameters":{"shared_memory_region":"r"},"data":[1]}]})",
       false},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]},{"name":"x","datatype":"FP32","shape":[1],"data":[2]}]})",
       false},
      {R"({"inputs":[1,{"name":"x"}]})", false},
      {R"({"inputs":{}})", false},
      {R"({"id":3,"inputs":[]})", false},
      {R"({"inputs":[],"parameters":{"p":[1]}})", false},
      {R"({"inputs":[],"outputs":[{"name":"o"},{"name":"o"}]})", false},
      {R"({"inputs":[],"outputs":[{"name":"o","parameters":{"binary_data":"yes"}}]})", false},
      {R"({"inputs":[],"outputs":[{"name":"o","parameters":{"classification":2}}]})", false},
      {R"({"inputs":[],"outputs":[{"name":"o","x":1}]})", false},
      {R"({"inputs":[],"outputs":[1]})", false},
      {R"({"inputs":[],"parameters":{"binary_data_output":1}})", false},
      {R"({"inputs":[],"parameters":{"sequence_id":7}})", false},
      {R"({"inputs":[],"parameters":{"n":null}})", false},
      {R"({"inputs":[],"parameters":{"a":1,"a":"two"}})", false},  // the last one to RapidJSON's
      // What RapidJSON refuses, or simdjson does and RapidJSON does not: the fast path gives up.
      {"[1]", false},
      {R"({"inputs":[],"parameters":{"p":NaN}})", false},
      {R"({"inputs":[],"parameters":{"p":0e400}})", false},
      {R"({"inputs":[],"parameters":{"p":1e309}})", false},
      {"{\"inputs\":[],\"id\":\"a\x01\"}", false},
      {"{\"inputs\":[],\"id\":\"a\tb\"}", false},
      {"{\"inputs\":[],\"k\x1f\":1}", false},
      {R"({"inputs":[],"id":"\ud800"})", false},
      {R"({"inputs":[],"id":"\ud800\u0041"})", false},
      {R"({"inputs":[],"id":"\udc00"})", false},       // a lone low surrogate: RapidJSON takes it
      {"{\"inputs\":[],\"id\":\"\xc3\x28\"}", false},  // invalid UTF-8: RapidJSON takes it
      {"\xef\xbb\xbf{\"inputs\":[]}", false},
      {R"({"inputs":[]} x)", false},
      {R"({"inputs":[]}{})", false},
      {R"({"inputs":[]}})", false},
      {std::string("{\"inputs\":[]}\0garbage", 21), false},  // RapidJSON stops at the NUL
      {R"({"inputs":[],})", false},
      {R"({"inputs":[1,]})", false},
      {R"({"inputs":[] "id":"a"})", false},
      {R"({"inputs":[],"a":nul})", false},
      {R"({"inputs":[],"a":truex})", false},
      {R"({"inputs":[],"a":01})", false},
      {R"({"inputs":[],"a":1.})", false},
      {R"({"inputs":[],"a":-})", false},
      {R"({"inputs":[)", false},
      {R"({"inputs":[],"x":)" + std::string(70, '[') + std::string(70, ']') + "}", false},
  };
  for (const auto& [body, fast] : cases) ExpectSameAsRapidJson(body, fast);
}

TEST(InferCodecFastPath, BinaryPartsAndHeaderLength) {
  const std::string json =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}},)"
      R"({"name":"j","datatype":"INT64","shape":[2],"data":[-5,6]},)"
      R"({"name":"b","datatype":"UINT8","shape":[3],"parameters":{"binary_data_size":3}}]})";
  const std::string binary = Bytes<float>({1.25f, -2.5f}) + std::string("\x01\x02\x03", 3);
  ExpectSameAsRapidJson(json + binary, true, json.size());
  ExpectSameAsRapidJson(json + binary + "x", false, json.size());  // bytes that no input claims
  ExpectSameAsRapidJson(json + binary, false);                     // binary without the header
  // binary_data_size as DecodeInput reads it: a non-negative integer, within the body.
  for (const char* size : {"8.0", "-8", "\"8\"", "18446744073709551615", "9", "7"}) {
    std::string sized = json;
    sized.replace(sized.find("\"binary_data_size\":8"), 20,
                  std::string("\"binary_data_size\":") + size);
    ExpectSameAsRapidJson(sized + binary, false, sized.size());
  }
  // BYTES: well-formed elements are decoded by the fast path, a short one is refused.
  const std::string strings =
      R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":13}}]})";
  std::string elements;
  AppendBytesElement(&elements, "");
  AppendBytesElement(&elements, "abcde");
  ExpectSameAsRapidJson(strings + elements, true, strings.size());
  ExpectSameAsRapidJson(strings + elements.substr(0, 4) + std::string("\x06\0\0\0abcde", 9), false,
                        strings.size());
  // The header covers the whole body: nothing follows the JSON.
  const std::string only_json = OneInput("FP32", "[2]", "[1,2]");
  ExpectSameAsRapidJson(only_json, true, only_json.size());
  ExpectSameAsRapidJson(only_json + "[]", false, only_json.size() + 2);  // a second root
  ExpectSameAsRapidJson(only_json, false, only_json.size() - 1);        // cut before its end
}

// The example CNN's request as tritonclient sends it: 3072 FP32 values, each as Python's
// repr of the float widened to double (17 digits), and again as the shortest float text.
TEST(InferCodecFastPath, CnnRequestIsDecodedByTheFastPath) {
  std::mt19937 rng(7);
  std::normal_distribution<float> pixel(0.0f, 1.0f);
  std::vector<float> values(3072);
  for (float& v : values) v = pixel(rng);
  for (const char* format : {"%.17g", "%.9g"}) {
    std::string data = "[";
    for (float v : values) {
      char text[40];
      std::snprintf(text, sizeof text, format, static_cast<double>(v));
      data += std::string(text) + ",";
    }
    data.back() = ']';
    const std::string body = R"({"id":"1","inputs":[{"name":"input","shape":[1,3,32,32],"datatype":"FP32","data":)" +
                             data + R"(}],"outputs":[{"name":"logits","parameters":{"binary_data":true}}]})";
    ExpectSameAsRapidJson(body, true);
    auto r = Decode(body);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->request.inputs[0].data, Bytes(values)) << format;
  }
}

// A body over 1 MiB is read by a parser of its own rather than the thread's.
TEST(InferCodecFastPath, LargeBody) {
  std::string data = "[";
  for (int i = 0; i < 300000; ++i) data += i % 3 == 0 ? "-0.25," : "1.5e-3,";
  data.back() = ']';
  const std::string body = OneInput("FP64", "[300000]", data);
  ASSERT_GT(body.size(), size_t{1} << 20);
  ExpectSameAsRapidJson(body, true);
}

// Bodies with a few bytes changed, JSON-significant ones mostly: whatever they have become,
// the two paths agree.
TEST(InferCodecFastPath, MutatedBodiesAgree) {
  const std::vector<std::string> seeds = {
      OneInput("FP32", "[2,2]", "[[0.5,-1e-7],[3,-0]]"),
      OneInput("INT8", "[3]", "[-128,0,127]"),
      R"({"id":"q","parameters":{"a":1,"b":"c"},"inputs":[{"name":"x","datatype":"BOOL","shape":[2],"data":[true,false]}],)"
      R"("outputs":[{"name":"o","parameters":{"binary_data":true}}]})",
  };
  const std::string alphabet = "{}[]\",:.-+eE0123456789 \ntfnul\\";
  std::mt19937 rng(11);
  for (const std::string& seed : seeds) {
    for (int i = 0; i < 3000; ++i) {
      std::string body = seed;
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits; ++e) {
        const size_t at = rng() % body.size();
        const uint32_t pick = rng() % (alphabet.size() + 4);
        const char c = pick < alphabet.size() ? alphabet[pick] : "\x00\x1f\xff\x7f"[pick - alphabet.size()];
        switch (rng() % 3) {
          case 0: body[at] = c; break;
          case 1: body.insert(at, 1, c); break;
          default: body.erase(at, 1); break;
        }
      }
      if (body.empty()) continue;
      InferCodecLimits limits;
      std::string fast_body = body;
      std::string reference_body = body;
      const auto decoded = internal::DecodeInferRequest(fast_body, std::nullopt, limits,
                                                        internal::JsonPath::kFastWithFallback);
      const auto reference = internal::DecodeInferRequest(reference_body, std::nullopt, limits,
                                                          internal::JsonPath::kRapidJsonOnly);
      ASSERT_EQ(DescribeDecodeOutcome(decoded), DescribeDecodeOutcome(reference)) << body;
    }
  }
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

// JSON carries text: BYTES that are not UTF-8 came back with each stray byte as U+FFFD, an
// identity model changing what it was sent. They are refused with the way to get them.
TEST(InferCodecEncode, BytesThatAreNotUtf8AsJsonAreRefusedWithAHint) {
  InferResponse r;
  std::string s;
  AppendBytesElement(&s, "text");
  AppendBytesElement(&s, std::string("\x89PNG\xff", 5));
  r.outputs.push_back({"img", DataType::kBytes, {2}, s});
  auto e = EncodeInferResponse(r, {});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e.status().message(),
            "output 'img' element 1 is not UTF-8 text, which JSON cannot carry; request it with "
            "parameters {\"binary_data\": true}");
  OutputEncoding binary;
  binary.binary["img"] = true;
  auto b = EncodeInferResponse(r, binary);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->body.substr(b->json_length), s);
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
