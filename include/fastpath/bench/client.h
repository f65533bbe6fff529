// The load generator's view of what it measures: a Target (a server over HTTP or gRPC,
// or ONNX Runtime in-process) that can describe the model, report its statistics, and
// open sessions. A session is one connection (one ORT session in-process) used by one
// worker thread at a time; it sends one of the prepared requests and waits for the whole
// answer. Requests are built once, before any timing, from a seed.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fastpath/backend/backend.h"
#include "fastpath/bench/report.h"
#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"

namespace fastpath::bench {

enum class Transport { kHttp, kGrpc };
enum class Encoding { kJson, kBinary };
StatusOr<Transport> ParseTransport(std::string_view text);
StatusOr<Encoding> ParseEncoding(std::string_view text);
const char* TransportName(Transport transport);
const char* EncodingName(Encoding encoding);

// A model's signature as the KServe metadata endpoint shows it (-1: dynamic dim).
struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;
  std::vector<backend::TensorSpec> inputs;
  std::vector<backend::TensorSpec> outputs;
  // From the model's config, where the server gives it: 0 means the model does not batch
  // (a leading -1 in its shapes is then a dim of its own, not the batch). Unknown: unset.
  std::optional<int64_t> max_batch_size;
};

// What one request came back as: ok, or an error kind ("http_503", "grpc_UNAVAILABLE",
// "connect", "io", "bad_response") with a message.
struct InferOutcome {
  bool ok = true;
  std::string kind;
  std::string message;
  // In-process with one ORT thread: the calling thread's CPU time over the last `cpu_runs`
  // runs (excludes time descheduled); 0 when not measured on this call. Read every few runs
  // only, so that the clock reads stay out of the per-run latency.
  int64_t cpu_ns = 0;
  uint64_t cpu_runs = 0;
};

class InferSession {
 public:
  virtual ~InferSession() = default;
  // Sends prepared request `index` (modulo the number prepared) and waits for it.
  virtual InferOutcome Infer(size_t index) = 0;
};

// `concurrency` requests kept in flight from one thread, until stopped: each answer is
// reported and replaced at once by the next prepared request, as perf_analyzer's async mode
// does. gRPC drives its calls from one completion queue, HTTP its connections from one
// io_context: a thread per request blocked on its answer cost the gRPC client 3-4 times the
// HTTP client's CPU per request (docs/benchmarks.md sections 17 and 18), CPU a shared machine
// takes from the server it measures.
class ClosedLoop {
 public:
  virtual ~ClosedLoop() = default;
  using OnAnswer = std::function<void(const InferOutcome& outcome, int64_t latency_ns)>;
  // Returns once `stop` is set and every request in flight has come back. When none comes
  // back for a while (the patience: a second, or twice the slowest answer of the run,
  // whichever is longer, at most a minute), what is still in flight is cancelled. Each one
  // that was already outstanding for longer than the patience when `stop` was set is
  // reported as an error of kind kUnanswered: a server that stopped answering must not
  // leave a point that reads as quiet. Younger ones are not: a batcher may hold them for
  // company that the stopped run no longer sends.
  virtual void Run(const std::atomic<bool>& stop, const OnAnswer& on_answer) = 0;
};

// The error kind of a request still unanswered when a closed loop gave up on it.
inline constexpr char kUnanswered[] = "unanswered";

class Target {
 public:
  virtual ~Target() = default;
  virtual StatusOr<ModelMetadata> Metadata() = 0;
  // nullopt when the target has no statistics (a peer server, in-process).
  virtual StatusOr<std::optional<ModelStatsSnapshot>> Stats() = 0;
  // Encodes every request of the set once. Must be called before NewSession.
  virtual Status Prepare(const std::vector<std::vector<Tensor>>& requests) = 0;
  virtual StatusOr<std::unique_ptr<InferSession>> NewSession() = 0;
  // A closed loop of `concurrency` requests from one thread, or null where the target keeps
  // a thread per session (the default). Needs Prepare, as NewSession does.
  virtual StatusOr<std::unique_ptr<ClosedLoop>> NewClosedLoop(int64_t /*concurrency*/) {
    return std::unique_ptr<ClosedLoop>();
  }
  // "http://127.0.0.1:8000" and the like, for reports.
  virtual std::string Describe() const = 0;
};

struct ServerAddress {
  std::string host = "localhost";
  int port = 0;
};
// "host:port", "http://host:port" or "grpc://host:port" (the scheme is dropped), "[::1]:8000".
// Another scheme (https://), or a path after the port, is InvalidArgument saying so.
StatusOr<ServerAddress> ParseAddress(std::string_view url, int default_port);

StatusOr<std::unique_ptr<Target>> MakeHttpTarget(const ServerAddress& address, Encoding encoding,
                                                 const std::string& model, const std::string& version);
StatusOr<std::unique_ptr<Target>> MakeGrpcTarget(const ServerAddress& address, const std::string& model,
                                                 const std::string& version);

// ONNX Runtime directly: every session is a new ORT session of `model_file` with
// `options` (the config's instance options). Metadata comes from the model file.
StatusOr<std::unique_ptr<Target>> MakeInProcessTarget(std::shared_ptr<backend::Backend> backend,
                                                      const std::filesystem::path& model_file,
                                                      const backend::InstanceOptions& options);

// --shape name:d1,d2,...  Parses one override into (name, dims).
StatusOr<std::pair<std::string, std::vector<int64_t>>> ParseShapeOverride(std::string_view text);

// The inputs of request number `request_index`: each input's shape from the metadata, a
// leading -1 replaced by `batch_size`, other -1 dims from `shapes` (which may give the full
// shape or the shape without the batch dim); the data deterministic from
// (seed, request_index, input position). FP32/FP64 uniform in [-1, 1), integers in
// [0, 100), BOOL alternating, FP16/BF16 1.0, BYTES short strings. An input left with a
// dynamic dim is an InvalidArgument naming it and the --shape flag.
StatusOr<std::vector<Tensor>> MakeInputs(const ModelMetadata& metadata,
                                         const std::map<std::string, std::vector<int64_t>>& shapes,
                                         int64_t batch_size, uint64_t seed, uint64_t request_index);

}  // namespace fastpath::bench
