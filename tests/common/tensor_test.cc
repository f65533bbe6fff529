#include "fastpath/common/tensor.h"

#include <gtest/gtest.h>

namespace fastpath {
namespace {

TEST(DataTypeTest, NamesRoundTrip) {
  for (int i = 1; i <= static_cast<int>(DataType::kBf16); ++i) {
    auto t = static_cast<DataType>(i);
    EXPECT_EQ(ParseDataType(DataTypeName(t)), t);
    EXPECT_EQ(ParseConfigDataType(ConfigDataTypeName(t)), t);
  }
  EXPECT_EQ(ConfigDataTypeName(DataType::kBytes), "TYPE_STRING");
  EXPECT_EQ(ParseDataType("FLOAT"), std::nullopt);
  EXPECT_EQ(ParseDataType("INVALID"), std::nullopt);
  EXPECT_EQ(ElementSize(DataType::kFp16), 2u);
  EXPECT_EQ(ElementSize(DataType::kBytes), 0u);
}

TEST(ElementCountTest, ChecksNegativeAndOverflow) {
  EXPECT_EQ(*ElementCount({2, 3, 4}), 24);
  EXPECT_EQ(*ElementCount({}), 1);
  EXPECT_EQ(*ElementCount({0, 5}), 0);
  EXPECT_EQ(ElementCount({2, -1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ElementCount({1, 1000000000000}, 1 << 20).status().code(), StatusCode::kPayloadTooLarge);
  EXPECT_EQ(ElementCount({INT64_MAX, 4}).status().code(), StatusCode::kPayloadTooLarge);
}

TEST(TensorTest, ValidatesFixedSizeLength) {
  Tensor t{"x", DataType::kFp32, {2, 2}, std::string(16, '\0')};
  EXPECT_TRUE(ValidateTensorData(t).ok());
  t.data.resize(12);
  Status s = ValidateTensorData(t);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'x'"), std::string::npos);
}

// Checked on each request's own tensor, so the index is its own, not a batch's.
TEST(TensorTest, BoolBytesAreZeroOrOne) {
  EXPECT_TRUE(
      ValidateTensorData({"b", DataType::kBool, {1, 3}, std::string("\x01\x00\x01", 3)}).ok());
  const Status s =
      ValidateTensorData({"b", DataType::kBool, {1, 3}, std::string("\x01\x02\x00", 3)});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "BOOL tensor 'b' element 1 is 2; BOOL elements must be 0 or 1");
}

TEST(TensorTest, BytesElementsRoundTrip) {
  std::string data;
  AppendBytesElement(&data, "hello");
  AppendBytesElement(&data, "");
  AppendBytesElement(&data, std::string("a\0b", 3));
  auto split = SplitBytesElements(data, 3, "s");
  ASSERT_TRUE(split.ok());
  EXPECT_EQ((*split)[0], "hello");
  EXPECT_EQ((*split)[1], "");
  EXPECT_EQ((*split)[2], std::string_view("a\0b", 3));
  EXPECT_TRUE(ValidateTensorData({"s", DataType::kBytes, {3}, data}).ok());
}

TEST(TensorTest, RejectsMalformedBytes) {
  std::string data;
  AppendBytesElement(&data, "hello");
  EXPECT_FALSE(SplitBytesElements(data, 2, "s").ok());         // too few elements
  EXPECT_FALSE(SplitBytesElements(data + "xy", 1, "s").ok());  // truncated prefix
  std::string lying = data;
  lying[0] = 100;                                              // length beyond the data
  EXPECT_FALSE(SplitBytesElements(lying, 1, "s").ok());
  EXPECT_FALSE(SplitBytesElements(data, 1000000000, "s").ok());  // no huge reservation
}

}  // namespace
}  // namespace fastpath
