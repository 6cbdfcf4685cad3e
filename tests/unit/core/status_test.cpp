#include "core/status.h"

#include <gtest/gtest.h>

namespace partrain {
namespace {

StatusOr<int> half(int value) {
  if (value % 2 != 0) return invalid_argument("{} is odd", value);
  return value / 2;
}

StatusOr<int> quarter(int value) {
  ASSIGN_OR_RETURN(int h, half(value));
  ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

TEST(Status, ExitCodesFollowTheConventions) {
  EXPECT_EQ(Status::ok().exit_code(), 0);
  EXPECT_EQ(failed("x").exit_code(), 1);
  EXPECT_EQ(invalid_argument("x").exit_code(), 2);
  EXPECT_EQ(Status(StatusCode::kUnreadable, "x").exit_code(), 3);
  EXPECT_EQ(timeout_error("x").exit_code(), 124);
  EXPECT_EQ(Status(StatusCode::kNotFound, "x").exit_code(), 127);
  EXPECT_EQ(Status(StatusCode::kNotExecutable, "x").exit_code(), 126);
  EXPECT_EQ(unavailable("x").exit_code(), 1);
}

TEST(Status, MacrosPropagateTheFirstError) {
  EXPECT_EQ(quarter(8).value(), 2);
  auto odd = quarter(6);
  ASSERT_FALSE(odd.is_ok());
  EXPECT_EQ(odd.status().message(), "3 is odd");
  EXPECT_EQ(odd.status().code(), StatusCode::kInvalidArgument);
}

TEST(Status, ContextKeepsTheCode) {
  Status status = timeout_error("key 'x' missing").with_context("joining the rendezvous");
  EXPECT_EQ(status.code(), StatusCode::kTimeout);
  EXPECT_EQ(status.message(), "joining the rendezvous: key 'x' missing");
}

}  // namespace
}  // namespace partrain
