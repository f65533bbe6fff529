// ORT's errors in fastpath's terms: above all, every form in which memory running out
// reaches us (ORT has no out-of-memory code) becomes one ResourceExhausted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ort_types.h"

namespace fastpath::onnxruntime {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(OrtErrorsTest, EveryKnownOutOfMemoryFormIsResourceExhausted) {
  const struct {
    OrtErrorCode code;
    const char* message;
  } kCases[] = {
      {ORT_RUNTIME_EXCEPTION,
       "/onnxruntime/core/framework/bfc_arena.cc:359 void* "
       "onnxruntime::BFCArena::AllocateRawInternal"
       "(size_t, bool, onnxruntime::Stream*, bool, onnxruntime::WaitNotificationFn) Failed to "
       "allocate memory for requested buffer of size 4294967296"},
      {ORT_RUNTIME_EXCEPTION,
       "Available memory of 1048576 is smaller than requested bytes of 8388608"},
      {ORT_FAIL,
       "CUDA failure 2: out of memory ; GPU=0 ; hostname=node ; file=cuda_allocator.cc ; line=47"},
      {ORT_FAIL, "CUBLAS failure 3: CUBLAS_STATUS_ALLOC_FAILED ; GPU=0"},
      {ORT_EP_FAIL, "CUDNN failure 2: CUDNN_STATUS_ALLOC_FAILED ; GPU=0"},
      {ORT_RUNTIME_EXCEPTION, "std::bad_alloc"},
      {ORT_EP_FAIL, "CUDA driver error CUDA_ERROR_OUT_OF_MEMORY in cuMemAlloc"},
      {ORT_FAIL, "cudaMalloc returned cudaErrorMemoryAllocation"},
  };
  for (const auto& c : kCases) {
    EXPECT_TRUE(IsOutOfMemoryMessage(c.message)) << c.message;
    const Status s = StatusFromOrtError(c.code, "running model 'm'", c.message);
    EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << c.message;
    EXPECT_THAT(s.message(), StartsWith("out of memory: running model 'm': "));
    EXPECT_THAT(s.message(), HasSubstr(c.message));
  }
}

// ORT's thread pool, at the process's thread limit (its text, seen under ulimit -u): not the
// model file's fault (a load's ORT_FAIL is otherwise taken as the file's), and it may load
// once other threads end.
TEST(OrtErrorsTest, AThreadThatCannotStartIsTheThreadLimit) {
  const Status s = StatusFromOrtError(
      ORT_FAIL, "cannot load ONNX model 'm'",
      "/onnxruntime_src/onnxruntime/core/platform/posix/env.cc:185 "
      "onnxruntime::{anonymous}::PosixThread::PosixThread(...) pthread_create failed, error "
      "code: 11 error msg: Resource temporarily unavailable\n");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_EQ(s.message(),
            "could not start ONNX Runtime's threads (Resource temporarily unavailable): the "
            "process is at its thread limit (ulimit -u, or the container's pids limit)");
}

TEST(OrtErrorsTest, OtherFailuresKeepTheirCodes) {
  EXPECT_FALSE(IsOutOfMemoryMessage("Got invalid dimensions for input: x"));
  EXPECT_EQ(StatusFromOrtError(ORT_INVALID_ARGUMENT, "c", "Got invalid dimensions").code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusFromOrtError(ORT_FAIL, "c", "CUDA failure 700: an illegal memory access").code(),
            StatusCode::kInternal);
  EXPECT_EQ(StatusFromOrtError(ORT_NO_SUCHFILE, "c", "no such file").code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace fastpath::onnxruntime
