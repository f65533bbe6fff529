// A minimal XML well-formedness check for the SVG writers' tests (report_test.cc,
// soak_test.cc): balanced tags, quoted attributes, known entities only, one root. Enough to
// catch what a hand-written SVG writer can break.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <regex>
#include <string>
#include <vector>

namespace fastpath::bench {

// `elements` gets every element name, in document order.
inline ::testing::AssertionResult WellFormedXml(const std::string& xml,
                                                std::vector<std::string>* elements) {
  std::vector<std::string> stack;
  size_t i = 0;
  int roots = 0;
  auto check_text = [&](const std::string& text) -> bool {
    for (size_t k = 0; k < text.size(); ++k) {
      if (text[k] == '<') return false;
      if (text[k] == '&') {
        static const char* kEntities[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
        bool ok = false;
        for (const char* e : kEntities) ok = ok || text.compare(k, std::strlen(e), e) == 0;
        if (!ok) return false;
      }
    }
    return true;
  };
  if (xml.rfind("<?xml", 0) == 0) i = xml.find("?>") + 2;
  while (i < xml.size()) {
    const size_t lt = xml.find('<', i);
    const std::string text = xml.substr(i, lt == std::string::npos ? std::string::npos : lt - i);
    if (!check_text(text)) return ::testing::AssertionFailure() << "bad text near offset " << i;
    if (lt == std::string::npos) break;
    const size_t gt = xml.find('>', lt);
    if (gt == std::string::npos) return ::testing::AssertionFailure() << "unclosed tag at " << lt;
    std::string tag = xml.substr(lt + 1, gt - lt - 1);
    i = gt + 1;
    if (tag.empty()) return ::testing::AssertionFailure() << "empty tag at " << lt;
    if (tag[0] == '/') {
      if (stack.empty() || stack.back() != tag.substr(1)) {
        return ::testing::AssertionFailure() << "</" << tag.substr(1) << "> closes "
                                             << (stack.empty() ? "nothing" : stack.back());
      }
      stack.pop_back();
      continue;
    }
    const bool self_closing = tag.back() == '/';
    if (self_closing) tag.pop_back();
    const std::string name = tag.substr(0, tag.find_first_of(" \n\t"));
    // Attributes: name="value" pairs, values free of '<' and with valid entities.
    std::string rest = tag.substr(name.size());
    static const std::regex kAttr(R"re(^\s*([A-Za-z_:][-A-Za-z0-9_:.]*)="([^"]*)")re");
    std::smatch m;
    while (std::regex_search(rest, m, kAttr)) {
      if (!check_text(m[2].str()))
        return ::testing::AssertionFailure() << "bad attribute value in <" << name << ">";
      rest = m.suffix().str();
    }
    if (rest.find_first_not_of(" \n\t") != std::string::npos) {
      return ::testing::AssertionFailure()
             << "malformed attributes in <" << name << ">: '" << rest << "'";
    }
    if (stack.empty()) ++roots;
    elements->push_back(name);
    if (!self_closing) stack.push_back(name);
  }
  if (!stack.empty())
    return ::testing::AssertionFailure() << "<" << stack.back() << "> never closed";
  if (roots != 1) return ::testing::AssertionFailure() << roots << " root elements";
  return ::testing::AssertionSuccess();
}

}  // namespace fastpath::bench
