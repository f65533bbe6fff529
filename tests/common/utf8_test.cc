#include "fastpath/common/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace fastpath {
namespace {

TEST(Utf8Test, WellFormedSequencesOfEachLength) {
  const std::string text = "a\xc3\xa9\xe6\xa8\xa1\xf0\x9f\x98\x80";  // a, é, 模, 😀
  EXPECT_EQ(Utf8SequenceLength(text, 0), 1u);
  EXPECT_EQ(Utf8SequenceLength(text, 1), 2u);
  EXPECT_EQ(Utf8SequenceLength(text, 3), 3u);
  EXPECT_EQ(Utf8SequenceLength(text, 6), 4u);
  EXPECT_EQ(Utf8SequenceLength(text, 10), 0u) << "past the end";
  EXPECT_TRUE(IsValidUtf8(text));
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_EQ(ToValidUtf8(text), text);
  // The edges: U+0080, U+07FF, U+0800, U+FFFF, U+10000, U+10FFFF.
  for (const char* edge : {"\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80", "\xef\xbf\xbf",
                           "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf"}) {
    EXPECT_TRUE(IsValidUtf8(edge)) << edge;
  }
}

TEST(Utf8Test, WhatIsNotUtf8) {
  for (const std::string& bad : {std::string("\xff"),              // never a UTF-8 byte
                                 std::string("\x80"),              // a continuation byte alone
                                 std::string("\xc0\x80"),          // overlong NUL
                                 std::string("\xe0\x80\xaf"),      // overlong '/'
                                 std::string("\xed\xa0\x80"),      // a surrogate, U+D800
                                 std::string("\xf4\x90\x80\x80"),  // above U+10FFFF
                                 std::string("\xe6\xa8"),          // cut short
                                 std::string("\xc3(")}) {  // a lead byte without its continuation
    EXPECT_FALSE(IsValidUtf8(bad)) << testing::PrintToString(bad);
    EXPECT_EQ(Utf8SequenceLength(bad, 0), 0u) << testing::PrintToString(bad);
    EXPECT_TRUE(IsValidUtf8(ToValidUtf8(bad))) << testing::PrintToString(bad);
  }
}

TEST(Utf8Test, EachBadByteBecomesOneReplacementCharacter) {
  EXPECT_EQ(ToValidUtf8("ab\xff"
                        "cd"),
            "ab\xef\xbf\xbd"
            "cd");
  // A cut-short sequence: its two bytes, each replaced; the good text around it kept.
  EXPECT_EQ(ToValidUtf8("x\xe6\xa8y\xc3\xa9"), "x\xef\xbf\xbd\xef\xbf\xbdy\xc3\xa9");
}

}  // namespace
}  // namespace fastpath
