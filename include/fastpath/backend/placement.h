// Where a model instance's nodes run, and the policy that refuses a GPU instance whose
// work landed on the CPU. The audit is plain data that any backend can fill (the ORT
// backend reads it from the session after partitioning); the policy and the one-line
// summary are pure functions, so they are tested on synthetic audits.
//
// Why an audit and not `session.disable_cpu_ep_fallback`: ORT deliberately keeps small
// shape computations (Shape, Gather on shapes, Unsqueeze, ...) on the CPU even when a GPU
// provider could take them, so forbidding the CPU provider outright rejects valid models.
// What must never happen is the FLOPs landing on the CPU, or nothing landing on the GPU
// at all (the silent fallback), and that is what the policy checks.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fastpath/common/status.h"

namespace fastpath::backend {

struct InstanceOptions;

// ORT's names for the providers, as the audit reports them.
inline constexpr std::string_view kCpuProviderName = "CPUExecutionProvider";
inline constexpr std::string_view kCudaProviderName = "CUDAExecutionProvider";
inline constexpr std::string_view kTensorRtProviderName = "TensorrtExecutionProvider";

// The parameter (config.pbtxt `parameters`) that lists op types a GPU model may run on
// the CPU, comma separated: parameters { key: "fastpath.allow_cpu_ops"
// value { string_value: "NonMaxSuppression,TopK" } }.
inline constexpr std::string_view kAllowCpuOpsParameter = "fastpath.allow_cpu_ops";

// True for op types that carry a model's FLOPs: matrix products, convolutions,
// attention, recurrent cells, einsum, and their fused/quantized forms. Everything else
// (shape arithmetic, element-wise ops, reductions, data movement) is not.
bool IsComputeOp(std::string_view op_type);

struct PlacedNode {
  std::string name;
  std::string op_type;
};

// The nodes one provider received.
struct ProviderPlacement {
  std::string provider;  // ORT's name, e.g. "CUDAExecutionProvider"
  int nodes = 0;
  int compute_nodes = 0;
  std::map<std::string, int> op_types;  // op type -> node count
  std::vector<PlacedNode> compute;      // the compute-bearing nodes, in graph order
};

struct PlacementAudit {
  // Providers in the instance's configured order, then any others (ORT's implicit CPU
  // provider) in the order they first appear.
  std::vector<ProviderPlacement> providers;
  int total_nodes = 0;
  // The allowance in effect (fastpath.allow_cpu_ops), shown with the audit.
  std::vector<std::string> allowed_cpu_ops;
  // Non-empty when the policy would refuse this placement but the instance was allowed
  // to serve anyway (InstanceOptions::allow_cpu_fallback_for_gpu, the dev profile): the
  // refusal it would have been. Everything that shows the audit labels it DEGRADED.
  std::string degraded_reason;

  const ProviderPlacement* Find(std::string_view provider) const;
  int NodesOn(std::string_view provider) const;
};

// Counts one node into `audit` (creating the provider's entry on first use).
void AddPlacedNode(PlacementAudit* audit, std::string_view provider, std::string_view op_type,
                   std::string_view node_name);

// The policy for one instance. OK for an instance whose providers are CPU only. For a
// GPU instance, FailedPrecondition when
//   - no node at all was placed on a GPU provider (the silent CPU fallback), or
//   - a compute-bearing node was placed on the CPU and its op type is not in
//     options.allowed_cpu_ops.
// The message names the providers, the offending op types and nodes, and the remedy.
// It does not look at allow_cpu_fallback_for_gpu: the caller decides what a refusal means.
Status CheckPlacement(const PlacementAudit& audit, const InstanceOptions& options);

// "CUDAExecutionProvider 120 nodes (53 compute), CPUExecutionProvider 4 nodes (0 compute:
// Shape, Gather)": per provider, nodes and compute-bearing nodes; for the CPU provider of
// a mixed placement, the op types it runs (with a count when more than one).
std::string PlacementSummary(const PlacementAudit& audit);

// Parses the allowance: comma-separated op types, blanks trimmed. An empty entry or a
// name that is not an ONNX identifier is InvalidArgument naming it.
StatusOr<std::vector<std::string>> ParseAllowedCpuOps(std::string_view text);

}  // namespace fastpath::backend
