// A round trip of every KServe datatype through identity_<dtype>: HTTP JSON (where the
// type has a JSON form), HTTP binary, gRPC raw and gRPC typed contents. Values must come
// back bit for bit, including the extremes of every integer type, negative zero and
// denormals, and BYTES elements that are empty or hold NUL bytes.
#include <cfloat>
#include <cmath>
#include <limits>

#include "integration_fixture.h"

namespace fastpath::integration {
namespace {

// Shape [2, 3]: a batch of two rows, within every identity model's max_batch_size.
constexpr int kRows = 2;
constexpr int kCols = 3;
constexpr int kCount = kRows * kCols;

struct DtypeCase {
  std::string datatype;  // KServe name
  std::string suffix;    // identity_<suffix>
  std::string raw;       // the wire bytes (BYTES: length-prefixed elements)
  bool has_json = true;
  std::vector<std::string> strings;  // BYTES only: the elements
};

template <typename T>
DtypeCase Fixed(const std::string& datatype, const std::string& suffix, std::vector<T> values,
                bool has_json = true) {
  return DtypeCase{datatype, suffix, AsBytes(values), has_json, {}};
}

template <typename T>
std::vector<T> IntExtremes() {
  using L = std::numeric_limits<T>;
  return {L::min(), static_cast<T>(L::min() + 1), 0, 1, static_cast<T>(L::max() - 1), L::max()};
}

std::vector<DtypeCase> AllCases() {
  std::vector<DtypeCase> cases;
  cases.push_back(Fixed<uint8_t>("BOOL", "bool", {1, 0, 1, 1, 0, 0}));
  cases.push_back(Fixed<uint8_t>("UINT8", "uint8", IntExtremes<uint8_t>()));
  cases.push_back(Fixed<uint16_t>("UINT16", "uint16", IntExtremes<uint16_t>()));
  cases.push_back(Fixed<uint32_t>("UINT32", "uint32", IntExtremes<uint32_t>()));
  // 2^53 + 1 is not a double: it proves integers are not routed through floating point.
  cases.push_back(Fixed<uint64_t>("UINT64", "uint64",
                                  {0, 1, (uint64_t{1} << 53) + 1, uint64_t{1} << 63,
                                   UINT64_MAX - 1, UINT64_MAX}));
  cases.push_back(Fixed<int8_t>("INT8", "int8", IntExtremes<int8_t>()));
  cases.push_back(Fixed<int16_t>("INT16", "int16", IntExtremes<int16_t>()));
  cases.push_back(Fixed<int32_t>("INT32", "int32", IntExtremes<int32_t>()));
  cases.push_back(Fixed<int64_t>("INT64", "int64",
                                 {INT64_MIN, -((int64_t{1} << 53) + 1), -1, 0,
                                  (int64_t{1} << 53) + 1, INT64_MAX}));
  // FP16 and BF16 have no JSON form: raw bit patterns (zero, -0, one, max, the smallest
  // denormal, -inf).
  cases.push_back(Fixed<uint16_t>("FP16", "fp16", {0x0000, 0x8000, 0x3c00, 0x7bff, 0x0001, 0xfc00},
                                  /*has_json=*/false));
  cases.push_back(Fixed<uint16_t>("BF16", "bf16", {0x0000, 0x8000, 0x3f80, 0x7f7f, 0x0001, 0xff80},
                                  /*has_json=*/false));
  cases.push_back(Fixed<float>("FP32", "fp32",
                               {0.0f, -0.0f, 1.5f, FLT_MAX, std::numeric_limits<float>::denorm_min(),
                                -3.14159265f}));
  cases.push_back(Fixed<double>("FP64", "fp64",
                                {0.0, -0.0, 0.1, DBL_MAX, std::numeric_limits<double>::denorm_min(),
                                 -1e300}));
  DtypeCase bytes{"BYTES", "bytes", "", true, {}};
  bytes.strings = {"hello", "", std::string("with\0nul", 8), "\xc3\xbcnicode", "tab\t\"quoted\"",
                   std::string(1, '\0')};
  bytes.raw = BytesElements(bytes.strings);
  cases.push_back(bytes);
  return cases;
}

// The JSON "data" array for a case.
std::string JsonData(const DtypeCase& c) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartArray();
  for (int i = 0; i < kCount; ++i) {
    const char* p = c.raw.data();
    if (c.datatype == "BOOL") w.Bool(p[i] != 0);
    else if (c.datatype == "UINT8") w.Uint(reinterpret_cast<const uint8_t*>(p)[i]);
    else if (c.datatype == "UINT16") w.Uint(FromBytes<uint16_t>(c.raw)[i]);
    else if (c.datatype == "UINT32") w.Uint(FromBytes<uint32_t>(c.raw)[i]);
    else if (c.datatype == "UINT64") w.Uint64(FromBytes<uint64_t>(c.raw)[i]);
    else if (c.datatype == "INT8") w.Int(FromBytes<int8_t>(c.raw)[i]);
    else if (c.datatype == "INT16") w.Int(FromBytes<int16_t>(c.raw)[i]);
    else if (c.datatype == "INT32") w.Int(FromBytes<int32_t>(c.raw)[i]);
    else if (c.datatype == "INT64") w.Int64(FromBytes<int64_t>(c.raw)[i]);
    else if (c.datatype == "FP32") w.Double(FromBytes<float>(c.raw)[i]);
    else if (c.datatype == "FP64") w.Double(FromBytes<double>(c.raw)[i]);
    else if (c.datatype == "BYTES") {
      w.String(c.strings[i].data(), static_cast<rapidjson::SizeType>(c.strings[i].size()));
    }
  }
  w.EndArray();
  return std::string(buffer.GetString(), buffer.GetSize());
}

// Converts a JSON "data" array back into the wire bytes of the case's datatype.
std::string JsonToRaw(const DtypeCase& c, const rapidjson::Value& data) {
  std::string out;
  auto put = [&](auto v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  for (const auto& v : data.GetArray()) {
    if (c.datatype == "BOOL") {
      EXPECT_TRUE(v.IsBool()) << ToJson(v);
      put(static_cast<uint8_t>(v.IsBool() && v.GetBool()));
    } else if (c.datatype == "BYTES") {
      EXPECT_TRUE(v.IsString()) << ToJson(v);
      if (v.IsString()) out += BytesElements({std::string(v.GetString(), v.GetStringLength())});
    } else if (c.datatype == "FP32") {
      put(static_cast<float>(v.GetDouble()));
    } else if (c.datatype == "FP64") {
      put(v.GetDouble());
    } else if (c.datatype.rfind("UINT", 0) == 0) {
      EXPECT_TRUE(v.IsUint64()) << ToJson(v);
      uint64_t u = v.IsUint64() ? v.GetUint64() : 0;
      if (c.datatype == "UINT8") put(static_cast<uint8_t>(u));
      if (c.datatype == "UINT16") put(static_cast<uint16_t>(u));
      if (c.datatype == "UINT32") put(static_cast<uint32_t>(u));
      if (c.datatype == "UINT64") put(u);
    } else {
      EXPECT_TRUE(v.IsInt64()) << ToJson(v);
      int64_t s = v.IsInt64() ? v.GetInt64() : 0;
      if (c.datatype == "INT8") put(static_cast<int8_t>(s));
      if (c.datatype == "INT16") put(static_cast<int16_t>(s));
      if (c.datatype == "INT32") put(static_cast<int32_t>(s));
      if (c.datatype == "INT64") put(s);
    }
  }
  return out;
}

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

void ExpectOutputHeader(const rapidjson::Value& out, const DtypeCase& c) {
  EXPECT_STREQ(out["name"].GetString(), "OUTPUT0");
  EXPECT_EQ(std::string(out["datatype"].GetString()), c.datatype);
  ASSERT_EQ(out["shape"].Size(), 2u);
  EXPECT_EQ(out["shape"][0].GetInt64(), kRows);
  EXPECT_EQ(out["shape"][1].GetInt64(), kCols);
}

class DatatypeTest : public ServerTest {};

TEST_F(DatatypeTest, HttpJsonRoundTrip) {
  for (const auto& c : AllCases()) {
    if (!c.has_json) continue;
    SCOPED_TRACE(c.datatype);
    std::string body = R"({"inputs":[{"name":"INPUT0","datatype":")" + c.datatype +
                       R"(","shape":[2,3],"data":)" + JsonData(c) + "}]}";
    HttpResponse r = http().Post("/v2/models/identity_" + c.suffix + "/infer", body);
    ASSERT_EQ(r.status, 200) << r.Describe();
    auto doc = ParseJson(r.body);
    ASSERT_EQ(doc["outputs"].Size(), 1u) << r.body;
    const auto& out = doc["outputs"][0];
    ExpectOutputHeader(out, c);
    ASSERT_TRUE(out.HasMember("data") && out["data"].IsArray()) << r.body;
    ASSERT_EQ(out["data"].Size(), static_cast<rapidjson::SizeType>(kCount)) << r.body;
    EXPECT_EQ(Hex(JsonToRaw(c, out["data"])), Hex(c.raw)) << r.body;
  }
}

