#include "runner/ops/cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/unit/runner/ops/gradient_check.h"

namespace partrain::runner::ops {
namespace {

using testing::gradient_error;
using testing::numeric_gradient;
using testing::random_values;

TEST(CrossEntropy, ForwardIsMinusLogSoftmaxOfTheTarget) {
  const int64_t N = 3, V = 5;
  auto logits = random_values(N * V, 1, 2.0f);
  logits[0] += 100.0f;  // large logits must not overflow
  const std::vector<int32_t> targets = {0, 4, 2};
  std::vector<float> losses(N);
  const float mean = cross_entropy_forward(losses.data(), logits.data(), targets.data(), N, V);
  double total = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    double denominator = 0.0;
    const double shift = logits[static_cast<size_t>(n * V)];
    for (int64_t j = 0; j < V; ++j)
      denominator += std::exp(logits[static_cast<size_t>(n * V + j)] - shift);
    const double expected = -(logits[static_cast<size_t>(n * V + targets[static_cast<size_t>(n)])] -
                              shift - std::log(denominator));
    EXPECT_NEAR(losses[static_cast<size_t>(n)], expected, 1e-5);
    total += expected;
  }
  EXPECT_NEAR(mean, total / N, 1e-5);
}

TEST(CrossEntropy, UniformLogitsGiveLogV) {
  std::vector<float> logits(2 * 8, 0.3f);
  const std::vector<int32_t> targets = {1, 7};
  EXPECT_NEAR(cross_entropy_forward(nullptr, logits.data(), targets.data(), 2, 8), std::log(8.0),
              1e-6);
}

TEST(CrossEntropy, BackwardFiniteDifferencesOfTheMeanLoss) {
  const int64_t N = 4, V = 6;
  auto logits = random_values(N * V, 2);
  const std::vector<int32_t> targets = {5, 0, 3, 3};
  auto objective = [&] {
    return static_cast<double>(cross_entropy_forward(nullptr, logits.data(), targets.data(), N, V));
  };
  std::vector<float> dlogits(logits.size(), 0.0f);
  cross_entropy_backward(dlogits.data(), logits.data(), targets.data(), N, V, 1.0f / N);
  auto error = gradient_error(dlogits, numeric_gradient(logits, objective, 1e-2f));
  EXPECT_LT(error.normwise, 1e-3);
  EXPECT_LT(error.worst, 1e-2);
  // Each row of softmax - onehot sums to zero.
  for (int64_t n = 0; n < N; ++n) {
    double row_sum = 0.0;
    for (int64_t j = 0; j < V; ++j) row_sum += dlogits[static_cast<size_t>(n * V + j)];
    EXPECT_NEAR(row_sum, 0.0, 1e-6);
  }
}

}  // namespace
}  // namespace partrain::runner::ops
