// Every bad-input case of the issue's section 5, over HTTP and gRPC: each gets its
// documented 4xx / gRPC code with a message that names the offending field, and the
// server goes on serving (every test ends with a good request on both protocols).
#include <rapidjson/document.h>

#include "integration_fixture.h"

namespace fastpath::integration {
namespace {

// 1 MiB: small enough that a test can exceed it cheaply.
constexpr size_t kMaxRequestBytes = size_t{1} << 20;

class BadInputTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override {
    return {"simple", "identity_fp32", "identity_bytes"};
  }
  std::vector<std::string> ExtraArgs() override {
    return {"--max-request-bytes", std::to_string(kMaxRequestBytes)};
  }

  // Posts a JSON body to simple's infer and expects `status` with `field` in the error.
  void ExpectHttpError(const std::string& model, const std::string& body, int status,
                       const std::string& field,
                       const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    HttpResponse r = http().Post("/v2/models/" + model + "/infer", body, headers);
    EXPECT_EQ(r.status, status) << r.Describe() << "\nrequest: " << body.substr(0, 300);
    std::string message = ErrorMessage(r.body);
    EXPECT_NE(message, "") << "not a KServe error body: " << r.body;
    EXPECT_NE(message.find(field), std::string::npos)
        << "the error should name '" << field << "': " << message;
    EXPECT_TRUE(r.Header("content-length").has_value());
  }

  void ExpectGrpcError(const inference::ModelInferRequest& request, grpc::StatusCode code,
                       const std::string& field) {
    grpc::ClientContext ctx;
    inference::ModelInferResponse response;
    grpc::Status s = grpc().ModelInfer(&ctx, request, &response);
    EXPECT_EQ(s.error_code(), code) << Describe(s);
    EXPECT_NE(s.error_message().find(field), std::string::npos)
        << "the error should name '" << field << "': " << s.error_message();
  }

  // The binary form of a one-input request to identity_fp32.
  static BinaryBody Fp32Binary(const std::string& shape, size_t declared_size,
                               const std::string& data) {
    std::string json = R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":)" + shape +
                       R"(,"parameters":{"binary_data_size":)" + std::to_string(declared_size) +
                       "}}]}";
    return MakeBinaryBody(json, {data});
  }
};

TEST_F(BadInputTest, BadJson) {
  const std::vector<std::string> bodies = {
      R"({"inputs": [ {"name": "INPUT0",)",  // cut off
      "not json at all",
      R"({"inputs": [] } trailing)",
  };
  for (const auto& body : bodies) {
    HttpResponse r = http().Post("/v2/models/simple/infer", body);
    EXPECT_EQ(r.status, 400) << r.Describe() << "\nrequest: " << body;
    EXPECT_NE(ErrorMessage(r.body), "") << r.body;
  }
  // Well-formed JSON of the wrong shape names the field.
  ExpectHttpError("simple", R"({"inputs": "INPUT0"})", 400, "inputs");
  ExpectHttpError("simple", R"([1, 2, 3])", 400, "");
  ExpectHttpError("simple",
                  R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":"16","data":[1]}]})",
                  400, "shape");
  ExpectStillServing();
}

// JSON is UTF-8: a body with a string that is not is refused where it is. An answer is
// UTF-8 even when it quotes bytes that are not (a model name from the URL), so that a strict
// JSON reader (Python's, tritonclient's) shows the error instead of failing on the body.
TEST_F(BadInputTest, TextThatIsNotUtf8) {
  ExpectHttpError("simple", "{\"id\":\"x\xff\",\"inputs\":[]}", 400,
                  "at offset 8: not valid UTF-8");
  ExpectHttpError("identity_bytes",
                  R"({"inputs":[{"name":"INPUT0","datatype":"BYTES","shape":[1],"data":[")"
                  "\xed\xa0\x80"
                  R"("]}]})",
                  400, "not valid UTF-8");
  for (const std::string path : {"/v2/models/ab%FFcd/ready", "/v2/models/ab%FFcd"}) {
    const HttpResponse r = http().Get(path);
    EXPECT_EQ(r.status, 404) << r.Describe();
    // As a strict reader reads it: UTF-8 checked.
    rapidjson::Document strict;
    strict.Parse<rapidjson::kParseValidateEncodingFlag>(r.body.data(), r.body.size());
    EXPECT_FALSE(strict.HasParseError()) << r.body;
    EXPECT_NE(ErrorMessage(r.body).find("ab\xef\xbf\xbd"
                                        "cd"),
              std::string::npos)
        << r.body;
  }
  // gRPC: protobuf refuses to parse a string field that is not UTF-8.
  inference::ModelInferRequest request = SimpleGrpcRequest(Iota(0, 16), Iota(0, 16));
  request.set_id("x\xff");
  ExpectGrpcError(request, grpc::StatusCode::INVALID_ARGUMENT,
                  "not a valid inference.ModelInferRequest");
  ExpectStillServing();
}

