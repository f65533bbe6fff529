#include "batch_tensors.h"

#include <algorithm>
#include <utility>

namespace fastpath::scheduler {

BatchSignature BatchSignature::Of(const Job& job) {
  BatchSignature sig;
  // A hold runs alone (Job::hold).
  if (job.request.inputs.empty() || job.hold) sig.batchable = false;
  for (const Tensor& t : job.request.inputs) {
    if (t.shape.empty()) {
      sig.batchable = false;
      break;
    }
    sig.inputs[t.name] = {t.dtype, std::vector<int64_t>(t.shape.begin() + 1, t.shape.end())};
  }
  return sig;
}

bool BatchSignature::Accepts(const Job& job) const {
  if (!batchable || job.hold || job.request.inputs.size() != inputs.size()) {
    return false;
  }
  for (const Tensor& t : job.request.inputs) {
    auto it = inputs.find(t.name);
    if (it == inputs.end() || t.shape.empty() || it->second.first != t.dtype) return false;
    const auto& rest = it->second.second;
    if (!std::equal(t.shape.begin() + 1, t.shape.end(), rest.begin(), rest.end())) return false;
  }
  return true;
}

namespace {

const Tensor* FindTensor(const std::vector<Tensor>& tensors, const std::string& name) {
  for (const Tensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace

Tensor ConcatRows(const std::vector<const Tensor*>& parts) {
  Tensor t;
  t.name = parts[0]->name;
  t.dtype = parts[0]->dtype;
  t.shape = parts[0]->shape;
  t.shape[0] = 0;
  size_t bytes = 0;
  for (const Tensor* part : parts) bytes += part->data.size();
  t.data.reserve(bytes);
  for (const Tensor* part : parts) {
    t.shape[0] += part->shape[0];
    t.data.append(part->data);
  }
  return t;
}

std::vector<Tensor> ConcatInputs(std::vector<Job*>& jobs) {
  std::vector<Tensor> out;
  std::vector<const Tensor*> parts(jobs.size());
  for (const Tensor& first : jobs[0]->request.inputs) {
    for (size_t i = 0; i < jobs.size(); ++i) {
      parts[i] = FindTensor(jobs[i]->request.inputs, first.name);
    }
    out.push_back(ConcatRows(parts));
  }
  return out;
}

StatusOr<std::vector<Tensor>> SplitRows(Tensor& whole, const std::vector<uint64_t>& rows) {
  uint64_t total = 0;
  for (uint64_t r : rows) total += r;
  if (whole.shape.empty() || whole.shape[0] < 0 || static_cast<uint64_t>(whole.shape[0]) != total) {
    return Internal("output '" + whole.name + "' has shape " + ShapeToString(whole.shape) +
                    " for a batch of " + std::to_string(total) + " rows from " +
                    std::to_string(rows.size()) +
                    " requests: the model does not keep the batch as its first dim, so its " +
                    "requests cannot be batched together (max_batch_size: 0 in config.pbtxt " +
                    "turns batching off)");
  }
  const std::vector<int64_t> row_shape(whole.shape.begin() + 1, whole.shape.end());
  FASTPATH_ASSIGN_OR_RETURN(const int64_t per_row, ElementCount(row_shape));
  std::vector<Tensor> parts(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    parts[i].name = whole.name;
    parts[i].dtype = whole.dtype;
    parts[i].shape = whole.shape;
    parts[i].shape[0] = static_cast<int64_t>(rows[i]);
  }
  if (whole.dtype == DataType::kBytes) {
    FASTPATH_ASSIGN_OR_RETURN(
        const auto elements,
        SplitBytesElements(whole.data, per_row * static_cast<int64_t>(total), whole.name));
    size_t next = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      for (uint64_t e = 0; e < rows[i] * static_cast<uint64_t>(per_row); ++e) {
        AppendBytesElement(&parts[i].data, elements[next++]);
      }
    }
    return parts;
  }
  const size_t row_bytes = static_cast<size_t>(per_row) * ElementSize(whole.dtype);
  if (whole.data.size() != row_bytes * total) {
    return Internal("output '" + whole.name + "' holds " + std::to_string(whole.data.size()) +
                    " bytes; shape " + ShapeToString(whole.shape) + " needs " +
                    std::to_string(row_bytes * total));
  }
  size_t offset = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    parts[i].data.assign(whole.data, offset, row_bytes * rows[i]);
    offset += row_bytes * rows[i];
  }
  return parts;
}

StatusOr<std::vector<Tensor>> RunSplittingOnOutOfMemory(backend::ModelInstance* instance,
                                                        std::vector<Tensor>& inputs,
                                                        const std::vector<std::string>& names,
                                                        uint64_t rows, bool* suspect) {
  StatusOr<std::vector<Tensor>> whole = instance->Run(inputs, names);
  *suspect = !whole.ok() && whole.status().code() == StatusCode::kResourceExhausted;
  if (!*suspect || rows < 2) return whole;
  const uint64_t first = rows / 2;
  const std::vector<uint64_t> halves = {first, rows - first};
  // Every input is split by rows; one that cannot be (no batch dim) leaves the error as it is.
  std::vector<std::vector<Tensor>> half_inputs(2);
  for (Tensor& input : inputs) {
    auto parts = SplitRows(input, halves);
    if (!parts.ok()) return whole;
    half_inputs[0].push_back(std::move((*parts)[0]));
    half_inputs[1].push_back(std::move((*parts)[1]));
  }
  std::vector<std::vector<Tensor>> half_outputs(2);
  for (size_t h = 0; h < 2; ++h) {
    auto out = instance->Run(half_inputs[h], names);
    if (!out.ok()) {
      if (out.status().code() != StatusCode::kResourceExhausted) return out.status();
      return ResourceExhausted(whole.status().message() + " (the batch of " +
                               std::to_string(rows) + " rows ran out of memory, and so did its " +
                               "half of " + std::to_string(halves[h]) + " rows run alone)");
    }
    // An output without the batch dim cannot be joined: the batch fails as it did.
    for (const Tensor& t : *out) {
      if (t.shape.empty() || t.shape[0] != static_cast<int64_t>(halves[h])) return whole;
    }
    half_outputs[h] = std::move(out).value();
  }
  *suspect = false;  // both halves ran well after it
  std::vector<Tensor> joined;
  for (size_t k = 0; k < half_outputs[0].size(); ++k) {
    joined.push_back(ConcatRows({&half_outputs[0][k], &half_outputs[1][k]}));
  }
  return joined;
}

}  // namespace fastpath::scheduler
