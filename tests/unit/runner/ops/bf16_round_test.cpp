#include "runner/ops/bf16_round.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace partrain::runner::ops {
namespace {

float from_bits(uint32_t bits) { return std::bit_cast<float>(bits); }

TEST(RoundToBf16, RoundsToNearestWithTiesToEven) {
  const std::vector<float> in = {
      1.0f,
      1.0f + 0x1p-8f,             // halfway between 1 and 1 + 2^-7: the even one, 1
      1.0f + 3 * 0x1p-8f,         // halfway between 1 + 2^-7 and 1 + 2^-6: the even one, above
      1.0f + 0x1p-8f + 0x1p-20f,  // just above halfway: up
      -2.5f,                      // exact in bf16
      from_bits(0x3f80ffffu),     // just below 1 + 2^-7
      0.0f, -0.0f,
  };
  std::vector<float> out(in.size());
  round_to_bf16(out.data(), in.data(), static_cast<int64_t>(in.size()));
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[2], 1.0f + 0x1p-6f);
  EXPECT_EQ(out[3], 1.0f + 0x1p-7f);
  EXPECT_EQ(out[4], -2.5f);
  EXPECT_EQ(out[5], 1.0f + 0x1p-7f);
  EXPECT_EQ(std::bit_cast<uint32_t>(out[6]), 0u);
  EXPECT_EQ(std::bit_cast<uint32_t>(out[7]), 0x80000000u);  // the sign of zero is kept
  for (float value : out) EXPECT_EQ(std::bit_cast<uint32_t>(value) & 0xffffu, 0u);
}

TEST(RoundToBf16, KeepsNonFiniteValuesAndOverflowsToInfinity) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::vector<float> values = {kInf, -kInf, std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()};
  round_to_bf16(values.data(), values.data(), static_cast<int64_t>(values.size()));  // in place
  EXPECT_EQ(values[0], kInf);
  EXPECT_EQ(values[1], -kInf);
  EXPECT_TRUE(std::isnan(values[2]));
  EXPECT_EQ(values[3], kInf);
  EXPECT_EQ(values[4], -kInf);
}

TEST(RoundToBf16, ErrorIsWithinHalfAUnitOfBf16) {
  std::vector<float> in(1000), out(in.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::sin(static_cast<float>(i) * 0.37f) * 1e3f;
  round_to_bf16(out.data(), in.data(), static_cast<int64_t>(in.size()));
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_LE(std::abs(out[i] - in[i]), 0x1p-8f * std::abs(in[i])) << i;  // 8 significant bits
  }
}

}  // namespace
}  // namespace partrain::runner::ops
