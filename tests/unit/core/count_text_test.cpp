// Counts as flags read them: a non-negative decimal number and nothing else.
#include "core/count_text.h"

#include <gtest/gtest.h>

namespace partrain {
namespace {

TEST(ParseCount, NonNegativeDecimalNumbersOnly) {
  EXPECT_EQ(parse_count("0"), 0);
  EXPECT_EQ(parse_count("12"), 12);
  EXPECT_EQ(parse_count("9223372036854775807"), INT64_MAX);
  for (const char* text : {"", "-1", "+3", "1e3", "12 ", " 12", "0x10", "9223372036854775808"}) {
    EXPECT_FALSE(parse_count(text).has_value()) << text;
  }
}

}  // namespace
}  // namespace partrain
