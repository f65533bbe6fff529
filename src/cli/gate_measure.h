// `fastpath gate`'s measurement (issue 12 §3): the servers it compares, the requests it
// sends them, the timed rounds in alternation, the comparison of their outputs and capability
// snapshots, and the record file of a baseline. The judgement over what is measured here is
// admission::JudgeGate (fastpath/admission/rollout_gate.h), the same as the server's.
//
// A server is reached through the bench clients: the timed requests go through a
// bench::Target's session (HTTP with the binary tensor extension, or gRPC), the model's config
// and the admission report through bench's one-shot GET (bench::GetOnce). The bench sessions
// discard what the server answers (they measure), so each request's outputs are fetched once
// more, untimed, with one HTTP POST of the same inputs (bench::InferOnce).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fastpath/admission/self_test.h"
#include "fastpath/admission/snapshot_diff.h"
#include "fastpath/bench/client.h"
#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"
#include "model_config.pb.h"

namespace fastpath::cli::gate {

// The servers' canaries' seed (admission::kCanarySeed): the gate sends the request a canary
// of the same model sends.
using admission::kCanarySeed;

// Timed connections per server, one per round in turn. A server spreads its connections
// over its event loops (fastpath: --http-threads, 2 by default) and a loop that shares a
// core with the model's threads answers slower: on a two-core machine one connection to
// each of two identical servers measured one 15% slower than the other, depending only on
// how many connections each had been opened before. Four connections in turn spread the
// rounds over 1, 2 or 4 loops alike on both sides.
inline constexpr int kConnections = 4;

// One request of the comparison: batch 1, or the model's largest batch.
struct GateRequest {
  uint64_t rows = 1;
  std::vector<Tensor> inputs;
  // FNV-1a of every input's name, datatype, shape and bytes: a recorded baseline is compared
  // only with the same request.
  std::string inputs_checksum;
};

// admission::MakeSeededRequest at batch 1 and, when `batch_rows` > 1, at `batch_rows` (the
// config's first model_warmup's inputs and shapes, else random_data at the config's dims).
// A model whose inputs need a file (model_warmup input_data_file) or have a dynamic dim with
// no model_warmup is an error saying so.
StatusOr<std::vector<GateRequest>> MakeGateRequests(const inference::ModelConfig& config,
                                                    uint64_t batch_rows);

// What one side measured for one request.
struct RequestMeasurement {
  uint64_t rows = 1;
  std::string inputs_checksum;
  std::vector<double> ms;       // one round trip per round, in milliseconds
  std::vector<Tensor> outputs;  // what the request answered (untimed)
};

// What one side measured: per request, in the order of MakeGateRequests.
struct SideMeasurement {
  std::string source;  // "http://host:port", or the record file
  std::vector<RequestMeasurement> requests;
  std::string snapshot_json;  // the server's capability snapshot; empty when it shows none
};

struct ServerSpec {
  std::string role;  // "baseline" or "candidate": every message names it
  bench::ServerAddress http;
  bench::Transport transport = bench::Transport::kHttp;
  bench::ServerAddress grpc;  // the timed requests' server with kGrpc
  std::string model;
};

// A server of the comparison.
class GateServer {
 public:
  // Connects and asks the server for the model: Unavailable when the server cannot be
  // reached, NotFound when it does not know the model.
  static StatusOr<std::unique_ptr<GateServer>> Connect(const ServerSpec& spec);

  // GET /v2/models/M/config, read back into the protobuf (fields it does not know ignored).
  StatusOr<inference::ModelConfig> Config();
  // The "capability_snapshot" of GET /v2/health/admission as JSON text; empty when the server
  // answers no such endpoint or no snapshot (another KServe v2 server, a snapshot not taken).
  std::string CapabilitySnapshot();
  // Encodes the requests for the timed sessions, fetches each one's outputs and runs
  // `warmup_runs` untimed round trips of each (at least one per connection: connecting, the
  // model's first runs).
  Status Prepare(const std::vector<GateRequest>& requests, int warmup_runs,
                 SideMeasurement* measurement);
  // One round trip of prepared request `index` on the connection of `round`, in milliseconds.
  StatusOr<double> Time(size_t index, uint32_t round);

  const std::string& describe() const { return describe_; }
  const ServerSpec& spec() const { return spec_; }

 private:
  explicit GateServer(ServerSpec spec) : spec_(std::move(spec)) {}

  ServerSpec spec_;
  std::string describe_;  // "http://host:port"
  std::unique_ptr<bench::Target> target_;
  std::vector<std::unique_ptr<bench::InferSession>> sessions_;  // kConnections
  std::vector<std::string> output_names_;
};

// The rounds, one request at a time: round i sends each request to the baseline then the
// candidate when i is even, the other way round when it is odd (A B, B A, A B, ...), so that
// what changes during the comparison (clocks, heat, other load) falls on both alike. With no
// baseline (a recorded one), the candidate's rounds alone.
Status MeasureRounds(GateServer* baseline, GateServer& candidate, uint32_t rounds,
                     SideMeasurement* baseline_measurement, SideMeasurement* candidate_measurement);

// The largest relative difference of the candidate's outputs from the baseline's, over both
// requests: per element |candidate - baseline| / max(1, |baseline|) (relative above 1,
// absolute below, as the canaries compare), as doubles; BYTES byte for byte (any difference
// is infinite). An output missing, or of another shape or datatype, is infinite too. `detail`
// says where the largest one is.
struct OutputComparison {
  double difference = 0;
  std::string detail;
};
OutputComparison CompareOutputs(const SideMeasurement& baseline, const SideMeasurement& candidate);

// The two servers' capability snapshots compared as `doctor --diff` does, without the
// instantaneous readings (clocks, clock event reasons, volatile ECC counts), which differ
// from one second to the next.
struct SnapshotComparison {
  bool compared = false;
  std::string note;  // why not compared
  std::vector<admission::SnapshotChange> changes;
  // Those of `changes` that make the timings unlike: another GPU, driver, CUDA version, MIG
  // partition, power limit or CPU allowance. Their paths.
  std::vector<std::string> hardware;
};
SnapshotComparison CompareSnapshots(const std::string& baseline_json,
                                    const std::string& candidate_json);

// ---- the record file (`--record FILE`, `--baseline FILE`) ----

struct GateRecord {
  std::string model;
  std::string protocol;  // "http" or "grpc"
  uint64_t seed = kCanarySeed;
  std::string recorded_at;  // UTC, ISO 8601
  SideMeasurement side;     // side.source: the server measured
};

// {"fastpath_gate_record": 1, "model", "server", "protocol", "seed", "recorded_at",
//  "requests": [{"rows", "inputs_checksum", "samples_ms": [...], "outputs": [{"name",
//  "datatype", "shape", "checksum", "data_base64"}]}], "capability_snapshot": {...} | null}
std::string RecordToJson(const GateRecord& record);
// InvalidArgument naming `path` and what is wrong.
StatusOr<GateRecord> RecordFromJson(const std::string& text, const std::string& path);

// FNV-1a 64 of `bytes`, as 16 hex digits.
std::string Checksum(const std::string& bytes);

}  // namespace fastpath::cli::gate
