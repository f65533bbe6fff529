#include "rules_yaml.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>
#include <utility>

namespace fastpath::cli::preflight {
namespace {

Status ErrorAt(const YAML::Mark& mark, const std::string& what) {
  if (mark.is_null()) return InvalidArgument(what);
  return InvalidArgument("line " + std::to_string(mark.line + 1) + ": " + what);
}

const char* KindName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return "empty";
}

// The value of `key` in mapping `map`, null when it is absent (yaml-cpp's node for an absent
// key throws when asked its type).
YAML::Node Get(const YAML::Node& map, const char* key) {
  const YAML::Node value = map[key];
  return value.IsDefined() ? value : YAML::Node();
}

// Where `key` is written in mapping `map` (an empty value's own mark is the next token's).
YAML::Mark KeyMark(const YAML::Node& map, const char* key) {
  for (const auto& entry : map) {
    if (entry.first.IsScalar() && entry.first.Scalar() == key) return entry.first.Mark();
  }
  return YAML::Mark::null_mark();
}

// The scalar `key` of mapping `map`; empty when it is absent or not a scalar.
std::string ScalarOf(const YAML::Node& map, const char* key) {
  const YAML::Node value = Get(map, key);
  return value.IsScalar() ? value.Scalar() : std::string();
}

// Whether line `line` (0-based) of `text` has a tab before its first other character.
bool TabIndented(std::string_view text, int line) {
  size_t start = 0;
  for (int i = 0; i < line && start != std::string_view::npos; ++i) {
    start = text.find('\n', start);
    if (start != std::string_view::npos) ++start;
  }
  if (start == std::string_view::npos) return false;
  const size_t first = text.find_first_not_of(" \t", start);
  return text.substr(start, first - start).find('\t') != std::string_view::npos;
}

// Prometheus refuses a key that a mapping repeats; yaml-cpp keeps both. Each collection is
// walked once, known by where it starts: an alias is the node it names, so a walk that
// followed aliases could go round a cycle or through the same node many times.
Status CheckKeysUnique(const YAML::Node& node, std::set<std::pair<int, int>>& walked) {
  if (!node.IsMap() && !node.IsSequence()) return Status::Ok();
  if (!walked.emplace(node.Mark().line, node.Mark().column).second) return Status::Ok();
  std::set<std::string> keys;
  for (const auto& entry : node) {
    if (node.IsSequence()) {
      FASTPATH_RETURN_IF_ERROR(CheckKeysUnique(entry, walked));
      continue;
    }
    if (entry.first.IsScalar() && !keys.insert(entry.first.Scalar()).second) {
      return ErrorAt(entry.first.Mark(),
                     "the key '" + entry.first.Scalar() + "' twice in one mapping");
    }
    FASTPATH_RETURN_IF_ERROR(CheckKeysUnique(entry.second, walked));
  }
  return Status::Ok();
}

StatusOr<YAML::Node> LoadOneDocument(std::string_view text) {
  const std::vector<YAML::Node> documents = YAML::LoadAll(std::string(text));
  if (documents.empty()) return YAML::Node();
  if (documents.size() > 1) {
    // yaml-cpp also starts a document where a top-level block ends and another kind begins.
    return ErrorAt(documents[1].Mark(),
                   "a second document, or a line outside the block above: a rule file is one "
                   "document");
  }
  std::set<std::pair<int, int>> walked;
  FASTPATH_RETURN_IF_ERROR(CheckKeysUnique(documents[0], walked));
  return documents[0];
}

// Prometheus' duration: "0", or whole numbers each with a unit, largest first ("1h30m").
bool IsPrometheusDuration(std::string_view text) {
  if (text == "0") return true;
  static constexpr std::string_view kUnits[] = {"y", "w", "d", "h", "m", "s", "ms"};
  size_t next_unit = 0;  // units must come largest first, each at most once
  size_t i = 0;
  while (i < text.size()) {
    const size_t digits = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    if (i == digits) return false;
    size_t unit = next_unit;
    // "ms" before "m": the longer unit where both fit.
    while (unit < std::size(kUnits)) {
      const std::string_view u = kUnits[unit];
      const bool longer_fits = u == "m" && text.substr(i, 2) == "ms";
      if (!longer_fits && text.substr(i, u.size()) == u) break;
      ++unit;
    }
    if (unit == std::size(kUnits)) return false;
    i += kUnits[unit].size();
    next_unit = unit + 1;
  }
  return !text.empty();
}

// Prometheus reads rule files strictly: a key it does not know refuses the whole file.
Status CheckKnownKeys(const YAML::Node& map, std::initializer_list<std::string_view> known,
                      const std::string& where) {
  for (const auto& entry : map) {
    if (!entry.first.IsScalar()) continue;
    const std::string& key = entry.first.Scalar();
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string list;
    for (std::string_view k : known) list += std::string(list.empty() ? "" : ", ") + std::string(k);
    return ErrorAt(entry.first.Mark(), "unknown key '" + key + "' in " + where +
                                           " (Prometheus refuses the file; known: " + list + ")");
  }
  return Status::Ok();
}

StatusOr<AlertRule> ReadRule(const YAML::Node& r, const std::string& group) {
  if (!r.IsMap()) {
    return ErrorAt(r.Mark(),
                   "a rule of group '" + group + "' is " + KindName(r) + ", not a mapping");
  }
  AlertRule rule;
  rule.group = group;
  rule.line = r.Mark().line + 1;
  const bool alert = r["alert"].IsDefined();
  if (alert == r["record"].IsDefined()) {
    return ErrorAt(r.Mark(), "a rule needs exactly one of 'alert' and 'record'");
  }
  (alert ? rule.name : rule.record) = ScalarOf(r, alert ? "alert" : "record");
  rule.expr = ScalarOf(r, "expr");
  const std::string& name = alert ? rule.name : rule.record;
  // As Prometheus reads it: an empty or null name is no name ("one of 'record' or 'alert'
  // must be set").
  if (name.empty()) {
    return ErrorAt(KeyMark(r, alert ? "alert" : "record"),
                   std::string("a rule's '") + (alert ? "alert" : "record") + "' is empty");
  }
  FASTPATH_RETURN_IF_ERROR(CheckKnownKeys(
      r, {"alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"},
      "rule '" + name + "'"));
  if (rule.expr.empty()) return ErrorAt(r.Mark(), "rule '" + name + "' has no 'expr'");
  for (const char* key : {"for", "keep_firing_for"}) {
    if (!r[key].IsDefined()) continue;
    const std::string value = ScalarOf(r, key);
    if (!IsPrometheusDuration(value)) {
      return ErrorAt(KeyMark(r, key), "rule '" + name + "': '" + key + ": " + value +
                                          "' is not a Prometheus duration (e.g. 5m, 1h30m)");
    }
  }
  // Prometheus reads both as maps of strings, and refuses the file otherwise.
  for (const char* key : {"labels", "annotations"}) {
    const YAML::Node value = Get(r, key);
    if (!value.IsDefined() || value.IsNull()) continue;
    bool strings = value.IsMap();
    if (strings) {
      for (const auto& entry : value) strings = strings && entry.second.IsScalar();
    }
    if (!strings) {
      return ErrorAt(KeyMark(r, key),
                     "rule '" + name + "': '" + key + "' is not a mapping of names to strings");
    }
  }
  return rule;
}

// ParseAlertRules, but for what yaml-cpp throws.
StatusOr<std::vector<AlertRule>> ReadRules(std::string_view text) {
  FASTPATH_ASSIGN_OR_RETURN(const YAML::Node root, LoadOneDocument(text));
  if (!root.IsMap()) {
    return InvalidArgument("the file is " + std::string(KindName(root)) +
                           ", not a mapping with 'groups'");
  }
  // A PrometheusRule object (the Prometheus Operator) holds the groups under spec.
  const YAML::Node spec = Get(root, "spec");
  const YAML::Node holder = root["groups"].IsDefined() || !spec.IsMap() ? root : spec;
  const YAML::Node groups = holder["groups"];
  if (!groups.IsDefined()) {
    return InvalidArgument("no 'groups' (nor spec.groups of a PrometheusRule): not a rule file");
  }
  if (!groups.IsSequence()) {
    return ErrorAt(KeyMark(holder, "groups"),
                   "'groups' is " + std::string(KindName(groups)) + ", not a sequence");
  }
  FASTPATH_RETURN_IF_ERROR(
      CheckKnownKeys(holder, {"groups"}, holder.is(root) ? "the file" : "spec"));
  std::vector<AlertRule> rules;
  std::set<std::string> names;
  for (const YAML::Node& group : groups) {
    if (!group.IsMap()) {
      return ErrorAt(group.Mark(),
                     "a group is " + std::string(KindName(group)) + ", not a mapping");
    }
    const std::string name = ScalarOf(group, "name");
    if (name.empty()) return ErrorAt(group.Mark(), "a group without a 'name'");
    FASTPATH_RETURN_IF_ERROR(
        // partial_response_strategy: Thanos Ruler's, which the Prometheus Operator passes on.
        CheckKnownKeys(group,
                       {"name", "interval", "query_offset", "limit", "labels", "rules",
                        "partial_response_strategy"},
                       "group '" + name + "'"));
    // Prometheus refuses the whole file for it, and then none of its alerts is loaded.
    if (!names.insert(name).second) {
      return ErrorAt(group.Mark(), "group name '" + name + "' is repeated in the file");
    }
    if (group["interval"].IsDefined() && !IsPrometheusDuration(ScalarOf(group, "interval"))) {
      return ErrorAt(KeyMark(group, "interval"),
                     "group '" + name + "': 'interval: " + ScalarOf(group, "interval") +
                         "' is not a Prometheus duration");
    }
    const YAML::Node list = Get(group, "rules");
    if (!list.IsSequence()) {
      return ErrorAt(group.Mark(), "group '" + name + "' has no 'rules' sequence");
    }
    for (const YAML::Node& r : list) {
      FASTPATH_ASSIGN_OR_RETURN(AlertRule rule, ReadRule(r, name));
      rules.push_back(std::move(rule));
    }
  }
  return rules;
}

}  // namespace

StatusOr<std::vector<AlertRule>> ParseAlertRules(std::string_view text) {
  try {
    return ReadRules(text);
  } catch (const YAML::Exception& e) {
    if (!e.mark.is_null() && TabIndented(text, e.mark.line)) {
      return ErrorAt(e.mark, "a tab in the indentation (YAML indents with spaces only)");
    }
    return ErrorAt(e.mark, e.msg);
  }
}

}  // namespace fastpath::cli::preflight
