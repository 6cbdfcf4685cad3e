#include "runner/ops/gelu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "tests/unit/runner/ops/gradient_check.h"

namespace partrain::runner::ops {
namespace {

using testing::gradient_error;
using testing::numeric_gradient;
using testing::random_values;
using testing::weighted_sum;

TEST(Gelu, ForwardIsTheTanhApproximation) {
  std::vector<float> inp = {-3.0f, -1.0f, 0.0f, 0.5f, 1.0f, 2.0f};
  std::vector<float> out(inp.size());
  gelu_forward(out.data(), inp.data(), static_cast<int64_t>(inp.size()));
  for (size_t i = 0; i < inp.size(); ++i) {
    const double x = inp[i];
    const double expected =
        0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(out[i], expected, 1e-6) << "x = " << x;
  }
  EXPECT_NEAR(out[4], 0.841192, 1e-5);  // gelu(1) as torch.nn.functional.gelu(approximate="tanh")
  EXPECT_EQ(out[2], 0.0f);
}

TEST(Gelu, BackwardFiniteDifferences) {
  auto inp = random_values(64, 1, 2.0f);
  auto weights = random_values(inp.size(), 2);
  std::vector<float> out(inp.size());
  auto objective = [&] {
    gelu_forward(out.data(), inp.data(), static_cast<int64_t>(inp.size()));
    return weighted_sum(out, weights);
  };
  std::vector<float> dinp(inp.size(), 0.5f);  // accumulates onto 0.5
  gelu_backward(dinp.data(), inp.data(), weights.data(), static_cast<int64_t>(inp.size()));
  for (float& value : dinp) value -= 0.5f;
  auto error = gradient_error(dinp, numeric_gradient(inp, objective, 1e-3f));
  EXPECT_LT(error.normwise, 1e-3);
  EXPECT_LT(error.worst, 1e-2);
}

}  // namespace
}  // namespace partrain::runner::ops
