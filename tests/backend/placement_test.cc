// The placement policy and summary on synthetic audits: no runtime, no GPU.
#include "fastpath/backend/placement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fastpath/backend/backend.h"

namespace fastpath::backend {
namespace {

using ::testing::ElementsAre;

InstanceOptions GpuOptions(std::vector<std::string> allowed = {}) {
  InstanceOptions options;
  options.providers = {ExecutionProvider::kCuda};
  options.allowed_cpu_ops = std::move(allowed);
  return options;
}

// A typical GPU placement: the compute on CUDA, ORT's shape ops on the CPU.
PlacementAudit MixedAudit() {
  PlacementAudit audit;
  AddPlacedNode(&audit, kCudaProviderName, "Conv", "conv1");
  AddPlacedNode(&audit, kCudaProviderName, "Relu", "relu1");
  AddPlacedNode(&audit, kCudaProviderName, "MatMul", "fc");
  AddPlacedNode(&audit, kCpuProviderName, "Shape", "shape");
  AddPlacedNode(&audit, kCpuProviderName, "Gather", "gather");
  return audit;
}

TEST(PlacementTest, ComputeOps) {
  for (const char* op :
       {"MatMul", "Gemm", "Conv", "ConvTranspose", "Attention", "MultiHeadAttention", "LSTM", "GRU",
        "Einsum", "FusedConv", "MatMulNBits", "QLinearConv"}) {
    EXPECT_TRUE(IsComputeOp(op)) << op;
  }
  for (const char* op :
       {"Shape", "Gather", "Reshape", "Relu", "Add", "Softmax", "Concat", "matmul", ""}) {
    EXPECT_FALSE(IsComputeOp(op)) << op;
  }
}

TEST(PlacementTest, AddPlacedNodeCounts) {
  const PlacementAudit audit = MixedAudit();
  EXPECT_EQ(audit.total_nodes, 5);
  ASSERT_EQ(audit.providers.size(), 2u);
  EXPECT_EQ(audit.providers[0].provider, kCudaProviderName);
  EXPECT_EQ(audit.providers[0].nodes, 3);
  EXPECT_EQ(audit.providers[0].compute_nodes, 2);
  EXPECT_EQ(audit.providers[1].provider, kCpuProviderName);
  EXPECT_EQ(audit.providers[1].nodes, 2);
  EXPECT_EQ(audit.providers[1].compute_nodes, 0);
  EXPECT_EQ(audit.NodesOn(kCpuProviderName), 2);
  EXPECT_EQ(audit.NodesOn(kTensorRtProviderName), 0);
}

TEST(PlacementTest, ShapeOpsOnCpuAreAccepted) {
  EXPECT_TRUE(CheckPlacement(MixedAudit(), GpuOptions()).ok());
}

TEST(PlacementTest, ComputeOpOnCpuIsRefused) {
  PlacementAudit audit = MixedAudit();
  AddPlacedNode(&audit, kCpuProviderName, "MatMul", "head/MatMul");
  AddPlacedNode(&audit, kCpuProviderName, "MatMul", "head/MatMul_1");
  AddPlacedNode(&audit, kCpuProviderName, "NonZero", "nz");
  const Status status = CheckPlacement(audit, GpuOptions());
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "2 compute-bearing nodes were placed on CPUExecutionProvider instead of "
            "CUDAExecutionProvider: MatMul x2 (nodes 'head/MatMul', 'head/MatMul_1'); a GPU "
            "instance must not compute on the CPU. If this is intended, allow the op types with "
            "parameters { key: \"fastpath.allow_cpu_ops\" value { string_value: \"MatMul\" } }");
}

TEST(PlacementTest, AllowedComputeOpIsAccepted) {
  PlacementAudit audit = MixedAudit();
  AddPlacedNode(&audit, kCpuProviderName, "Einsum", "einsum");
  EXPECT_FALSE(CheckPlacement(audit, GpuOptions()).ok());
  EXPECT_TRUE(CheckPlacement(audit, GpuOptions({"Einsum"})).ok());
  // The allowance covers the op types it names, not the others.
  AddPlacedNode(&audit, kCpuProviderName, "Conv", "conv_cpu");
  const Status status = CheckPlacement(audit, GpuOptions({"Einsum"}));
  EXPECT_EQ(status.message(),
            "1 compute-bearing node was placed on CPUExecutionProvider instead of "
            "CUDAExecutionProvider: Conv (nodes 'conv_cpu'); a GPU instance must not compute on "
            "the CPU. If this is intended, allow the op types with parameters { key: "
            "\"fastpath.allow_cpu_ops\" value { string_value: \"Conv\" } }");
}

TEST(PlacementTest, NothingOnTheGpuIsTheSilentFallback) {
  PlacementAudit audit;
  audit.providers.push_back(ProviderPlacement{std::string(kTensorRtProviderName), 0, 0, {}, {}});
  audit.providers.push_back(ProviderPlacement{std::string(kCudaProviderName), 0, 0, {}, {}});
  AddPlacedNode(&audit, kCpuProviderName, "Add", "sum");
  AddPlacedNode(&audit, kCpuProviderName, "Sub", "difference");
  InstanceOptions options;
  options.providers = {ExecutionProvider::kTensorRt, ExecutionProvider::kCuda};
  // Even with every op type allowed: nothing on the GPU is never a GPU instance.
  options.allowed_cpu_ops = {"Add", "Sub"};
  const Status status = CheckPlacement(audit, options);
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "no node was placed on TensorrtExecutionProvider or CUDAExecutionProvider: all 2 "
            "nodes run on CPUExecutionProvider (the silent CPU fallback); a GPU instance that "
            "computes nothing on the GPU is refused, unless --allow-cpu-fallback serves it, in "
            "the dev profile");
}