TEST_F(BadInputTest, WrongDatatype) {
  auto a = Iota(0, 16);
  std::string body = SimpleJsonRequest(a, a);
  body.replace(body.find("INT32"), 5, "FP32");  // INPUT0 is INT32 in the model
  ExpectHttpError("simple", body, 400, "INPUT0");
  std::string unknown = SimpleJsonRequest(a, a);
  unknown.replace(unknown.find("INT32"), 5, "INT33");
  ExpectHttpError("simple", unknown, 400, "INPUT0");
  // JSON values that do not fit the declared datatype.
  ExpectHttpError("simple",
                  R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,2],"data":["a","b"]}]})",
                  400, "INPUT0");

  auto request = SimpleGrpcRequest(a, a);
  request.mutable_inputs(0)->set_datatype("FP32");
  ExpectGrpcError(request, grpc::StatusCode::INVALID_ARGUMENT, "INPUT0");
  request.mutable_inputs(0)->set_datatype("INT33");
  ExpectGrpcError(request, grpc::StatusCode::INVALID_ARGUMENT, "INPUT0");
  // Typed contents in the field of another datatype.
  auto typed = SimpleGrpcRequest(a, a);
  typed.clear_raw_input_contents();
  for (int i = 0; i < 16; ++i) {
    typed.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.0f);
    typed.mutable_inputs(1)->mutable_contents()->add_int_contents(1);
  }
  ExpectGrpcError(typed, grpc::StatusCode::INVALID_ARGUMENT, "INPUT0");
  ExpectStillServing();
}

TEST_F(BadInputTest, DataLengthDoesNotMatchShape) {
  auto a = Iota(0, 16);
  std::string body = SimpleJsonRequest(a, a);
  body.replace(body.find("0,1,2,"), 6, "0,2,");  // INPUT0 loses one element
  ExpectHttpError("simple", body, 400, "INPUT0");
  // Too many elements.
  std::string more = SimpleJsonRequest(a, a);
  more.replace(more.find("0,1,2,"), 6, "0,1,1,2,");
  ExpectHttpError("simple", more, 400, "INPUT0");
  // A shape the config does not allow ([1,15] for dims [16]) with matching data.
  auto b = Iota(0, 15);
  std::string mismatch =
      R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,15],"data":[)";
  for (int i = 0; i < 15; ++i) mismatch += (i ? "," : "") + std::to_string(i);
  mismatch += R"(]},{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":[)";
  for (int i = 0; i < 16; ++i) mismatch += (i ? "," : "") + std::to_string(i);
  mismatch += "]}]}";
  ExpectHttpError("simple", mismatch, 400, "INPUT0");

  // Binary: binary_data_size disagrees with the shape.
  BinaryBody short_body = Fp32Binary("[1,4]", 12, std::string(12, '\0'));
  ExpectHttpError("identity_fp32", short_body.body, 400, "INPUT0",
                  {{"Inference-Header-Content-Length", std::to_string(short_body.json_length)}});

  auto request = SimpleGrpcRequest(a, a);
  request.mutable_raw_input_contents(1)->resize(60);
  ExpectGrpcError(request, grpc::StatusCode::INVALID_ARGUMENT, "INPUT1");
  auto typed = SimpleGrpcRequest(a, a);
  typed.clear_raw_input_contents();
  for (int i = 0; i < 16; ++i) typed.mutable_inputs(0)->mutable_contents()->add_int_contents(i);
  for (int i = 0; i < 15; ++i) typed.mutable_inputs(1)->mutable_contents()->add_int_contents(i);
  ExpectGrpcError(typed, grpc::StatusCode::INVALID_ARGUMENT, "INPUT1");
  ExpectStillServing();
}

