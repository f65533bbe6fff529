#include "fastpath/admission/snapshot_diff.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "fastpath/common/json.h"

namespace fastpath::admission {
namespace {

// Leaves in document order: path -> the value as compact JSON text.
using Leaves = std::vector<std::pair<std::string, std::string>>;

std::string ToText(const rapidjson::Value& value) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  value.Accept(w);
  return std::string(buffer.GetString(), buffer.GetSize());
}

bool NamedObjects(const rapidjson::Value& array) {
  if (array.Empty()) return false;
  for (const auto& item : array.GetArray()) {
    if (!item.IsObject()) return false;
    auto name = item.FindMember("name");
    if (name == item.MemberEnd() || !name->value.IsString()) return false;
  }
  return true;
}

// Each leaf under `value`, its path made of object keys and array keys: an array of objects
// that all have a "name" is keyed by name, so that a reordered list (the CUDA libraries
// found) is no difference; items sharing a name (identical GPUs) are told apart by their
// turn among those, "NVIDIA H100 #2". An error names a key an object repeats.
std::string Flatten(const rapidjson::Value& value, const std::string& path, Leaves* out) {
  if (value.IsObject() && value.MemberCount() > 0) {
    std::set<std::string> keys;
    for (auto it = value.MemberBegin(); it != value.MemberEnd(); ++it) {
      const std::string key(it->name.GetString(), it->name.GetStringLength());
      if (!keys.insert(key).second) {
        return "\"" + key + "\" appears twice in " + (path.empty() ? "the document" : path);
      }
      if (std::string error = Flatten(it->value, path.empty() ? key : path + "." + key, out);
          !error.empty()) {
        return error;
      }
    }
  } else if (value.IsArray() && !value.Empty()) {
    const bool named = NamedObjects(value);
    std::map<std::string, int> named_count;
    if (named) {
      for (const auto& item : value.GetArray()) {
        ++named_count[std::string(item["name"].GetString(), item["name"].GetStringLength())];
      }
    }
    std::map<std::string, int> turn;
    for (rapidjson::SizeType i = 0; i < value.Size(); ++i) {
      std::string index = std::to_string(i);
      if (named) {
        index.assign(value[i]["name"].GetString(), value[i]["name"].GetStringLength());
        if (named_count[index] > 1) index += " #" + std::to_string(++turn[index]);
      }
      if (std::string error = Flatten(value[i], path + "[" + index + "]", out); !error.empty()) {
        return error;
      }
    }
  } else {
    out->emplace_back(path.empty() ? "(document)" : path, ToText(value));
  }
  return "";
}

// What every `fastpath doctor --json` output has at its top; a file with none is not one.
constexpr const char* kSnapshotKeys[] = {"fastpath_version", "ort_version", "driver", "nvml",
                                         "libraries"};

StatusOr<Leaves> Parse(const std::string& text, const std::string& name) {
  rapidjson::Document doc;
  if (const std::string error = json::ParseBounded(&doc, text); !error.empty()) {
    return InvalidArgument(name + " is not valid JSON: " + error);
  }
  if (!doc.IsObject())
    return InvalidArgument(name +
                           " is not a JSON object (expected `fastpath doctor --json` output)");
  // Any object was flattened: {} against a snapshot listed every field "removed" (exit 1,
  // as a node that changed), and two unrelated files compared "equal".
  const bool snapshot = std::any_of(std::begin(kSnapshotKeys), std::end(kSnapshotKeys),
                                    [&](const char* key) { return doc.HasMember(key); });
  if (!snapshot) {
    return InvalidArgument(name +
                           " has none of a snapshot's keys (fastpath_version, ort_version, "
                           "driver, nvml, libraries): not `fastpath doctor --json` output");
  }
  Leaves leaves;
  if (const std::string error = Flatten(doc, "", &leaves); !error.empty()) {
    return InvalidArgument(name + ": " + error);
  }
  return leaves;
}

}  // namespace

StatusOr<std::vector<SnapshotChange>> DiffSnapshots(const std::string& a, const std::string& name_a,
                                                    const std::string& b,
                                                    const std::string& name_b) {
  FASTPATH_ASSIGN_OR_RETURN(const Leaves before, Parse(a, name_a));
  FASTPATH_ASSIGN_OR_RETURN(const Leaves after, Parse(b, name_b));
  std::map<std::string, const std::string*> after_by_path;
  for (const auto& [path, value] : after) after_by_path[path] = &value;
  std::map<std::string, bool> in_before;

  std::vector<SnapshotChange> changes;
  for (const auto& [path, value] : before) {
    in_before[path] = true;
    auto it = after_by_path.find(path);
    if (it == after_by_path.end()) {
      changes.push_back({SnapshotChange::Kind::kRemoved, path, value, ""});
    } else if (*it->second != value) {
      changes.push_back({SnapshotChange::Kind::kChanged, path, value, *it->second});
    }
  }
  for (const auto& [path, value] : after) {
    if (!in_before.count(path)) changes.push_back({SnapshotChange::Kind::kAdded, path, "", value});
  }
  return changes;
}

std::string RenderChanges(const std::vector<SnapshotChange>& changes, const std::string& name_a,
                          const std::string& name_b) {
  if (changes.empty()) return "no differences between " + name_a + " and " + name_b + "\n";
  size_t width = 4;
  for (const SnapshotChange& c : changes) width = std::max(width, c.path.size());
  std::string out = std::to_string(changes.size()) + " difference" +
                    (changes.size() == 1 ? "" : "s") + " from " + name_a + " to " + name_b + ":\n";
  auto pad = [](std::string text, size_t n) {
    if (text.size() < n) text.resize(n, ' ');
    return text;
  };
  out += "  " + pad("", 9) + pad("path", width) + "  before -> after\n";
  for (const SnapshotChange& c : changes) {
    const char* kind = c.kind == SnapshotChange::Kind::kAdded     ? "added"
                       : c.kind == SnapshotChange::Kind::kRemoved ? "removed"
                                                                  : "changed";
    out += "  " + pad(kind, 9) + pad(c.path, width) + "  " +
           (c.kind == SnapshotChange::Kind::kAdded ? "(absent)" : c.before) + " -> " +
           (c.kind == SnapshotChange::Kind::kRemoved ? "(absent)" : c.after) + "\n";
  }
  return out;
}

}  // namespace fastpath::admission
