#include "core/number_format.h"

#include <gtest/gtest.h>

namespace partrain {
namespace {

TEST(FormatDecimal, ColumnDecimalsUnlessTheyWouldShowZero) {
  EXPECT_EQ(format_decimal(12.3456, 2), "12.35");
  EXPECT_EQ(format_decimal(0.004, 3), "0.004");
  // 3e-6 at two decimals reads 0.00: shown with significant digits instead.
  EXPECT_EQ(format_decimal(0.0000031, 2), "3.1e-06");
  EXPECT_EQ(format_decimal(0.0031, 2), "0.0031");
  EXPECT_EQ(format_decimal(-0.0031, 1), "-0.0031");
  EXPECT_EQ(format_decimal(0, 2), "0");
}

// bench's busbw of 0.0054 GB/s (algbw 0.0036 x 1.5) read "0.01" at two decimals, nearly twice it,
// while 0.0032 beside it read "0.0032".
TEST(FormatDecimal, AValueBelowTheLastPlaceIsNotRoundedUpToIt) {
  EXPECT_EQ(format_decimal(0.0054, 2), "0.0054");
  EXPECT_EQ(format_decimal(-0.0054, 2), "-0.0054");
  EXPECT_EQ(format_decimal(0.054, 1), "0.054");
  EXPECT_EQ(format_decimal(0.7, 0), "0.7");
  // From the last place up the column's decimals stand.
  EXPECT_EQ(format_decimal(0.01, 2), "0.01");
  EXPECT_EQ(format_decimal(0.0149, 2), "0.01");
  EXPECT_EQ(format_decimal(0.05, 2), "0.05");
  EXPECT_EQ(format_decimal(1.4, 0), "1");
}

TEST(FormatPercent, FromAFraction) {
  EXPECT_EQ(format_percent(0.852), "85.2%");
  EXPECT_EQ(format_percent(0.0004), "0.04%");
  EXPECT_EQ(format_percent(0), "0%");
  EXPECT_EQ(format_percent(1.0, 0), "100%");
}

// The analyze table printed a 4-byte all-reduce's 3e-6 GB/s as "0.000003 GB/s" and bench's
// footer "0.000 GB/s".
TEST(FormatBandwidth, UnitThatFitsThreeSignificantDigits) {
  EXPECT_EQ(format_bandwidth(412e9), "412 GB/s");
  EXPECT_EQ(format_bandwidth(12.44e9), "12.4 GB/s");
  EXPECT_EQ(format_bandwidth(3.214e6), "3.21 MB/s");
  EXPECT_EQ(format_bandwidth(512e3), "512 KB/s");
  EXPECT_EQ(format_bandwidth(3000), "3.00 KB/s");
  EXPECT_EQ(format_bandwidth(40), "40.0 B/s");
  EXPECT_EQ(format_bandwidth(999.7e6), "1.00 GB/s");
  EXPECT_EQ(format_bandwidth(2.5e12), "2.50 TB/s");
  EXPECT_EQ(format_bandwidth(0.5), "0.50 B/s");
  EXPECT_EQ(format_bandwidth(0), "0 B/s");
}

}  // namespace
}  // namespace partrain