TEST_F(BadInputTest, NegativeDims) {
  ExpectHttpError("identity_fp32",
                  R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,-2],"data":[1.0,2.0]}]})",
                  400, "INPUT0");
  ExpectHttpError("identity_fp32",
                  R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[-1,-1],"data":[1.0]}]})",
                  400, "INPUT0");
  inference::ModelInferRequest request;
  request.set_model_name("identity_fp32");
  auto* in = request.add_inputs();
  in->set_name("INPUT0");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(-4);
  request.add_raw_input_contents(std::string(16, '\0'));
  ExpectGrpcError(request, grpc::StatusCode::INVALID_ARGUMENT, "INPUT0");
  ExpectStillServing();
}

TEST_F(BadInputTest, HugeDimsAreRefusedWithoutAllocating) {
  const long rss_before = server().RssKiB();
  // 10^12 FP32 elements would be 4 TB. Through identity_fp32 (dims [-1,-1]) only the
  // size limit can refuse it; through simple, the config refuses it too. Either way the
  // request contradicts itself (its body holds 1 element): 400, never 413 or
  // RESOURCE_EXHAUSTED, which invite a retry.
  auto expect_refused = [&](const std::string& model, const std::string& body,
                            const std::vector<std::pair<std::string, std::string>>& headers) {
    HttpResponse r = http().Post("/v2/models/" + model + "/infer", body, headers);
    EXPECT_EQ(r.status, 400) << r.Describe();
    EXPECT_NE(ErrorMessage(r.body).find("INPUT0"), std::string::npos) << r.body;
  };
  expect_refused("identity_fp32",
                 R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,1000000000000],"data":[1.0]}]})",
                 {});
  BinaryBody binary = Fp32Binary("[1,1000000000000]", 4, std::string(4, '\0'));
  expect_refused("identity_fp32", binary.body,
                 {{"Inference-Header-Content-Length", std::to_string(binary.json_length)}});
  // A product that overflows int64.
  expect_refused("identity_fp32",
                 R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[4294967296,4294967296],"data":[1.0]}]})",
                 {});
  expect_refused("simple",
                 R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,1000000000000],"data":[1]},)"
                 R"({"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":[1]}]})",
                 {});

  inference::ModelInferRequest request;
  request.set_model_name("identity_fp32");
  auto* in = request.add_inputs();
  in->set_name("INPUT0");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(1000000000000);
  request.add_raw_input_contents(std::string(4, '\0'));
  {
    grpc::ClientContext ctx;
    inference::ModelInferResponse response;
    grpc::Status s = grpc().ModelInfer(&ctx, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
    EXPECT_NE(s.error_message().find("INPUT0"), std::string::npos) << s.error_message();
  }
  ExpectStillServing();
  // Nothing near the 4 TB (or even 1 GB) was touched.
  const long rss_after = server().RssKiB();
  if (rss_before > 0 && rss_after > 0) {
    EXPECT_LT(rss_after - rss_before, 256 * 1024) << "RSS grew from " << rss_before << " KiB to "
                                                  << rss_after << " KiB";
  }
}

TEST_F(BadInputTest, MissingInputs) {
  auto a = Iota(0, 16);
  std::string body = SimpleJsonRequest(a, a);
  body = body.substr(0, body.find(",{\"name\":\"INPUT1\"")) + "]}";
  ExpectHttpError("simple", body, 400, "INPUT1");
  ExpectHttpError("simple", R"({"id":"x"})", 400, "inputs");
  auto request = SimpleGrpcRequest(a, a);
  request.mutable_inputs()->RemoveLast();
  request.mutable_raw_input_contents()->RemoveLast();
  ExpectGrpcError(request, grpc::StatusCode::INVALID_ARGUMENT, "INPUT1");
  // An input the model does not have.
  std::string extra = SimpleJsonRequest(a, a);
  extra.replace(extra.find("INPUT1"), 6, "INPUT9");
  ExpectHttpError("simple", extra, 400, "INPUT9");
  ExpectStillServing();
}

