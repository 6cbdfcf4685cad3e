#include "runner/ops/gelu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "runner/ops/bf16_round.h"
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

// Over bf16 storage: exactly widening, the fp32 op and rounding, each combination of types.
TEST(Gelu, Bf16StorageIsTheFp32OpOnTheWidenedValuesRounded) {
  const auto values = random_values(257, 3, 4.0f);
  const auto n = static_cast<int64_t>(values.size());
  std::vector<uint16_t> inp(values.size());
  to_bf16(inp.data(), values.data(), n);
  std::vector<float> widened(values.size());
  from_bf16(widened.data(), inp.data(), n);
  std::vector<float> fp32_out(values.size());
  gelu_forward(fp32_out.data(), widened.data(), n);
  std::vector<uint16_t> expected(values.size());
  to_bf16(expected.data(), fp32_out.data(), n);

  std::vector<uint16_t> out(values.size());
  gelu_forward(out.data(), inp.data(), n);
  EXPECT_EQ(out, expected) << "bf16 in, bf16 out";
  std::vector<float> out_f32(values.size());
  gelu_forward(out_f32.data(), inp.data(), n);
  EXPECT_EQ(out_f32, fp32_out) << "bf16 in, fp32 out";
  std::vector<uint16_t> from_f32(values.size());
  gelu_forward(from_f32.data(), widened.data(), n);
  EXPECT_EQ(from_f32, expected) << "fp32 in, bf16 out";

  const auto dout = random_values(values.size(), 4);
  std::vector<float> expected_dinp(values.size(), 0.25f);
  gelu_backward(expected_dinp.data(), widened.data(), dout.data(), n);
  std::vector<float> dinp(values.size(), 0.25f);  // accumulates, as the fp32 op
  gelu_backward(dinp.data(), inp.data(), dout.data(), n);
  EXPECT_EQ(dinp, expected_dinp);
}

}  // namespace
}  // namespace partrain::runner::ops
