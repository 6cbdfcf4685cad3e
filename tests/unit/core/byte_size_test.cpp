#include "core/byte_size.h"

#include <gtest/gtest.h>

namespace partrain {
namespace {

TEST(ParseByteSize, BinarySuffixesAsNcclTests) {
  EXPECT_EQ(parse_byte_size("8").value(), 8u);
  EXPECT_EQ(parse_byte_size("64K").value(), 65536u);
  EXPECT_EQ(parse_byte_size("128M").value(), 128u << 20);
  EXPECT_EQ(parse_byte_size("1G").value(), 1ull << 30);
  EXPECT_EQ(parse_byte_size("0").value(), 0u);
  EXPECT_EQ(parse_byte_size("1.5K").value(), 1536u);
}

// KB, MB, GB are decimal, as partrain prints "GB = 10^9 bytes" (--reserve 4GB read as 4 GiB);
// the i-forms and bare letters binary.
TEST(ParseByteSize, DecimalAndBinaryUnitsAsLabelled) {
  EXPECT_EQ(parse_byte_size("4GB").value(), 4'000'000'000u);
  EXPECT_EQ(parse_byte_size("25MB").value(), 25'000'000u);
  EXPECT_EQ(parse_byte_size("1KB").value(), 1000u);
  EXPECT_EQ(parse_byte_size("4GiB").value(), 4ull << 30);
  EXPECT_EQ(parse_byte_size("25MiB").value(), 25u << 20);
  EXPECT_EQ(parse_byte_size("2T").value(), 2ull << 40);
  EXPECT_EQ(parse_byte_size("1TB").value(), 1'000'000'000'000u);
  auto unknown = parse_byte_size("3XB");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("KB, MB, GB, TB: decimal"), std::string::npos)
      << unknown.status().message();
}

TEST(ParseByteSize, RejectsGarbage) {
  for (const char* bad : {"", "M", "12Q", "-1", "lots"}) {
    auto result = parse_byte_size(bad);
    ASSERT_FALSE(result.is_ok()) << bad;
    EXPECT_EQ(result.status().exit_code(), 2) << bad;
  }
}

TEST(FormatBytes, LabelsBinaryUnits) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(3ull << 30), "3.00 GiB");
}

}  // namespace
}  // namespace partrain
