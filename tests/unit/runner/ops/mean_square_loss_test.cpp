#include "runner/ops/mean_square_loss.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/runner/ops/gradient_check.h"

namespace partrain::runner::ops {
namespace {

using testing::gradient_error;
using testing::numeric_gradient;
using testing::random_values;

TEST(MeanSquareLoss, ForwardIsTheMeanOfSquares) {
  std::vector<float> y = {1.0f, -2.0f, 3.0f, 0.0f};
  EXPECT_FLOAT_EQ(mean_square_loss_forward(y.data(), 4), (1.0f + 4.0f + 9.0f) / 4.0f);
  EXPECT_EQ(mean_square_loss_forward(y.data(), 0), 0.0f);
}

TEST(MeanSquareLoss, BackwardFiniteDifferencesWithScale) {
  auto y = random_values(12, 1);
  const float dloss_scale = 0.25f;  // e.g. one of four micro-batches
  auto objective = [&] {
    return dloss_scale * static_cast<double>(mean_square_loss_forward(y.data(), 12));
  };
  std::vector<float> dy(12, 0.0f);
  mean_square_loss_backward(dy.data(), y.data(), 12, dloss_scale);
  auto error = gradient_error(dy, numeric_gradient(y, objective, 1e-3f));
  EXPECT_LT(error.normwise, 1e-3);
  EXPECT_LT(error.worst, 1e-2);
  EXPECT_FLOAT_EQ(dy[0], 2.0f / 12.0f * y[0] * dloss_scale);
}

}  // namespace
}  // namespace partrain::runner::ops