TEST_F(DatatypeTest, HttpBinaryRoundTrip) {
  auto cases = AllCases();
  // Binary BYTES may carry what JSON cannot: bytes that are not UTF-8.
  DtypeCase raw_bytes{"BYTES", "bytes", "", false, {}};
  raw_bytes.strings = {"\xff\xfe", "", std::string("\0\0\0", 3), "abc", "\x80", "z"};
  raw_bytes.raw = BytesElements(raw_bytes.strings);
  cases.push_back(raw_bytes);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.datatype);
    std::string json = R"({"inputs":[{"name":"INPUT0","datatype":")" + c.datatype +
                       R"(","shape":[2,3],"parameters":{"binary_data_size":)" +
                       std::to_string(c.raw.size()) +
                       R"(}}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]})";
    BinaryBody body = MakeBinaryBody(json, {c.raw});
    HttpResponse r = http().Post("/v2/models/identity_" + c.suffix + "/infer", body.body,
                                 {{"Inference-Header-Content-Length",
                                   std::to_string(body.json_length)}});
    ASSERT_EQ(r.status, 200) << r.Describe();
    auto decoded = DecodeBinaryResponse(r);
    ASSERT_EQ(decoded.blobs.size(), 1u);
    ExpectOutputHeader(decoded.json["outputs"][0], c);
    EXPECT_EQ(Hex(decoded.blobs[0]), Hex(c.raw));
  }
}