TEST_F(BadInputTest, UnknownOutputs) {
  auto a = Iota(0, 16);
  std::string body = SimpleJsonRequest(a, a);
  body.pop_back();
  body += R"(,"outputs":[{"name":"OUTPUT0"},{"name":"NO_SUCH_OUTPUT"}]})";
  ExpectHttpError("simple", body, 400, "NO_SUCH_OUTPUT");
  auto request = SimpleGrpcRequest(a, a);
  request.add_outputs()->set_name("NO_SUCH_OUTPUT");
  ExpectGrpcError(request, grpc::StatusCode::INVALID_ARGUMENT, "NO_SUCH_OUTPUT");
  ExpectStillServing();
}

TEST_F(BadInputTest, BinaryHeaderLengthBeyondTheBody) {
  BinaryBody body = Fp32Binary("[1,2]", 8, std::string(8, '\0'));
  ExpectHttpError("identity_fp32", body.body, 400, "Inference-Header-Content-Length",
                  {{"Inference-Header-Content-Length", std::to_string(body.body.size() + 100)}});
  ExpectHttpError("identity_fp32", body.body, 400, "Inference-Header-Content-Length",
                  {{"Inference-Header-Content-Length", "not-a-number"}});
  // binary_data_size larger than the bytes after the JSON.
  BinaryBody beyond = Fp32Binary("[1,2]", 8, std::string(4, '\0'));
  ExpectHttpError("identity_fp32", beyond.body, 400, "INPUT0",
                  {{"Inference-Header-Content-Length", std::to_string(beyond.json_length)}});
  ExpectStillServing();
}

TEST_F(BadInputTest, BodyOverTheLimitIs413) {
  // Only the headers: the server must answer from Content-Length, without the body.
  std::string head = RawRequest("POST", "/v2/models/simple/infer", "", 2 * kMaxRequestBytes);
  HttpResponse r = http().SendRaw(head);
  EXPECT_EQ(r.status, 413) << r.Describe();
  EXPECT_NE(ErrorMessage(r.body), "") << r.body;
  // A body just over the limit, sent whole.
  std::string big(kMaxRequestBytes + 1, ' ');
  HttpResponse whole = http().SendRaw(RawRequest("POST", "/v2/models/simple/infer", big, big.size()));
  EXPECT_TRUE(whole.status == 413 || whole.status == 0) << whole.Describe();

  // gRPC: a message over --max-request-bytes.
  inference::ModelInferRequest request;
  request.set_model_name("identity_fp32");
  auto* in = request.add_inputs();
  in->set_name("INPUT0");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(static_cast<int64_t>(kMaxRequestBytes / 2));
  request.add_raw_input_contents(std::string(2 * kMaxRequestBytes, '\0'));
  grpc::ClientContext ctx;
  inference::ModelInferResponse response;
  grpc::Status s = grpc().ModelInfer(&ctx, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(s);
  ExpectStillServing();
}

// A bound on the request bytes in flight below gRPC's largest message (1 GiB unless
// --max-request-bytes says) lowers that largest message to it: a larger one is refused as too
// large, not told to retry (it never could fit, on an idle server too).
class RequestBytesBoundTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override { return {"identity_fp32"}; }
  std::vector<std::string> ExtraArgs() override {
    return {"--max-request-bytes-in-flight", std::to_string(kBound)};
  }
  static constexpr size_t kBound = size_t{64} << 20;  // HTTP's largest body by default
};

