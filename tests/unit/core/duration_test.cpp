#include "core/duration.h"

#include <gtest/gtest.h>

namespace partrain {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(ParseDuration, UnitsAndBareSeconds) {
  EXPECT_EQ(parse_duration("10s").value(), seconds(10));
  EXPECT_EQ(parse_duration("500ms").value(), milliseconds(500));
  EXPECT_EQ(parse_duration("7").value(), seconds(7));
  EXPECT_EQ(parse_duration("1.5").value(), milliseconds(1500));
  EXPECT_EQ(parse_duration("2m").value(), seconds(120));
  EXPECT_EQ(parse_duration("1h").value(), seconds(3600));
  EXPECT_EQ(parse_duration("250us").value(), std::chrono::microseconds(250));
  EXPECT_EQ(parse_duration("3ns").value(), Nanoseconds(3));
  EXPECT_EQ(parse_duration(" 4 s ").value(), seconds(4));
}

TEST(ParseDuration, RejectsWithReason) {
  for (const char* bad : {"", "s", "ten", "10 parsecs", "-1s", "1e30h"}) {
    auto result = parse_duration(bad);
    ASSERT_FALSE(result.is_ok()) << bad;
    EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(result.status().exit_code(), 2);
  }
  EXPECT_NE(parse_duration("10 parsecs").status().message().find("unknown duration unit"),
            std::string::npos);
}

// A decimal comma ("1,5", as a German locale writes it) was "unknown duration unit ',5'".
TEST(ParseDuration, ADecimalCommaIsSaidToBeOne) {
  EXPECT_EQ(parse_duration("1,5").status().message(),
            "'1,5': write a decimal point, not a comma (1.5)");
  EXPECT_EQ(parse_duration("2,25s").status().message(),
            "'2,25s': write a decimal point, not a comma (2.25s)");
}

TEST(FormatDuration, AlwaysHasAUnit) {
  EXPECT_EQ(format_duration(seconds(30)), "30 s");
  EXPECT_EQ(format_duration(seconds(999)), "999 s");
  EXPECT_EQ(format_duration(seconds(1200)), "20 min");
  EXPECT_EQ(format_duration(seconds(7200)), "2 h");
  EXPECT_EQ(format_duration(seconds(90 * 3600)), "90 h");
  EXPECT_EQ(format_duration(milliseconds(250)), "250 ms");
  EXPECT_EQ(format_duration(std::chrono::microseconds(12)), "12 us");
  EXPECT_EQ(format_duration(Nanoseconds(5)), "5 ns");
}

}  // namespace
}  // namespace partrain
