// The alert rule files' reader (preflight's item 5a): the repository's own rule file, the
// YAML a rule file may be written in, and what it must refuse, each error with its line.
#include "rules_yaml.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

namespace fastpath::cli::preflight {
namespace {

using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The error of a text that must be refused.
std::string ErrorOf(const std::string& text) {
  const auto rules = ParseAlertRules(text);
  if (rules.ok()) return "(accepted)";
  EXPECT_EQ(rules.status().code(), StatusCode::kInvalidArgument);
  return rules.status().message();
}

TEST(RulesYamlTest, ReadsTheShippedRuleFile) {
  const std::string text = ReadAll(FASTPATH_SOURCE_DIR "/deploy/prometheus/fastpath-rules.yaml");
  ASSERT_FALSE(text.empty());
  // Every "- alert: Name" line of the file, with its line number, read here without YAML.
  std::vector<std::pair<std::string, int>> expected;
  std::istringstream lines(text);
  const std::regex alert_line(R"(^\s*- alert: (\w+)\s*$)");
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    std::smatch match;
    if (std::regex_match(line, match, alert_line)) expected.emplace_back(match[1], number);
  }
  ASSERT_GE(expected.size(), 11u);

  const auto rules = ParseAlertRules(text);
  ASSERT_TRUE(rules.ok()) << rules.status().message();
  ASSERT_EQ(rules->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ((*rules)[i].name, expected[i].first);
    EXPECT_EQ((*rules)[i].line, expected[i].second) << expected[i].first;
    EXPECT_FALSE((*rules)[i].expr.empty()) << expected[i].first;
    EXPECT_TRUE((*rules)[i].record.empty());
  }
  EXPECT_EQ(rules->front().group, "fastpath");
}

TEST(RulesYamlTest, ReadsThePrometheusRuleObjectsSpec) {
  const auto rules = ParseAlertRules(
      "apiVersion: monitoring.coreos.com/v1\n"
      "kind: PrometheusRule\n"
      "metadata:\n"
      "  name: fastpath\n"
      "spec:\n"
      "  groups:\n"
      "    - name: g\n"
      "      rules:\n"
      "        - alert: A\n"
      "          expr: up == 0\n");
  ASSERT_TRUE(rules.ok()) << rules.status().message();
  ASSERT_EQ(rules->size(), 1u);
  EXPECT_EQ((*rules)[0].group, "g");
  EXPECT_EQ((*rules)[0].name, "A");
  EXPECT_EQ((*rules)[0].expr, "up == 0");
  EXPECT_EQ((*rules)[0].line, 9);
}

TEST(RulesYamlTest, ReadsBlockAndFlowScalarsQuotingCommentsAndCompactLists) {
  const auto rules = ParseAlertRules(
      "---\n"
      "# a comment line\n"
      "groups:   # a trailing comment\n"
      "- name: 'single # not a comment'\n"  // a compact sequence, at the key's column
      "  rules:\n"
      "  - record: job:up:sum\n"
      "    expr: sum by (job) (up)\n"
      "  - alert: Literal\n"
      "    expr: |\n"
      "      sum(rate(x[5m]))\n"
      "\n"
      "        > 0  # inside a block scalar: text\n"
      "    labels: {severity: page, team: \"a, b\"}\n"
      "  - alert: \"Folded\"\n"
      "    expr: >-\n"
      "      a\n"
      "      > b\n"
      "    annotations:\n"
      "      summary: \"it's \\\"quoted\\\"\\tand escaped\"\n"
      "      description: 'it''s doubled'\n"
      "  - alert: Plain\n"
      "    expr: rate(y[5m])\n"
      "      > 0.5\n"
      "  - {alert: Flow, expr: \"up\n"
      "      == 0\"}\n");
  ASSERT_TRUE(rules.ok()) << rules.status().message();
  ASSERT_EQ(rules->size(), 5u);
  const auto& r = *rules;
  EXPECT_EQ(r[0].group, "single # not a comment");
  EXPECT_EQ(r[0].record, "job:up:sum");
  EXPECT_EQ(r[0].name, "");
  EXPECT_EQ(r[0].line, 6);
  EXPECT_EQ(r[1].name, "Literal");
  EXPECT_EQ(r[1].expr, "sum(rate(x[5m]))\n\n  > 0  # inside a block scalar: text\n");
  EXPECT_EQ(r[2].name, "Folded");
  EXPECT_EQ(r[2].expr, "a > b");
  EXPECT_EQ(r[3].expr, "rate(y[5m]) > 0.5");
  EXPECT_EQ(r[4].name, "Flow");
  EXPECT_EQ(r[4].expr, "up == 0");  // a quoted scalar over two lines
  EXPECT_EQ(r[4].line, 24);
}

TEST(RulesYamlTest, AcceptsWhatPrometheusAccepts) {
  // An anchor and its alias, and an explicit tag.
  const auto rules = ParseAlertRules(
      "groups:\n"
      "  - name: g\n"
      "    rules:\n"
      "      - alert: A\n"
      "        expr: !!str up == 0\n"
      "        labels: &labels {severity: page}\n"
      "      - alert: B\n"
      "        expr: up == 1\n"
      "        labels: *labels\n");
  ASSERT_TRUE(rules.ok()) << rules.status().message();
  ASSERT_EQ(rules->size(), 2u);
  EXPECT_EQ((*rules)[0].expr, "up == 0");
  // A group without rules yet, and an empty file's groups.
  const auto empty = ParseAlertRules("groups:\n  - name: g\n    rules: []\n");
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_TRUE(empty->empty());
  EXPECT_TRUE(ParseAlertRules("groups: []\n").ok());
}

TEST(RulesYamlTest, RefusesWhatIsNotYamlWithItsLine) {
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    rules:\n\t- alert: A\n"),
              HasSubstr("line 4: a tab in the indentation"));
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n   rules: []\n"), HasSubstr("line 3: "));
  EXPECT_THAT(ErrorOf("groups: [\n  {name: g}\n"), HasSubstr("line 3: "));
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    rules: []\n  - name: g\n    name: h\n"),
              HasSubstr("line 5: the key 'name' twice in one mapping"));
  // Deep in a rule's labels too, as Prometheus refuses it.
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up\n"
                      "        labels:\n          a: 1\n          a: 2\n"),
              HasSubstr("line 8: the key 'a' twice"));
  EXPECT_THAT(ErrorOf("groups: []\n---\ngroups: []\n"), HasSubstr("line 3: a second document"));
  EXPECT_THAT(ErrorOf("- a\ngroups: []\n"), HasSubstr("line 2: "));
  // An alias of the node it is in is walked once, not forever.
  EXPECT_THAT(ErrorOf("groups: &g [*g]\n"), HasSubstr("a group is a sequence"));
}

