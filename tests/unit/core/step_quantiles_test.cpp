// The step-time median and nearest-rank p90 as docs/analysis.md defines them: the p90 is the
// ⌈0.9 n⌉-th smallest value, the median the mean of the middle two for an even count.
#include "core/step_quantiles.h"

#include <gtest/gtest.h>

namespace partrain {
namespace {

TEST(StepQuantilesTest, P90IsTheCeilingOfNineTenthsOfNThSmallest) {
  // 9 values: ⌈8.1⌉ = 9th, the largest (an index of round(0.9 (n - 1)) = 7 gave the 8th).
  EXPECT_EQ(nearest_rank_quantile({9, 1, 8, 2, 7, 3, 6, 4, 5}, 0.9), 9);
  // 10 values: ⌈9⌉ = 9th; 20: 18th; 11: ⌈9.9⌉ = 10th.
  EXPECT_EQ(nearest_rank_quantile({10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 0.9), 9);
  std::vector<double> twenty;
  for (int i = 1; i <= 20; ++i) twenty.push_back(i);
  EXPECT_EQ(nearest_rank_quantile(twenty, 0.9), 18);
  EXPECT_EQ(nearest_rank_quantile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 0.9), 10);
}

TEST(StepQuantilesTest, EdgesGiveAValueOfTheSample) {
  EXPECT_EQ(nearest_rank_quantile({}, 0.9), 0);
  EXPECT_EQ(nearest_rank_quantile({4}, 0.9), 4);
  EXPECT_EQ(nearest_rank_quantile({3, 1, 2}, 0), 1);
  EXPECT_EQ(nearest_rank_quantile({3, 1, 2}, 1), 3);
}

TEST(StepQuantilesTest, MedianAveragesTheMiddleTwoOfAnEvenCount) {
  EXPECT_EQ(median({}), 0);
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
}

}  // namespace
}  // namespace partrain
