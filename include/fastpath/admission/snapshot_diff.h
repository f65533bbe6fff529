// `fastpath doctor --diff A.json B.json`: what changed between two capability snapshots
// (doctor --json outputs), for the question "it worked last week". A structural diff of two
// JSON documents: every leaf that was added, removed or changed, with its path.
#pragma once

#include <string>
#include <vector>

#include "fastpath/common/status.h"

namespace fastpath::admission {

struct SnapshotChange {
  enum class Kind { kAdded, kRemoved, kChanged };
  Kind kind = Kind::kChanged;
  // JSON-pointer-like path with names where an array holds named objects:
  // "driver.cuda_version", "libraries[cudnn].version", "nvml.devices[0].ecc_enabled".
  std::string path;
  std::string before;  // the value in A as JSON text; empty when added
  std::string after;   // the value in B as JSON text; empty when removed
};

// Compares two JSON documents. Arrays of objects that all carry a "name" (libraries) are
// matched by name, other arrays by index. Fails when either text is not valid JSON (the
// message names `name_a` / `name_b` and the offset).
StatusOr<std::vector<SnapshotChange>> DiffSnapshots(const std::string& a, const std::string& name_a,
                                                    const std::string& b,
                                                    const std::string& name_b);

// A table for people: one line per change, "changed  driver.cuda_version  "13.0" -> "12.4"".
std::string RenderChanges(const std::vector<SnapshotChange>& changes, const std::string& name_a,
                          const std::string& name_b);

}  // namespace fastpath::admission
