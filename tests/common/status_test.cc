#include "fastpath/common/status.h"

#include <gtest/gtest.h>

namespace fastpath {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Status Chain(int x, int* out) {
  FASTPATH_ASSIGN_OR_RETURN(*out, Half(x));
  FASTPATH_RETURN_IF_ERROR(Half(*out).status());
  return Status::Ok();
}

TEST(StatusTest, OkIsCheapAndEmpty) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, CarriesCodeAndMessage) {
  Status s = NotFound("model 'x' is unknown");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "NOT_FOUND: model 'x' is unknown");
  EXPECT_EQ(s.WithContext("load").message(), "load: model 'x' is unknown");
  EXPECT_TRUE(Status::Ok().WithContext("x").ok());
}

TEST(StatusTest, MapsToTransportCodes) {
  EXPECT_EQ(HttpStatusFor(StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(StatusCode::kPayloadTooLarge), 413);
  EXPECT_EQ(HttpStatusFor(StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(StatusCode::kResourceExhausted), 503);  // out of memory: retry
  EXPECT_EQ(GrpcCodeFor(StatusCode::kResourceExhausted), 8);
  EXPECT_EQ(GrpcCodeFor(StatusCode::kInvalidArgument), 3);
  EXPECT_EQ(GrpcCodeFor(StatusCode::kNotFound), 5);
  EXPECT_EQ(GrpcCodeFor(StatusCode::kUnavailable), 14);
}

TEST(StatusTest, MacrosPropagate) {
  int out = 0;
  EXPECT_TRUE(Chain(8, &out).ok());
  EXPECT_EQ(out, 4);
  Status s = Chain(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd: 3");
  EXPECT_EQ(Chain(5, &out).message(), "odd: 5");
}

TEST(StatusOrTest, OkStatusWithoutValueIsInternal) {
  StatusOr<int> v = Status::Ok();
  EXPECT_EQ(v.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace fastpath
