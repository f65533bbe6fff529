// The dynamic batcher's tensor work: which requests may share a batch, the batch's inputs
// assembled from theirs, and an output of the batch split back into one per request.
// Private to the scheduler module.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fastpath/backend/backend.h"
#include "fastpath/common/status.h"
#include "fastpath/common/tensor.h"
#include "fastpath/scheduler/scheduler.h"

namespace fastpath::scheduler {

inline bool IsCancelled(const Job& job) {
  return job.request.cancelled != nullptr && job.request.cancelled->load(std::memory_order_relaxed);
}

inline uint64_t BatchOf(const Job& job) { return std::max<uint64_t>(1, job.batch_size); }

// What requests must share to run in one batch: the same inputs, each with the same
// datatype and the same shape past the batch dim.
struct BatchSignature {
  bool batchable = true;  // false: the request runs alone (no inputs, or a scalar input)
  std::map<std::string, std::pair<DataType, std::vector<int64_t>>> inputs;

  static BatchSignature Of(const Job& job);
  bool Accepts(const Job& job) const;
};

// The tensors' rows one after the other; they share name, datatype and the shape past the
// first dim. BYTES data concatenates as it is (each element carries its length).
Tensor ConcatRows(const std::vector<const Tensor*>& parts);

// The batch's inputs: each request's rows one after the other, in the first request's
// input order.
std::vector<Tensor> ConcatInputs(std::vector<Job*>& jobs);

// Splits an output of the whole batch into one tensor per request, by rows.
StatusOr<std::vector<Tensor>> SplitRows(Tensor& whole, const std::vector<uint64_t>& rows);

// Runs `inputs`, a batch of `rows` rows (each input's first dim), on `instance`. When the
// run fails for lack of memory (ResourceExhausted) and the batch has two rows or more, it
// is run once more as two halves by rows, one after the other, and their outputs joined:
// a batch that fits in half the memory still succeeds (issue 13). When a half fails too,
// the error is the first one, saying that the halves failed as well. `inputs` may be
// consumed by the split. `suspect` is set when a run ran out of memory and the instance
// has not run well since (the halves, if any, failed in any way): it must be checked
// before it takes more work (ModelInstance::RecoverFromOutOfMemory).
StatusOr<std::vector<Tensor>> RunSplittingOnOutOfMemory(backend::ModelInstance* instance,
                                                        std::vector<Tensor>& inputs,
                                                        const std::vector<std::string>& names,
                                                        uint64_t rows, bool* suspect);

}  // namespace fastpath::scheduler
