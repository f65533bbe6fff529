// The FP16 accuracy guard (issue 4 §4): a reduced-precision model whose version folder
// also holds its FP32 original is admitted only when both agree on the self-test's
// seeded warm-up inputs. Declared in config.pbtxt `parameters`:
//
//   fastpath.accuracy.reference_model  file name of the FP32 twin in the version folder
//                                      (e.g. "model_fp32.onnx"; no folders)
//   fastpath.accuracy.tolerance        the largest |output - reference| allowed on any
//                                      element of any output (a number >= 0)
//
// Both or neither. The server runs every warm-up request of the self-test plan through
// the model's real path and through the reference (on ORT's CPU provider, the reference
// of record), and compares each output element-wise; the worst element decides. A miss
// is refused in production and DEGRADED in dev, like a missed latency budget.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"
#include "model_config.pb.h"

namespace fastpath::admission {

inline constexpr const char* kAccuracyReferenceModel = "fastpath.accuracy.reference_model";
inline constexpr const char* kAccuracyTolerance = "fastpath.accuracy.tolerance";

struct AccuracyGuard {
  std::string reference_model;  // a file name in the version folder
  double tolerance = 0;
};

// nullopt when the config declares no guard. One key without the other, a reference that
// is not a plain file name, a tolerance that is not a finite number >= 0, or an unknown
// fastpath.accuracy.* key is InvalidArgument naming the key.
StatusOr<std::optional<AccuracyGuard>> ParseAccuracyGuard(const inference::ModelConfig& config);

// The element of one output that differs most from the reference's.
struct OutputDeviation {
  std::string output;
  int64_t index = -1;  // flat (row-major) element index; -1 for an empty output
  double value = 0;
  double reference = 0;
  double difference = 0;  // |value - reference|; infinite when exactly one is NaN
};

// Compares `output` with `reference` element by element, as doubles. Both must be of a
// numeric datatype (FP16, BF16, FP32, FP64, integers, BOOL) and hold the same number of
// elements; otherwise InvalidArgument saying so.
// With `relative_floor` > 0 the difference of each element is relative:
// |value - reference| / max(relative_floor, |reference|). Equal values (infinities too) and
// two NaNs differ by 0.
StatusOr<OutputDeviation> WorstDeviation(const Tensor& output, const Tensor& reference,
                                         double relative_floor = 0);

// "output 'Y' element 17: 0.60009766 here, 0.6 from the FP32 reference 'model_fp32.onnx';
// |difference| 9.7656e-05 > tolerance 1e-06"
std::string DescribeMiss(const OutputDeviation& worst, const AccuracyGuard& guard);
// A value as the messages print it: %.8g ("1e-06", "0.92223388").
std::string FormatNumber(double value);

}  // namespace fastpath::admission