TEST_F(DatatypeTest, HttpHalfPrecisionAsJsonIsRefused) {
  // FP16/BF16 have no JSON representation: asking for one is a 400 that names it,
  // not a garbled answer.
  for (const char* suffix : {"fp16", "bf16"}) {
    SCOPED_TRACE(suffix);
    std::string dt = std::string(suffix) == "fp16" ? "FP16" : "BF16";
    std::string json_input = R"({"inputs":[{"name":"INPUT0","datatype":")" + dt +
                             R"(","shape":[1,2],"data":[1.0,2.0]}]})";
    HttpResponse r = http().Post("/v2/models/identity_" + std::string(suffix) + "/infer", json_input);
    EXPECT_EQ(r.status, 400) << r.Describe();
    EXPECT_NE(ErrorMessage(r.body), "") << r.body;

    std::string json = R"({"inputs":[{"name":"INPUT0","datatype":")" + dt +
                       R"(","shape":[1,2],"parameters":{"binary_data_size":4}}]})";
    BinaryBody body = MakeBinaryBody(json, {std::string("\x00\x3c\x00\x3c", 4)});
    HttpResponse out = http().Post("/v2/models/identity_" + std::string(suffix) + "/infer",
                                   body.body, {{"Inference-Header-Content-Length",
                                                std::to_string(body.json_length)}});
    EXPECT_EQ(out.status, 400) << out.Describe();
    EXPECT_NE(ErrorMessage(out.body).find("OUTPUT0"), std::string::npos) << out.body;
  }
  ExpectStillServing();
}