TEST(PlacementTest, CpuInstancesAreNotPoliced) {
  PlacementAudit audit;
  AddPlacedNode(&audit, kCpuProviderName, "MatMul", "fc");
  InstanceOptions cpu;  // providers = {kCpu}
  EXPECT_TRUE(CheckPlacement(audit, cpu).ok());
}

TEST(PlacementTest, Summary) {
  PlacementAudit audit = MixedAudit();
  AddPlacedNode(&audit, kCpuProviderName, "Gather", "gather2");
  EXPECT_EQ(PlacementSummary(audit),
            "CUDAExecutionProvider 3 nodes (2 compute), CPUExecutionProvider 3 nodes "
            "(0 compute: Gather x2, Shape)");
  audit.allowed_cpu_ops = {"TopK", "NonMaxSuppression"};
  audit.degraded_reason = "something";
  EXPECT_EQ(PlacementSummary(audit),
            "CUDAExecutionProvider 3 nodes (2 compute), CPUExecutionProvider 3 nodes "
            "(0 compute: Gather x2, Shape); allowed on CPU: TopK,NonMaxSuppression; "
            "DEGRADED: something");

  PlacementAudit cpu_only;
  AddPlacedNode(&cpu_only, kCpuProviderName, "Gemm", "fc");
  EXPECT_EQ(PlacementSummary(cpu_only), "CPUExecutionProvider 1 node (1 compute)");
  EXPECT_EQ(PlacementSummary(PlacementAudit{}), "no nodes");
}

TEST(PlacementTest, ParseAllowedCpuOps) {
  auto ops = ParseAllowedCpuOps(" NonMaxSuppression, TopK ,TopK,Einsum");
  ASSERT_TRUE(ops.ok()) << ops.status().ToString();
  EXPECT_THAT(*ops, ElementsAre("NonMaxSuppression", "TopK", "Einsum"));

  auto empty_entry = ParseAllowedCpuOps("TopK,,Einsum");
  EXPECT_EQ(empty_entry.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(empty_entry.status().message(),
            "parameters: 'fastpath.allow_cpu_ops' is 'TopK,,Einsum'; it has an empty entry "
            "(write ONNX op types separated by commas, e.g. \"NonMaxSuppression,TopK\")");
  auto bad_name = ParseAllowedCpuOps("TopK;Einsum");
  EXPECT_EQ(bad_name.status().message(),
            "parameters: 'fastpath.allow_cpu_ops' is 'TopK;Einsum'; 'TopK;Einsum' is not an op "
            "type (write ONNX op types separated by commas, e.g. \"NonMaxSuppression,TopK\")");
  EXPECT_FALSE(ParseAllowedCpuOps("").ok());
}

}  // namespace
}  // namespace fastpath::backend
