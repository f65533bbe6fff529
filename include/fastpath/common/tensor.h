// Tensors as they travel between the front ends, the scheduler and the backends,
// and the inference request/response that carry them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fastpath/common/dtype.h"
#include "fastpath/common/status.h"

namespace fastpath {

// A named tensor that owns its bytes.
// Fixed-size types: `data` holds the elements contiguously, little-endian, row-major.
// BYTES: `data` holds each element as a 4-byte little-endian length followed by its
// bytes, exactly as in the KServe binary tensor extension, so no front end needs a
// second representation.
struct Tensor {
  std::string name;
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> shape;
  std::string data;
};

// Product of dims, checked: every dim >= 0 and the product <= max_elements.
// Called before anything is allocated for a request tensor.
StatusOr<int64_t> ElementCount(const std::vector<int64_t>& shape,
                               int64_t max_elements = INT64_MAX);
// The element count of a request tensor's declared shape, where `max_elements` is the most
// that any request within its size limit (`limit`: "a request body of at most 64 MiB") can
// carry. A shape past it contradicts the request it came in: InvalidArgument, not
// PayloadTooLarge, for nothing was too large and the same request can never pass (413 and
// RESOURCE_EXHAUSTED invite a retry).
StatusOr<int64_t> DeclaredElementCount(const std::vector<int64_t>& shape, int64_t max_elements,
                                       const std::string& limit);
// "[1,3,224,224]"
std::string ShapeToString(const std::vector<int64_t>& shape);

// Checks that `data` matches dtype and shape: the exact byte length for fixed-size
// types (and only 0 or 1 in each BOOL byte), and exactly ElementCount well-formed
// length-prefixed elements for BYTES. The message names the tensor.
Status ValidateTensorData(const Tensor& tensor);

// Splits BYTES data into element views (which point into `data`). Fails with a
// message naming `tensor_name` if the data is not exactly `expected_count` elements.
StatusOr<std::vector<std::string_view>> SplitBytesElements(std::string_view data,
                                                           int64_t expected_count,
                                                           std::string_view tensor_name);
// Appends one BYTES element (length prefix + bytes) to `out`.
void AppendBytesElement(std::string* out, std::string_view element);

// A request parameter value (KServe "parameters").
using ParameterValue = std::variant<bool, int64_t, double, std::string>;
using Parameters = std::map<std::string, ParameterValue>;

struct RequestedOutput {
  std::string name;
  Parameters parameters;  // front-end specific, e.g. binary_data; passed through
};

struct InferRequest {
  std::string model_name;
  std::string model_version;  // empty: the version policy picks (the highest ready)
  std::string id;             // echoed back in the response
  std::vector<Tensor> inputs;
  std::vector<RequestedOutput> outputs;  // empty: all outputs of the model
  Parameters parameters;
  // Absolute deadline; time_point::max() when the client set none.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Set by the front end when the client has gone away; null when it cannot tell. A
  // request cancelled before it reaches the model never runs.
  std::shared_ptr<const std::atomic<bool>> cancelled;
  // Set by a front end whose calling thread may run the model itself, briefly: when the
  // model's queue is empty, an instance is idle and the model's runs are short, the
  // request then runs on that thread and skips two thread hand-offs (to the instance's
  // thread and back). The scheduler decides. False: the call never blocks on the model.
  bool caller_may_run_model = false;
};

// What a request spent in its model, as the statistics extension counts it: its own wait in
// the queue, and the phases of the execution that ran it (shared with the requests batched
// with it).
struct ModelTimes {
  uint64_t queue_ns = 0;
  uint64_t compute_input_ns = 0;
  uint64_t compute_infer_ns = 0;
  uint64_t compute_output_ns = 0;
};

struct InferResponse {
  std::string model_name;
  std::string model_version;
  std::string id;
  std::vector<Tensor> outputs;  // in the order requested (model order when all)
  Parameters parameters;
  // Filled by the scheduler that answered. An ensemble's compute times are the sums of its
  // steps' (its queue time is its own), as in Triton's statistics.
  ModelTimes times;
};

}  // namespace fastpath
