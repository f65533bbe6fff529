// The shared fixture of the integration tests: a temporary copy of the tiny test
// repository, the real `fastpath` binary serving it on loopback port 0, an HTTP client
// and a gRPC stub. TearDown stops the server with SIGTERM and requires exit status 0,
// so every test also checks that the server shut down cleanly after what it did.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fakes/temp_repository.h"
#include "grpc_service.grpc.pb.h"
#include "http_client.h"
#include "server_process.h"

namespace fastpath::integration {

// ---- Files ----

// Copies <FASTPATH_TEST_REPOSITORY_DIR>/<model> (config and versions) into `repo`.
void CopyTestModel(const std::filesystem::path& repo, const std::string& model);
// Every model of the tiny test repository (identity_<dtype>, simple, simple_fp32).
std::vector<std::string> AllTestModels();
// Adds the deliberately corrupt ONNX file as model "corrupt" with a complete config.
void AddCorruptModel(testing::TempRepository& repo);

// ---- JSON ----

rapidjson::Document ParseJson(const std::string& text);
std::string ToJson(const rapidjson::Value& value);
// An unsigned value the server may render as a number or (proto3 JSON for 64-bit
// fields) as a decimal string.
std::optional<uint64_t> JsonUint(const rapidjson::Value& value);
// The "error" member of a KServe error body, or "" when the body is not one.
std::string ErrorMessage(const std::string& body);

// ---- Requests for the `simple` model (INT32 [-1,16] x2 -> sum, difference) ----

std::vector<int32_t> Iota(int32_t start, size_t n);
std::string SimpleJsonRequest(const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                              const std::string& id = "");
// Asserts a JSON response of `simple` holds a+b and a-b.
void ExpectSimpleJsonResponse(const std::string& body, const std::vector<int32_t>& a,
                              const std::vector<int32_t>& b);

// ---- Binary tensor extension ----

struct BinaryBody {
  std::string body;
  size_t json_length = 0;
};
BinaryBody MakeBinaryBody(const std::string& json, const std::vector<std::string>& blobs);
// Splits a binary response into its JSON and, per output with binary_data_size, the
// bytes (in output order); empty for JSON outputs. Fails the test on a malformed body.
struct DecodedBinaryResponse {
  rapidjson::Document json;
  std::vector<std::string> blobs;  // one per output, in output order
};
DecodedBinaryResponse DecodeBinaryResponse(const HttpResponse& response);

template <typename T>
std::string AsBytes(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}
template <typename T>
std::vector<T> FromBytes(const std::string& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}
// BYTES elements in the wire layout: u32 little-endian length, then the bytes.
std::string BytesElements(const std::vector<std::string>& elements);

// ---- gRPC ----

std::unique_ptr<inference::GRPCInferenceService::Stub> MakeStub(const std::string& target);
inference::ModelInferRequest SimpleGrpcRequest(const std::vector<int32_t>& a,
                                               const std::vector<int32_t>& b,
                                               const std::string& id = "");
void ExpectSimpleGrpcResponse(const inference::ModelInferResponse& response,
                              const std::vector<int32_t>& a, const std::vector<int32_t>& b);
// "code 3 (INVALID_ARGUMENT): message"
std::string Describe(const grpc::Status& status);

// ---- Load ----

// Clients (8 by default) sending `simple` requests over HTTP without pause until stopped;
// counts what succeeded and what failed. The second constructor sends `body` to `path`
// (another model's infer endpoint) from every client.
class SimpleLoad {
 public:
  explicit SimpleLoad(int port, int clients = 8);
  SimpleLoad(int port, int clients, const std::string& path, const std::string& body);
  ~SimpleLoad() { Stop(); }
  SimpleLoad(const SimpleLoad&) = delete;
  SimpleLoad& operator=(const SimpleLoad&) = delete;
  void Stop();
  // Waits until `n` more requests have succeeded; fails the test after 60 s.
  void WaitSucceeded(int64_t n);
  int64_t ok() const { return ok_.load(); }
  int64_t failed();
  std::string first_failure();

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> ok_{0};
  std::mutex mu_;
  int64_t failed_ = 0;  // guarded
  std::string first_failure_;  // guarded
  std::vector<std::thread> threads_;
  void Client(int port, const std::string& path, const std::string& body);
};

// ---- The fixture ----

class ServerTest : public ::testing::Test {
 protected:
  // Hooks for derived fixtures; the defaults serve every tiny test model in
  // --model-control-mode none with strict readiness.
  virtual std::vector<std::string> Models() { return AllTestModels(); }
  virtual void PrepareRepository(testing::TempRepository& repo) {}
  virtual std::vector<std::string> ExtraArgs() { return {}; }
  // "NAME=VALUE" entries added to the server's environment (ServeOptions::environment).
  virtual std::vector<std::string> Environment() { return {}; }
  virtual bool WaitReady() { return true; }
  virtual std::vector<std::string> CommandPrefix() { return {}; }  // ServeOptions::command_prefix

  void SetUp() override;
  void TearDown() override;

  HttpClient& http() { return *http_; }
  inference::GRPCInferenceService::Stub& grpc() { return *stub_; }
  ServerProcess& server() { return *server_; }
  testing::TempRepository& repo() { return *repo_; }

  // Asserts that the server still answers a good inference over HTTP and gRPC: used
  // after every bad request.
  void ExpectStillServing();

  std::unique_ptr<testing::TempRepository> repo_;
  std::unique_ptr<testing::TempRepository> work_;  // port file and server log
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<HttpClient> http_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  bool stopped_ = false;  // a test that stopped the server itself
};

}  // namespace fastpath::integration
