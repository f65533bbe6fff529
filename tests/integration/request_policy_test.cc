// One request policy (protocol/request_policy.h), two protocols: every case of the table
// goes through HTTP and through gRPC against the same server, and both must come out
// alike: the same status class and, for a refusal, the same message.
#include <grpcpp/grpcpp.h>

#include <map>
#include <variant>

#include "fastpath/common/status.h"
#include "integration_fixture.h"

namespace fastpath::integration {
namespace {

using Value = std::variant<bool, int64_t, std::string>;
using Params = std::map<std::string, Value>;

struct PolicyCase {
  std::string name;
  Params request;  // request-level parameters
  Params input0;   // INPUT0's parameters
  Params output0;  // OUTPUT0's parameters (OUTPUT0 is requested when this is non-empty)
  bool input0_has_data = true;
  StatusCode code = StatusCode::kOk;
  std::string message;  // the whole message of a refusal
};

std::vector<PolicyCase> Cases() {
  return {
      {"unknown request parameter",
       {{"my_tag", std::string("x")}},
       {},
       {},
       true,
       StatusCode::kOk,
       ""},
      {"unknown input parameter", {}, {{"colour", true}}, {}, true, StatusCode::kOk, ""},
      {"unknown output parameter", {}, {}, {{"colour", int64_t{3}}}, true, StatusCode::kOk, ""},
      {"priority and timeout",
       {{"priority", int64_t{0}}, {"timeout", int64_t{100000}}},
       {},
       {},
       true,
       StatusCode::kOk,
       ""},
      {"binary_data on an output", {}, {}, {{"binary_data", false}}, true, StatusCode::kOk, ""},
      {"negative priority",
       {{"priority", int64_t{-1}}},
       {},
       {},
       true,
       StatusCode::kInvalidArgument,
       "request parameter 'priority' must be a non-negative integer"},
      {"timeout as a string",
       {{"timeout", std::string("soon")}},
       {},
       {},
       true,
       StatusCode::kInvalidArgument,
       "request parameter 'timeout' must be a non-negative integer"},
      {"sequence batching",
       {{"sequence_id", int64_t{7}}},
       {},
       {},
       true,
       StatusCode::kUnimplemented,
       "request parameter 'sequence_id' asks for sequence batching, which fastpath does not "
       "support"},
      {"sequence_start",
       {{"sequence_start", true}},
       {},
       {},
       true,
       StatusCode::kUnimplemented,
       "request parameter 'sequence_start' asks for sequence batching, which fastpath does not "
       "support"},
      // Triton's spelling of "not in a sequence": a plain request.
      {"not in a sequence",
       {{"sequence_id", int64_t{0}}, {"sequence_start", false}, {"sequence_end", false}},
       {},
       {},
       true,
       StatusCode::kOk,
       ""},
      {"no sequence id", {{"sequence_id", std::string("")}}, {}, {}, true, StatusCode::kOk, ""},
      {"sequence_end as a number",
       {{"sequence_end", int64_t{1}}},
       {},
       {},
       true,
       StatusCode::kInvalidArgument,
       "request parameter 'sequence_end' must be a boolean"},
      {"classification",
       {},
       {},
       {{"classification", int64_t{2}}},
       true,
       StatusCode::kUnimplemented,
       "output 'OUTPUT0': the classification extension is not supported; request the raw output "
       "and take its top k"},
      {"shared-memory output",
       {},
       {},
       {{"shared_memory_region", std::string("out")}},
       true,
       StatusCode::kUnimplemented,
       "output 'OUTPUT0': shared memory ('shared_memory_region') is not supported; send the "
       "tensor in the request"},
      {"shared-memory input",
       {},
       {{"shared_memory_region", std::string("in")}, {"shared_memory_byte_size", int64_t{64}}},
       {},
       /*input0_has_data=*/false,
       StatusCode::kUnimplemented,
       "input 'INPUT0': shared memory ('shared_memory_region') is not supported; send the tensor "
       "in the request"},
  };
}

std::string JsonValue(const Value& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const int64_t* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  return "\"" + std::get<std::string>(v) + "\"";
}

std::string JsonParams(const Params& params) {
  std::string out = "{";
  for (const auto& [key, value] : params) {
    out += (out.size() > 1 ? "," : "") + ("\"" + key + "\":") + JsonValue(value);
  }
  return out + "}";
}

template <typename Map>
void ProtoParams(const Params& params, Map* out) {
  for (const auto& [key, value] : params) {
    auto& p = (*out)[key];
    if (const bool* b = std::get_if<bool>(&value)) {
      p.set_bool_param(*b);
    } else if (const int64_t* i = std::get_if<int64_t>(&value)) {
      p.set_int64_param(*i);
    } else {
      p.set_string_param(std::get<std::string>(value));
    }
  }
}

const std::vector<int32_t> kA = Iota(0, 16);
const std::vector<int32_t> kB = Iota(100, 16);

std::string HttpBody(const PolicyCase& c) {
  std::string body = "{\"inputs\":[";
  body += R"({"name":"INPUT0","datatype":"INT32","shape":[1,16])";
  if (!c.input0.empty()) body += ",\"parameters\":" + JsonParams(c.input0);
  if (c.input0_has_data) {
    body += ",\"data\":[";
    for (size_t i = 0; i < kA.size(); ++i) body += (i ? "," : "") + std::to_string(kA[i]);
    body += "]";
  }
  body += R"(},{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":[)";
  for (size_t i = 0; i < kB.size(); ++i) body += (i ? "," : "") + std::to_string(kB[i]);
  body += "]}]";
  if (!c.output0.empty()) {
    body += R"(,"outputs":[{"name":"OUTPUT0","parameters":)" + JsonParams(c.output0) + "}]";
  }
  if (!c.request.empty()) body += ",\"parameters\":" + JsonParams(c.request);
  return body + "}";
}

inference::ModelInferRequest GrpcRequest(const PolicyCase& c) {
  inference::ModelInferRequest request;
  request.set_model_name("simple");
  ProtoParams(c.request, request.mutable_parameters());
  for (const char* name : {"INPUT0", "INPUT1"}) {
    auto* input = request.add_inputs();
    input->set_name(name);
    input->set_datatype("INT32");
    input->add_shape(1);
    input->add_shape(16);
  }
  ProtoParams(c.input0, request.mutable_inputs(0)->mutable_parameters());
  if (c.input0_has_data) request.add_raw_input_contents(AsBytes(kA));
  request.add_raw_input_contents(AsBytes(kB));
  if (!c.output0.empty()) {
    auto* output = request.add_outputs();
    output->set_name("OUTPUT0");
    ProtoParams(c.output0, output->mutable_parameters());
  }
  return request;
}

StatusCode FromGrpc(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return StatusCode::kOk;
    case grpc::StatusCode::INVALID_ARGUMENT:
      return StatusCode::kInvalidArgument;
    case grpc::StatusCode::UNIMPLEMENTED:
      return StatusCode::kUnimplemented;
    case grpc::StatusCode::FAILED_PRECONDITION:
      return StatusCode::kFailedPrecondition;
    default:
      return StatusCode::kInternal;
  }
}

class RequestPolicyTest : public ServerTest {
 protected:
  std::vector<std::string> Models() override { return {"simple"}; }
};

TEST_F(RequestPolicyTest, HttpAndGrpcDecideEveryCaseAlike) {
  for (const PolicyCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    HttpResponse http_answer = http().Post("/v2/models/simple/infer", HttpBody(c));
    EXPECT_EQ(http_answer.status, HttpStatusFor(c.code)) << http_answer.Describe();
    EXPECT_EQ(ErrorMessage(http_answer.body), c.message);

    grpc::ClientContext context;
    inference::ModelInferResponse response;
    const grpc::Status status = grpc().ModelInfer(&context, GrpcRequest(c), &response);
    EXPECT_EQ(FromGrpc(status.error_code()), c.code) << Describe(status);
    EXPECT_EQ(status.error_message(), c.message);
    if (c.code == StatusCode::kOk) {
      EXPECT_EQ(response.outputs_size(), c.output0.empty() ? 2 : 1);
    }
  }
  ExpectStillServing();
}

// Model control: the same refusals on both protocols, decided before the control mode
// (this server's is none) is even looked at; a well-formed load then meets that.
TEST_F(RequestPolicyTest, LoadAndUnloadParametersAlike) {
  struct ControlCase {
    bool load;
    std::string key;
    Value value;
    StatusCode code;
    std::string message;
  };
  const std::vector<ControlCase> cases = {
      {true, "config", int64_t{1}, StatusCode::kInvalidArgument,
       "load parameter 'config' must be a string"},
      {true, "file:1/model.onnx", std::string("eA=="), StatusCode::kInvalidArgument,
       "load parameter 'file:1/model.onnx' needs the 'config' parameter too: the files replace "
       "the model's folder, config.pbtxt included"},
      {true, "file:1/../../x", std::string("eA=="), StatusCode::kInvalidArgument,
       "load parameter 'file:1/../../x': '..' is not a folder or file name: the path must stay "
       "within the model's folder, with no empty, '.' or '..' part"},
      {true, "colour", true, StatusCode::kInvalidArgument,
       "unknown load parameter 'colour'; a model load takes 'config' and 'file:<path>'"},
      {true, "file:/etc/passwd", std::string("eA=="), StatusCode::kInvalidArgument,
       "load parameter 'file:/etc/passwd': the path must be relative to the model's folder"},
      // Well-formed: refused by this server's control mode, alike.
      {true, "config", std::string("{}"), StatusCode::kFailedPrecondition,
       "explicit model load/unload is not allowed: the server runs with --model-control-mode "
       "none, where what was loaded at start stays loaded; start it with --model-control-mode "
       "explicit"},
      {false, "colour", true, StatusCode::kInvalidArgument,
       "unknown unload parameter 'colour'; fastpath's model unload takes only "
       "'unload_dependents'"},
      {false, "unload_dependents", int64_t{1}, StatusCode::kInvalidArgument,
       "unload parameter 'unload_dependents' must be true or false"},
  };
  for (const ControlCase& c : cases) {
    SCOPED_TRACE((c.load ? "load " : "unload ") + c.key);
    const std::string path =
        std::string("/v2/repository/models/simple/") + (c.load ? "load" : "unload");
    HttpResponse http_answer =
        http().Post(path, "{\"parameters\":" + JsonParams({{c.key, c.value}}) + "}");
    EXPECT_EQ(http_answer.status, HttpStatusFor(c.code)) << http_answer.Describe();
    EXPECT_EQ(ErrorMessage(http_answer.body), c.message);

    grpc::ClientContext context;
    grpc::Status status;
    if (c.load) {
      inference::RepositoryModelLoadRequest request;
      request.set_model_name("simple");
      ProtoParams({{c.key, c.value}}, request.mutable_parameters());
      inference::RepositoryModelLoadResponse response;
      status = grpc().RepositoryModelLoad(&context, request, &response);
    } else {
      inference::RepositoryModelUnloadRequest request;
      request.set_model_name("simple");
      ProtoParams({{c.key, c.value}}, request.mutable_parameters());
      inference::RepositoryModelUnloadResponse response;
      status = grpc().RepositoryModelUnload(&context, request, &response);
    }
    EXPECT_EQ(FromGrpc(status.error_code()), c.code) << Describe(status);
    EXPECT_EQ(status.error_message(), c.message);
  }
  ExpectStillServing();
}

}  // namespace
}  // namespace fastpath::integration
