// The alert rules of a Prometheus rule file, for `fastpath preflight` (item 5a): a plain rule
// file (`rule_files:` in prometheus.yml) or a PrometheusRule object, whose groups are under
// `spec`. The YAML is read by yaml-cpp; what it lets through that Prometheus refuses (a key
// twice in one mapping, several documents) is refused here too. Every error names the line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fastpath/common/status.h"

namespace fastpath::cli::preflight {

struct AlertRule {
  std::string group;
  std::string name;  // `alert:`; empty for a recording rule
  std::string record;
  std::string expr;
  int line = 0;  // 1-based, where the rule's mapping starts
};

// The rules of every group, in file order. InvalidArgument, with "line N: " where there is
// a line to name, when `text` is not YAML, not one document, or not a rule file: groups
// with a `name` and a `rules` sequence, each rule with exactly one of `alert` and `record`
// and a non-empty `expr`.
StatusOr<std::vector<AlertRule>> ParseAlertRules(std::string_view text);

}  // namespace fastpath::cli::preflight
