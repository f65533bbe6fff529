// Fake CUDA libraries that only report their versions, one shared object per library:
// the build compiles this file once per FASTPATH_FAKE_<LIB> definition.
//   FASTPATH_FAKE_CUDART_VERSION    cudaRuntimeGetVersion (default 13000)
//   FASTPATH_FAKE_CUBLAS_VERSION    "major.minor.patch" for cublasGetProperty (default "13.0.2")
//   FASTPATH_FAKE_CUDNN_VERSION     cudnnGetVersion (default 91002 = 9.10.2)
//   FASTPATH_FAKE_CUDNN_CUDART      cudnnGetCudartVersion (default 13000)
//   FASTPATH_FAKE_TENSORRT_VERSION  getInferLibVersion (default 101300 = 10.13.0)
//   FASTPATH_FAKE_NCCL_VERSION      ncclGetVersion (default 22705 = 2.27.5)
#include <cstddef>
#include <cstdint>
#include <string>

#include "fake_env.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

using fastpath::fakes::EnvInt;

#if defined(FASTPATH_FAKE_CUDART)
FAKE_EXPORT int cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return 1;  // cudaErrorInvalidValue
  *version = static_cast<int>(EnvInt("FASTPATH_FAKE_CUDART_VERSION", 13000));
  return 0;
}
#elif defined(FASTPATH_FAKE_CUBLAS)
FAKE_EXPORT int cublasGetProperty(int type, int* value) {
  if (value == nullptr || type < 0 || type > 2) return 7;  // CUBLAS_STATUS_INVALID_VALUE
  const std::string version = fastpath::fakes::EnvString("FASTPATH_FAKE_CUBLAS_VERSION", "13.0.2");
  std::string part = version;
  size_t start = 0;
  for (int i = 0; i <= type; ++i) {
    const size_t dot = version.find('.', start);
    part = version.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    start = dot == std::string::npos ? version.size() : dot + 1;
  }
  *value = part.empty() ? 0 : std::stoi(part);
  return 0;
}
#elif defined(FASTPATH_FAKE_CUDNN)
FAKE_EXPORT size_t cudnnGetVersion() {
  return static_cast<size_t>(EnvInt("FASTPATH_FAKE_CUDNN_VERSION", 91002));
}
FAKE_EXPORT size_t cudnnGetCudartVersion() {
  return static_cast<size_t>(EnvInt("FASTPATH_FAKE_CUDNN_CUDART", 13000));
}
#elif defined(FASTPATH_FAKE_TENSORRT)
FAKE_EXPORT int32_t getInferLibVersion() {
  return static_cast<int32_t>(EnvInt("FASTPATH_FAKE_TENSORRT_VERSION", 101300));
}
#elif defined(FASTPATH_FAKE_NCCL)
FAKE_EXPORT int ncclGetVersion(int* version) {
  if (version == nullptr) return 4;  // ncclInvalidArgument
  *version = static_cast<int>(EnvInt("FASTPATH_FAKE_NCCL_VERSION", 22705));
  return 0;
}
#else
#error "define one of FASTPATH_FAKE_CUDART, _CUBLAS, _CUDNN, _TENSORRT, _NCCL"
#endif