TEST_F(DatatypeTest, GrpcRawRoundTrip) {
  for (const auto& c : AllCases()) {
    SCOPED_TRACE(c.datatype);
    inference::ModelInferRequest request;
    request.set_model_name("identity_" + c.suffix);
    auto* input = request.add_inputs();
    input->set_name("INPUT0");
    input->set_datatype(c.datatype);
    input->add_shape(kRows);
    input->add_shape(kCols);
    request.add_raw_input_contents(c.raw);
    grpc::ClientContext ctx;
    inference::ModelInferResponse response;
    grpc::Status s = grpc().ModelInfer(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << Describe(s);
    ASSERT_EQ(response.outputs_size(), 1);
    EXPECT_EQ(response.outputs(0).datatype(), c.datatype);
    ASSERT_EQ(response.outputs(0).shape_size(), 2);
    EXPECT_EQ(response.outputs(0).shape(0), kRows);
    EXPECT_EQ(response.outputs(0).shape(1), kCols);
    ASSERT_EQ(response.raw_output_contents_size(), 1);
    EXPECT_EQ(Hex(response.raw_output_contents(0)), Hex(c.raw));
  }
}

TEST_F(DatatypeTest, GrpcTypedContentsRoundTrip) {
  for (const auto& c : AllCases()) {
    if (c.datatype == "FP16" || c.datatype == "BF16") continue;  // raw only
    SCOPED_TRACE(c.datatype);
    inference::ModelInferRequest request;
    request.set_model_name("identity_" + c.suffix);
    auto* input = request.add_inputs();
    input->set_name("INPUT0");
    input->set_datatype(c.datatype);
    input->add_shape(kRows);
    input->add_shape(kCols);
    auto* contents = input->mutable_contents();
    for (int i = 0; i < kCount; ++i) {
      const auto& d = c.datatype;
      if (d == "BOOL") contents->add_bool_contents(c.raw[i] != 0);
      else if (d == "UINT8") contents->add_uint_contents(FromBytes<uint8_t>(c.raw)[i]);
      else if (d == "UINT16") contents->add_uint_contents(FromBytes<uint16_t>(c.raw)[i]);
      else if (d == "UINT32") contents->add_uint_contents(FromBytes<uint32_t>(c.raw)[i]);
      else if (d == "UINT64") contents->add_uint64_contents(FromBytes<uint64_t>(c.raw)[i]);
      else if (d == "INT8") contents->add_int_contents(FromBytes<int8_t>(c.raw)[i]);
      else if (d == "INT16") contents->add_int_contents(FromBytes<int16_t>(c.raw)[i]);
      else if (d == "INT32") contents->add_int_contents(FromBytes<int32_t>(c.raw)[i]);
      else if (d == "INT64") contents->add_int64_contents(FromBytes<int64_t>(c.raw)[i]);
      else if (d == "FP32") contents->add_fp32_contents(FromBytes<float>(c.raw)[i]);
      else if (d == "FP64") contents->add_fp64_contents(FromBytes<double>(c.raw)[i]);
      else if (d == "BYTES") contents->add_bytes_contents(c.strings[i]);
    }
    grpc::ClientContext ctx;
    inference::ModelInferResponse response;
    grpc::Status s = grpc().ModelInfer(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << Describe(s);
    ASSERT_EQ(response.raw_output_contents_size(), 1);
    EXPECT_EQ(Hex(response.raw_output_contents(0)), Hex(c.raw));
  }
}

}  // namespace
}  // namespace fastpath::integration
