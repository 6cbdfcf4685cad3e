#include "runner/ops/global_norm.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "runner/ops/bf16_round.h"

namespace partrain::runner::ops {
namespace {

TEST(GlobalNorm, SumOfSquaresOverShardsAddsUp) {
  std::vector<float> x = {3.0f, 4.0f, 12.0f};
  EXPECT_DOUBLE_EQ(sum_of_squares(x.data(), 3), 169.0);
  // Ranks holding shards sum their squares, then the sums are all-reduced: same norm.
  EXPECT_DOUBLE_EQ(sum_of_squares(x.data(), 2) + sum_of_squares(x.data() + 2, 1), 169.0);
  EXPECT_DOUBLE_EQ(sum_of_squares(x.data(), 0), 0.0);
}

// bf16 values (bf16 gradients): the squares of their exact fp32 values. 3, 4 and 12 are bf16
// values; 1 + 2^-7 is too, 1 + 2^-9 rounds to 1.
TEST(GlobalNorm, SumOfSquaresOfBf16Values) {
  const std::vector<float> x = {3.0f, 4.0f, 12.0f, 1.0f + 0x1p-7f, 1.0f + 0x1p-9f};
  std::vector<uint16_t> bits(x.size());
  to_bf16(bits.data(), x.data(), 5);
  const double near_one = 1.0 + 0x1p-7;
  EXPECT_DOUBLE_EQ(sum_of_squares(bits.data(), 5), 169.0 + near_one * near_one + 1.0);
  EXPECT_DOUBLE_EQ(sum_of_squares(bits.data(), 0), 0.0);
}

TEST(GlobalNorm, ClipFactorAndScale) {
  EXPECT_FLOAT_EQ(clip_factor(13.0, 1.0), static_cast<float>(1.0 / (13.0 + 1e-6)));
  EXPECT_FLOAT_EQ(clip_factor(0.5, 1.0), 1.0f);  // below the threshold: untouched
  EXPECT_FLOAT_EQ(clip_factor(0.0, 1.0), 1.0f);
  std::vector<float> x = {3.0f, 4.0f, 12.0f};
  scale(x.data(), 3, clip_factor(13.0, 1.0));
  EXPECT_NEAR(sum_of_squares(x.data(), 3), 1.0, 1e-6);
}

}  // namespace
}  // namespace partrain::runner::ops
