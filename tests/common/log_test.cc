#include "fastpath/common/log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <limits>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fastpath::log {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Captures the process logger's lines and restores it afterwards.
class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = CurrentOptions();
    SetOutputForTesting(&out_);
  }
  void TearDown() override {
    SetOutputForTesting(nullptr);
    Configure(saved_);
  }

  std::vector<std::string> Lines() const {
    std::vector<std::string> lines;
    std::istringstream in(out_.str());
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  // The one JSON line written, parsed.
  rapidjson::Document OneJsonLine() const {
    const std::vector<std::string> lines = Lines();
    EXPECT_EQ(lines.size(), 1u) << out_.str();
    rapidjson::Document doc;
    if (lines.empty()) return doc;
    doc.Parse(lines[0].c_str(), lines[0].size());
    EXPECT_FALSE(doc.HasParseError()) << rapidjson::GetParseError_En(doc.GetParseError()) << " at "
                                      << doc.GetErrorOffset() << " in: " << lines[0];
    EXPECT_TRUE(doc.IsObject()) << lines[0];
    return doc;
  }

  std::ostringstream out_;
  Options saved_;
};

TEST(LogNames, LevelsAndFormatsRoundTrip) {
  for (Level level : {Level::kTrace, Level::kDebug, Level::kInfo, Level::kWarn, Level::kError}) {
    auto parsed = ParseLevel(LevelName(level));
    ASSERT_TRUE(parsed.ok()) << LevelName(level);
    EXPECT_EQ(*parsed, level);
  }
  EXPECT_EQ(LevelName(Level::kWarn), "warn");
  for (Format format : {Format::kText, Format::kJson}) {
    auto parsed = ParseFormat(FormatName(format));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, format);
  }
}

TEST(LogNames, BadValuesNameTheFlag) {
  auto level = ParseLevel("warning");
  ASSERT_FALSE(level.ok());
  EXPECT_EQ(level.status().message(),
            "--log-level must be trace, debug, info, warn or error, not 'warning'");
  auto format = ParseFormat("xml");
  ASSERT_FALSE(format.ok());
  EXPECT_EQ(format.status().message(), "--log-format must be text or json, not 'xml'");
}

TEST_F(LogTest, TextLineHasTimestampLevelNameAndMessage) {
  Configure({Level::kInfo, Format::kText, "fastpath serve"});
  Info("model 'mlp' version 1 is READY");
  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(std::regex_match(
      lines[0], std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z info  fastpath serve: )"
                           R"(model 'mlp' version 1 is READY)")))
      << lines[0];
}

TEST_F(LogTest, LevelFilteringDropsLinesBelowTheLevel) {
  Configure({Level::kWarn, Format::kText, "t"});
  EXPECT_FALSE(Enabled(Level::kInfo));
  EXPECT_TRUE(Enabled(Level::kWarn));
  Trace("trace line");
  Debug("debug line");
  Info("info line");
  Warn("warn line");
  Error("error line");
  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 2u) << out_.str();
  EXPECT_THAT(lines[0], HasSubstr("Z warn  t: warn line"));
  EXPECT_THAT(lines[1], HasSubstr("Z error t: error line"));

  out_.str("");
  Configure({Level::kTrace, Format::kText, "t"});
  Trace("trace line");
  Debug("debug line");
  ASSERT_EQ(Lines().size(), 2u) << out_.str();
  EXPECT_THAT(Lines()[0], HasSubstr("Z trace t: trace line"));
  EXPECT_THAT(Lines()[1], HasSubstr("Z debug t: debug line"));

  out_.str("");
  Configure({Level::kError, Format::kJson, "t"});
  Warn("dropped");
  Error("kept");
  EXPECT_STREQ(OneJsonLine()["msg"].GetString(), "kept");
}

TEST_F(LogTest, TextKeepsMultiLineMessagesAndAppendsFields) {
  Configure({Level::kInfo, Format::kText, "fastpath"});
  Error("refusing to start:\n  cuda_driver: expected 13.0, found 12.4\n(exit 20)",
        {{"model", "mlp"}, {"version", 3}, {"path", "a b"}, {"ok", false}});
  EXPECT_THAT(out_.str(),
              HasSubstr("fastpath: refusing to start:\n  cuda_driver: expected 13.0, found 12.4\n"
                        "(exit 20) model=mlp version=3 path=\"a b\" ok=false\n"));
}

