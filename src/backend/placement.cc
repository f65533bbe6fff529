#include "fastpath/backend/placement.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <iterator>
#include <utility>

#include "fastpath/backend/backend.h"

namespace fastpath::backend {
namespace {

// Sorted, for binary search. ONNX standard ops plus the com.microsoft contrib ops (and
// ORT's fusions) that carry the same work; the domain is not part of the key because no
// standard op shares a name with a contrib op of a different nature.
constexpr auto kComputeOps = std::to_array<std::string_view>({
    "Attention",
    "BeamSearch",
    "Conv",
    "ConvInteger",
    "ConvTranspose",
    "ConvTransposeWithDynamicPads",
    "DecoderAttention",
    "DecoderMaskedMultiHeadAttention",
    "DecoderMaskedSelfAttention",
    "DeformConv",
    "DynamicQuantizeMatMul",
    "Einsum",
    "FusedConv",
    "FusedGemm",
    "FusedMatMul",
    "FusedMatMulActivation",
    "GRU",
    "Gemm",
    "GemmFastGelu",
    "GemmFloat8",
    "GreedySearch",
    "GroupQueryAttention",
    "LSTM",
    "LongformerAttention",
    "MatMul",
    "MatMulBnb4",
    "MatMulFpQ4",
    "MatMulInteger",
    "MatMulIntegerToFloat",
    "MatMulNBits",
    "MultiHeadAttention",
    "NhwcConv",
    "PackedAttention",
    "PackedMultiHeadAttention",
    "QAttention",
    "QGemm",
    "QLinearConv",
    "QLinearMatMul",
    "RNN",
});
static_assert(std::is_sorted(kComputeOps.begin(), kComputeOps.end()),
              "IsComputeOp binary-searches kComputeOps");

bool IsIdentifier(std::string_view name) {
  if (name.empty()) return false;
  if (!std::isalpha(static_cast<unsigned char>(name[0])) && name[0] != '_') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string OpTypeList(const std::map<std::string, int>& op_types) {
  std::string out;
  for (const auto& [op, count] : op_types) {
    if (!out.empty()) out += ", ";
    out += op;
    if (count > 1) out += " x" + std::to_string(count);
  }
  return out;
}

std::string ProviderNameList(const InstanceOptions& options) {
  std::string out;
  for (ExecutionProvider ep : options.providers) {
    if (!IsGpuProvider(ep)) continue;
    if (!out.empty()) out += " or ";
    out += ep == ExecutionProvider::kTensorRt ? kTensorRtProviderName : kCudaProviderName;
  }
  return out;
}

}  // namespace

bool IsComputeOp(std::string_view op_type) {
  return std::binary_search(kComputeOps.begin(), kComputeOps.end(), op_type);
}

const ProviderPlacement* PlacementAudit::Find(std::string_view provider) const {
  for (const auto& p : providers) {
    if (p.provider == provider) return &p;
  }
  return nullptr;
}

int PlacementAudit::NodesOn(std::string_view provider) const {
  const ProviderPlacement* p = Find(provider);
  return p == nullptr ? 0 : p->nodes;
}

void AddPlacedNode(PlacementAudit* audit, std::string_view provider, std::string_view op_type,
                   std::string_view node_name) {
  auto it = std::find_if(audit->providers.begin(), audit->providers.end(),
                         [&](const ProviderPlacement& p) { return p.provider == provider; });
  if (it == audit->providers.end()) {
    ProviderPlacement placement;
    placement.provider = std::string(provider);
    audit->providers.push_back(std::move(placement));
    it = std::prev(audit->providers.end());
  }
  ++it->nodes;
  ++it->op_types[std::string(op_type)];
  if (IsComputeOp(op_type)) {
    ++it->compute_nodes;
    it->compute.push_back(PlacedNode{std::string(node_name), std::string(op_type)});
  }
  ++audit->total_nodes;
}

Status CheckPlacement(const PlacementAudit& audit, const InstanceOptions& options) {
  if (std::none_of(options.providers.begin(), options.providers.end(), IsGpuProvider)) {
    return Status::Ok();
  }
  const int on_cpu = audit.NodesOn(kCpuProviderName);
  if (audit.total_nodes > 0 && on_cpu == audit.total_nodes) {
    return FailedPrecondition(
        "no node was placed on " + ProviderNameList(options) + ": all " +
        std::to_string(audit.total_nodes) + " nodes run on " + std::string(kCpuProviderName) +
        " (the silent CPU fallback); a GPU instance that computes nothing on the GPU is refused, "
        "unless --allow-cpu-fallback serves it, in the dev profile");
  }
  const ProviderPlacement* cpu = audit.Find(kCpuProviderName);
  if (cpu == nullptr || cpu->compute.empty()) return Status::Ok();

  std::map<std::string, int> refused_ops;
  std::string refused_nodes;
  int refused = 0;
  for (const PlacedNode& node : cpu->compute) {
    const bool allowed = std::find(options.allowed_cpu_ops.begin(), options.allowed_cpu_ops.end(),
                                   node.op_type) != options.allowed_cpu_ops.end();
    if (allowed) continue;
    ++refused_ops[node.op_type];
    // Name a few nodes, enough to find them in the graph; the count says the rest.
    if (refused < 5) {
      refused_nodes += (refused_nodes.empty() ? "" : ", ") + std::string("'") + node.name + "'";
    }
    ++refused;
  }
  if (refused == 0) return Status::Ok();
  std::string op_names;
  for (const auto& [op, count] : refused_ops) op_names += (op_names.empty() ? "" : ",") + op;
  return FailedPrecondition(
      std::to_string(refused) + " compute-bearing node" + (refused == 1 ? " was" : "s were") +
      " placed on " + std::string(kCpuProviderName) + " instead of " + ProviderNameList(options) +
      ": " + OpTypeList(refused_ops) + " (nodes " + refused_nodes + (refused > 5 ? ", ..." : "") +
      "); a GPU instance must not compute on the CPU. If this is intended, allow the op types "
      "with parameters { key: \"" +
      std::string(kAllowCpuOpsParameter) + "\" value { string_value: \"" + op_names + "\" } }");
}

std::string PlacementSummary(const PlacementAudit& audit) {
  if (audit.providers.empty()) return "no nodes";
  const bool mixed = audit.providers.size() > 1;
  std::string out;
  for (const auto& p : audit.providers) {
    if (!out.empty()) out += ", ";
    out += p.provider + " " + std::to_string(p.nodes) + (p.nodes == 1 ? " node" : " nodes") + " (" +
           std::to_string(p.compute_nodes) + " compute";
    if (mixed && p.provider == kCpuProviderName) out += ": " + OpTypeList(p.op_types);
    out += ")";
  }
  if (!audit.allowed_cpu_ops.empty()) {
    std::string allowed;
    for (const auto& op : audit.allowed_cpu_ops) allowed += (allowed.empty() ? "" : ",") + op;
    out += "; allowed on CPU: " + allowed;
  }
  if (!audit.degraded_reason.empty()) out += "; DEGRADED: " + audit.degraded_reason;
  return out;
}

StatusOr<std::vector<std::string>> ParseAllowedCpuOps(std::string_view text) {
  std::vector<std::string> ops;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string_view entry = Trim(text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (!IsIdentifier(entry)) {
      return InvalidArgument(
          "parameters: '" + std::string(kAllowCpuOpsParameter) + "' is '" + std::string(text) +
          "'; " +
          (entry.empty() ? std::string("it has an empty entry")
                         : "'" + std::string(entry) + "' is not an op type") +
          " (write ONNX op types separated by commas, e.g. \"NonMaxSuppression,TopK\")");
    }
    if (std::find(ops.begin(), ops.end(), entry) == ops.end()) ops.emplace_back(entry);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return ops;
}

}  // namespace fastpath::backend
