#include "fastpath/common/json.h"

#include <gtest/gtest.h>

#include <string>

namespace fastpath::json {
namespace {

std::string Nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonTest, ParsesUpToTheDepthLimitAndRefusesPastIt) {
  rapidjson::Document doc;
  EXPECT_EQ(ParseBounded(&doc, Nested(kMaxDepth)), "");
  EXPECT_TRUE(doc.IsArray());
  EXPECT_EQ(ParseBounded(&doc, Nested(kMaxDepth + 1)),
            "nested deeper than 256 levels, more than fastpath reads");
  EXPECT_TRUE(doc.IsNull());
  // Objects count as levels too.
  std::string objects;
  for (size_t i = 0; i <= kMaxDepth; ++i) objects += "{\"a\":";
  objects += "1" + std::string(kMaxDepth + 1, '}');
  EXPECT_EQ(ParseBounded(&doc, objects), "nested deeper than 256 levels, more than fastpath reads");
}

// What the recursive parser (and any recursive walk) overflowed the stack on.
TEST(JsonTest, AMillionLevelsAreRefusedWithoutRecursing) {
  rapidjson::Document doc;
  EXPECT_EQ(ParseBounded(&doc, Nested(1'000'000)),
            "nested deeper than 256 levels, more than fastpath reads");
  EXPECT_EQ(ParseBounded(&doc, std::string(1'000'000, '[')), "Invalid value. (at byte 1000000)");
}

TEST(JsonTest, SyntaxErrorsSayWhereAndLeaveANullDocument) {
  rapidjson::Document doc;
  EXPECT_EQ(ParseBounded(&doc, "{\"a\": tru}"), "Invalid value. (at byte 9)");
  EXPECT_TRUE(doc.IsNull());
  EXPECT_EQ(ParseBounded(&doc, "{\"a\": [1, 2, {\"b\": null}]}"), "");
  EXPECT_EQ(doc["a"][2]["b"].IsNull(), true);
}

}  // namespace
}  // namespace fastpath::json