TEST(RulesYamlTest, RefusesWhatIsNotARuleFileWithItsLine) {
  EXPECT_THAT(ErrorOf(""), HasSubstr("the file is empty, not a mapping with 'groups'"));
  EXPECT_THAT(ErrorOf("# only a comment\n"), HasSubstr("the file is empty"));
  EXPECT_THAT(ErrorOf("- groups\n"), HasSubstr("the file is a sequence"));
  EXPECT_THAT(ErrorOf("rules:\n  - alert: X\n"), HasSubstr("no 'groups'"));
  EXPECT_THAT(ErrorOf("spec:\n  rules: []\n"), HasSubstr("no 'groups'"));
  EXPECT_THAT(ErrorOf("groups:\n  name: g\n"), HasSubstr("line 1: 'groups' is a mapping"));
  EXPECT_THAT(ErrorOf("groups:\nother: 1\n"), HasSubstr("line 1: 'groups' is empty"));
  EXPECT_THAT(ErrorOf("groups:\n  - g\n"), HasSubstr("line 2: a group is a scalar"));
  EXPECT_THAT(ErrorOf("groups:\n  - rules: []\n"), HasSubstr("line 2: a group without a 'name'"));
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n"), HasSubstr("line 2: group 'g' has no 'rules'"));
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    rules:\n"), HasSubstr("group 'g' has no 'rules'"));
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    rules:\n      - up == 0\n"),
              HasSubstr("line 4: a rule of group 'g' is a scalar"));
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    rules:\n      - expr: up\n"),
              HasSubstr("line 4: a rule needs exactly one of 'alert' and 'record'"));
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    rules:\n      - alert: A\n        record: r\n"
                      "        expr: up\n"),
              HasSubstr("line 4: a rule needs exactly one"));
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    rules:\n      - alert: A\n        for: 5m\n"),
              HasSubstr("line 4: rule 'A' has no 'expr'"));
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    rules:\n      - record: r\n        expr: \"\"\n"),
              HasSubstr("line 4: rule 'r' has no 'expr'"));
  // What promtool refuses, and Prometheus with it (then none of the file's alerts loads).
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    rules: []\n  - name: g\n    rules: []\n"),
              HasSubstr("line 4: group name 'g' is repeated in the file"));
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up\n"
                      "        for: 5 minutes\n"),
              HasSubstr("line 6: rule 'A': 'for: 5 minutes' is not a Prometheus duration"));
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up\n"
                      "        keep_firing_for: 30m1h\n"),
              HasSubstr("'keep_firing_for: 30m1h' is not a Prometheus duration"));
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    interval: 1.5m\n    rules: []\n"),
              HasSubstr("line 3: group 'g': 'interval: 1.5m' is not a Prometheus duration"));
  // Prometheus reads rule files strictly: a misspelt key refuses the whole file.
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up\n"
                      "        lables: {x: y}\n"),
              HasSubstr("line 6: unknown key 'lables' in rule 'A' (Prometheus refuses the file"));
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    rule: []\n"),
              HasSubstr("line 3: unknown key 'rule' in group 'g'"));
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    rules: []\nbogus_top: 1\n"),
              HasSubstr("line 4: unknown key 'bogus_top' in the file"));
  EXPECT_THAT(ErrorOf("kind: PrometheusRule\nspec:\n  groups: []\n  extra: 1\n"),
              HasSubstr("unknown key 'extra' in spec"));
  // An empty name is none to Prometheus; labels and annotations are maps of strings.
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    rules:\n      - alert: \"\"\n        expr: up\n"),
              HasSubstr("line 4: a rule's 'alert' is empty"));
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    rules:\n      - alert:\n        expr: up\n"),
              HasSubstr("a rule's 'alert' is empty"));
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up\n"
                      "        labels:\n          - severity: page\n"),
              HasSubstr("line 6: rule 'A': 'labels' is not a mapping of names to strings"));
  EXPECT_THAT(ErrorOf("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up\n"
                      "        annotations: {summary: {x: y}}\n"),
              HasSubstr("'annotations' is not a mapping of names to strings"));
}

TEST(RulesYamlTest, AcceptsPrometheusDurations) {
  for (const char* d : {"0", "5m", "1h30m", "500ms", "1m500ms", "2w", "1y2d", "90s"}) {
    const auto rules = ParseAlertRules(
        std::string("groups:\n  - name: g\n    interval: ") + d +
        "\n    rules:\n      - alert: A\n        expr: up\n        for: " + d + "\n");
    EXPECT_TRUE(rules.ok()) << d << ": " << rules.status().message();
  }
}

}  // namespace
}  // namespace fastpath::cli::preflight