TEST_F(LogTest, JsonLineHasTsLevelMsgAndTypedFields) {
  Configure({Level::kInfo, Format::kJson, "fastpath serve"});
  Warn("model 'cnn' is DEGRADED", {{"model", std::string("cnn")},
                                   {"version", int64_t{2}},
                                   {"bytes", uint64_t{1} << 40},
                                   {"p95_ms", 1.5},
                                   {"ready", true},
                                   {"msg", "a field named like the message"}});
  const rapidjson::Document doc = OneJsonLine();
  ASSERT_TRUE(doc.IsObject());
  EXPECT_TRUE(std::regex_match(doc["ts"].GetString(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
      << doc["ts"].GetString();
  EXPECT_STREQ(doc["level"].GetString(), "warn");
  EXPECT_STREQ(doc["msg"].GetString(), "model 'cnn' is DEGRADED");
  EXPECT_STREQ(doc["model"].GetString(), "cnn");
  EXPECT_EQ(doc["version"].GetInt64(), 2);
  EXPECT_EQ(doc["bytes"].GetUint64(), uint64_t{1} << 40);
  EXPECT_DOUBLE_EQ(doc["p95_ms"].GetDouble(), 1.5);
  EXPECT_TRUE(doc["ready"].GetBool());
  EXPECT_STREQ(doc["field_msg"].GetString(), "a field named like the message");
  std::vector<std::string> keys;
  for (const auto& member : doc.GetObject()) keys.push_back(member.name.GetString());
  EXPECT_THAT(keys, ElementsAre("ts", "level", "msg", "model", "version", "bytes", "p95_ms",
                                "ready", "field_msg"));
}

TEST_F(LogTest, JsonEscapesQuotesNewlinesAndControlCharacters) {
  Configure({Level::kInfo, Format::kJson, "t"});
  const std::string message = std::string("say \"hi\"\\ now\nnext\tline\r\b\f") + '\x01' + '\x1f' +
                              std::string(1, '\0') + "end {} %v";
  Info(message, {{"key \"q\"\n", "v\x02"}});
  const std::string line = out_.str();
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << "one physical line: " << line;
  EXPECT_THAT(line, HasSubstr(R"(say \"hi\"\\ now\nnext\tline\r\b\f\u0001\u001f\u0000end {} %v)"));
  const rapidjson::Document doc = OneJsonLine();
  ASSERT_TRUE(doc.IsObject());
  EXPECT_EQ(std::string(doc["msg"].GetString(), doc["msg"].GetStringLength()), message);
  EXPECT_STREQ(doc["key \"q\"\n"].GetString(), "v\x02");
}

TEST_F(LogTest, JsonKeepsUtf8AndReplacesInvalidBytes) {
  Configure({Level::kInfo, Format::kJson, "t"});
  // Valid: é (2 bytes), € (3), 𝄞 (4). Invalid: a lone continuation byte, an overlong '/',
  // a UTF-16 surrogate, a truncated sequence at the end.
  Info("caf\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e | \x80 \xc0\xaf \xed\xa0\x80 \xe2\x82");
  const rapidjson::Document doc = OneJsonLine();
  ASSERT_TRUE(doc.IsObject());
  EXPECT_EQ(std::string(doc["msg"].GetString()),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e | \xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd "
            "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd");
}

TEST_F(LogTest, TextReplacesInvalidBytesInTheMessageAndInFields) {
  Configure({Level::kInfo, Format::kText, "t"});
  Info(
      "unknown model 'ab\xff"
      "cd' (caf\xc3\xa9)",
      {{"path", "/m/bad\xc0\xaf"}, {"ok", "\xc3\xa9t\xc3\xa9"}});
  EXPECT_THAT(out_.str(),
              HasSubstr("t: unknown model 'ab\xef\xbf\xbd"
                        "cd' (caf\xc3\xa9) "
                        "path=\"/m/bad\\ufffd\\ufffd\" ok=\xc3\xa9t\xc3\xa9\n"));
}

TEST_F(LogTest, JsonWritesNonFiniteNumbersAsNull) {
  Configure({Level::kInfo, Format::kJson, "t"});
  Info("m", {{"nan", std::numeric_limits<double>::quiet_NaN()},
             {"inf", std::numeric_limits<double>::infinity()}});
  const rapidjson::Document doc = OneJsonLine();
  ASSERT_TRUE(doc.IsObject());
  EXPECT_TRUE(doc["nan"].IsNull());
  EXPECT_TRUE(doc["inf"].IsNull());
}

TEST_F(LogTest, ConfigureIsSeenByCurrentOptions) {
  Configure({Level::kDebug, Format::kJson, "fastpath doctor"});
  const Options now = CurrentOptions();
  EXPECT_EQ(now.level, Level::kDebug);
  EXPECT_EQ(now.format, Format::kJson);
  EXPECT_EQ(now.name, "fastpath doctor");
}

TEST_F(LogTest, PercentInTheNameIsLiteral) {
  Configure({Level::kInfo, Format::kText, "100%v"});
  Info("m");
  EXPECT_THAT(out_.str(), HasSubstr("Z info  100%v: m\n"));
}

}  // namespace
}  // namespace fastpath::log
