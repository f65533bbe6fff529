// Reading a JSON document that came from outside (a file, another server's answer) with
// RapidJSON. Its default parser recurses once per level of nesting, and so do a writer's
// Accept and any walk of the document, so a few hundred kilobytes of '[' overflow the stack.
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fastpath::json {

// Deeper than anything fastpath reads or writes.
inline constexpr size_t kMaxDepth = 256;

// Parses `text` into `doc` without recursing. Returns "" for JSON nested at most kMaxDepth
// deep; otherwise why not ("Invalid value. (at byte 3)", "nested deeper than 256 levels, more
// than fastpath reads"), and `doc` is null.
inline std::string ParseBounded(rapidjson::Document* doc, std::string_view text) {
  doc->Parse<rapidjson::kParseIterativeFlag>(text.data(), text.size());
  if (doc->HasParseError()) {
    std::string error = std::string(rapidjson::GetParseError_En(doc->GetParseError())) +
                        " (at byte " + std::to_string(doc->GetErrorOffset()) + ")";
    doc->SetNull();
    return error;
  }
  std::vector<std::pair<const rapidjson::Value*, size_t>> pending{{doc, 1}};
  while (!pending.empty()) {
    const auto [value, depth] = pending.back();
    pending.pop_back();
    if (depth > kMaxDepth) {
      doc->SetNull();  // the memory pool frees it all at once, without a recursion
      return "nested deeper than " + std::to_string(kMaxDepth) +
             " levels, more than fastpath reads";
    }
    if (value->IsArray()) {
      for (const auto& item : value->GetArray()) pending.emplace_back(&item, depth + 1);
    } else if (value->IsObject()) {
      for (const auto& member : value->GetObject()) pending.emplace_back(&member.value, depth + 1);
    }
  }
  return "";
}

}  // namespace fastpath::json