TEST_F(RequestBytesBoundTest, AGrpcMessageOverTheBoundIsTooLargeNotToBeRetried) {
  inference::ModelInferRequest request;
  request.set_model_name("identity_fp32");
  auto* in = request.add_inputs();
  in->set_name("INPUT0");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(static_cast<int64_t>(kBound / 4 + 1024));
  request.add_raw_input_contents(std::string(kBound + 4096, '\0'));
  grpc::ClientContext ctx;
  inference::ModelInferResponse response;
  grpc::Status s = grpc().ModelInfer(&ctx, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(s);
  EXPECT_EQ(s.error_message().find("retry"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find(std::to_string(kBound)), std::string::npos) << s.error_message();
}

TEST_F(BadInputTest, InvalidBytesElements) {
  // A length prefix that runs past the data.
  std::string bad = BytesElements({"abcd"});
  bad[0] = 100;
  std::string json =
      R"({"inputs":[{"name":"INPUT0","datatype":"BYTES","shape":[1,1],"parameters":{"binary_data_size":)" +
      std::to_string(bad.size()) + "}}]}";
  BinaryBody body = MakeBinaryBody(json, {bad});
  ExpectHttpError("identity_bytes", body.body, 400, "INPUT0",
                  {{"Inference-Header-Content-Length", std::to_string(body.json_length)}});
  // Fewer elements than the shape says; a truncated prefix.
  std::string two = BytesElements({"a"}) + std::string("\x01\x00", 2);
  std::string json2 =
      R"({"inputs":[{"name":"INPUT0","datatype":"BYTES","shape":[1,2],"parameters":{"binary_data_size":)" +
      std::to_string(two.size()) + "}}]}";
  BinaryBody body2 = MakeBinaryBody(json2, {two});
  ExpectHttpError("identity_bytes", body2.body, 400, "INPUT0",
                  {{"Inference-Header-Content-Length", std::to_string(body2.json_length)}});
  // JSON BYTES elements must be strings.
  ExpectHttpError("identity_bytes",
                  R"({"inputs":[{"name":"INPUT0","datatype":"BYTES","shape":[1,2],"data":["a",7]}]})",
                  400, "INPUT0");

  inference::ModelInferRequest request;
  request.set_model_name("identity_bytes");
  auto* in = request.add_inputs();
  in->set_name("INPUT0");
  in->set_datatype("BYTES");
  in->add_shape(1);
  in->add_shape(1);
  request.add_raw_input_contents(bad);
  ExpectGrpcError(request, grpc::StatusCode::INVALID_ARGUMENT, "INPUT0");
  ExpectStillServing();
}

TEST_F(BadInputTest, GarbageOnTheSocket) {
  // A request line that is not HTTP: a 400 or a closed connection, never a hang.
  HttpResponse garbage = http().SendRaw("GARBAGE\r\n\r\n");
  EXPECT_TRUE(garbage.status == 400 || garbage.status == 0) << garbage.Describe();
  EXPECT_EQ(garbage.error.find("timed out"), std::string::npos) << garbage.Describe();
  HttpResponse bad_version = http().SendRaw("GET /v2/health/live HTTP/9.9\r\n\r\n");
  EXPECT_NE(bad_version.status, 200) << bad_version.Describe();
  // Deterministic random bytes, starting with a byte no method can start with.
  std::string noise(4096, '\0');
  uint32_t x = 2463534242u;
  for (char& c : noise) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x & 0xff);
  }
  noise[0] = '\x01';
  HttpResponse r = http().SendRaw(noise);
  EXPECT_TRUE(r.status == 400 || r.status == 0) << r.Describe();
  http().SendAndClose(noise);
  // Garbage on the gRPC port (not HTTP/2) must not disturb it either.
  HttpClient grpc_port_client(server().grpc_port());
  grpc_port_client.SendAndClose(noise);
  grpc_port_client.SendRaw("GET / HTTP/1.1\r\n\r\n");
  ExpectStillServing();
}

TEST_F(BadInputTest, ConnectionClosedMidBody) {
  auto a = Iota(0, 16);
  std::string body = SimpleJsonRequest(a, a);
  std::string request = RawRequest("POST", "/v2/models/simple/infer", body, body.size());
  for (int i = 0; i < 5; ++i) {
    http().SendAndClose(request.substr(0, request.size() - body.size() / 2));
    http().SendAndClose(request.substr(0, request.size() / 3));  // mid-headers too
  }
  // A binary request cut inside its tensor bytes.
  BinaryBody binary = Fp32Binary("[1,1024]", 4096, std::string(4096, '\x3f'));
  std::string bin_request = RawRequest(
      "POST", "/v2/models/identity_fp32/infer", binary.body, binary.body.size(),
      {{"Inference-Header-Content-Length", std::to_string(binary.json_length)}});
  http().SendAndClose(bin_request.substr(0, bin_request.size() - 1000));
  ExpectStillServing();
}

}  // namespace
}  // namespace fastpath::integration
