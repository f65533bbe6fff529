// On a machine with an NVIDIA GPU (CTest label `gpu`; skips itself elsewhere): the CUDA
// plugin EP registers, the mlp test model's compute lands on CUDAExecutionProvider, the
// policy admits it, and the results match a reference computed here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <vector>

#include "fastpath/backend/backend.h"
#include "fastpath/onnxruntime/ort_backend.h"

namespace fastpath::onnxruntime {
namespace {

const std::filesystem::path kModels = FASTPATH_TEST_MODELS_DIR;

// mlp: Y = Relu(X W0 + B0) W1 + B1 with W0 = arange(32)/32 (4x8), B0 = 0.5, W1 =
// arange(16)/16 (8x2), B1 = 0 (tools/make_test_models.py).
std::vector<float> Reference(const std::vector<float>& x, int batch) {
  std::vector<float> y(batch * 2, 0.0f);
  for (int b = 0; b < batch; ++b) {
    float h[8];
    for (int j = 0; j < 8; ++j) {
      float sum = 0.5f;
      for (int i = 0; i < 4; ++i) sum += x[b * 4 + i] * static_cast<float>(i * 8 + j) / 32.0f;
      h[j] = sum > 0 ? sum : 0;
    }
    for (int k = 0; k < 2; ++k) {
      float sum = 0;
      for (int j = 0; j < 8; ++j) sum += h[j] * static_cast<float>(j * 2 + k) / 16.0f;
      y[b * 2 + k] = sum;
    }
  }
  return y;
}

TEST(GpuPlacementTest, MlpComputesOnCuda) {
  const OrtRuntimeReport report = ProbeOrtRuntime();
  ASSERT_FALSE(report.libraries.empty());
  if (report.libraries[0].devices.empty()) {
    GTEST_SKIP() << "no CUDA EP device: " << report.libraries[0].error;
  }
  auto backend = CreateOrtBackend();
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  backend::InstanceOptions options;
  options.providers = {backend::ExecutionProvider::kCuda};
  options.device_id = 0;
  auto instance = (*backend)->CreateInstance(kModels / "mlp.onnx", options);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  const backend::PlacementAudit* audit = (*instance)->placement();
  ASSERT_NE(audit, nullptr);
  std::cout << "placement: " << backend::PlacementSummary(*audit) << "\n";
  const backend::ProviderPlacement* cuda = audit->Find(backend::kCudaProviderName);
  ASSERT_NE(cuda, nullptr);
  EXPECT_EQ(cuda->compute_nodes, 2);
  const backend::ProviderPlacement* cpu = audit->Find(backend::kCpuProviderName);
  if (cpu != nullptr) {
    EXPECT_EQ(cpu->compute_nodes, 0);
  }
  EXPECT_TRUE(audit->degraded_reason.empty());

  const std::vector<float> x = {1, 2, 3, 4, -1, 0.5f, 0, 2};
  Tensor input;
  input.name = "X";
  input.dtype = DataType::kFp32;
  input.shape = {2, 4};
  input.data.assign(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float));
  auto outputs = (*instance)->Run({input}, {"Y"});
  ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
  ASSERT_EQ(outputs->size(), 1u);
  std::vector<float> y(4);
  ASSERT_EQ((*outputs)[0].data.size(), y.size() * sizeof(float));
  std::memcpy(y.data(), (*outputs)[0].data.data(), (*outputs)[0].data.size());
  const std::vector<float> expected = Reference(x, 2);
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_NEAR(y[i], expected[i], 1e-3f * (1 + std::abs(expected[i])));
  }
}

}  // namespace
}  // namespace fastpath::onnxruntime
