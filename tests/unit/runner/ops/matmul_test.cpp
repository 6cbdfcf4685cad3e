#include "runner/ops/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/unit/runner/ops/gradient_check.h"

namespace partrain::runner::ops {
namespace {

using testing::gradient_error;
using testing::numeric_gradient;
using testing::random_values;
using testing::weighted_sum;

// out[n][o] = sum_c inp[n][c] * weight[o][c] + bias[o], in double.
std::vector<float> naive_matmul(const std::vector<float>& inp, const std::vector<float>& weight,
                                const float* bias, int64_t N, int64_t C, int64_t OC) {
  std::vector<float> out(static_cast<size_t>(N * OC));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t o = 0; o < OC; ++o) {
      double sum = bias != nullptr ? bias[o] : 0.0;
      for (int64_t c = 0; c < C; ++c) {
        sum += static_cast<double>(inp[static_cast<size_t>(n * C + c)]) *
               weight[static_cast<size_t>(o * C + c)];
      }
      out[static_cast<size_t>(n * OC + o)] = static_cast<float>(sum);
    }
  }
  return out;
}

struct Shape {
  int64_t N, C, OC;
};

class MatmulForward : public ::testing::TestWithParam<Shape> {};

TEST_P(MatmulForward, MatchesTripleLoopWithAndWithoutBias) {
  const auto [N, C, OC] = GetParam();
  auto inp = random_values(static_cast<size_t>(N * C), 1);
  auto weight = random_values(static_cast<size_t>(OC * C), 2);
  auto bias = random_values(static_cast<size_t>(OC), 3);
  for (const float* b :
       {static_cast<const float*>(bias.data()), static_cast<const float*>(nullptr)}) {
    std::vector<float> out(static_cast<size_t>(N * OC), 123.0f);  // overwritten, not accumulated
    matmul_forward(out.data(), inp.data(), weight.data(), b, N, C, OC);
    auto expected = naive_matmul(inp, weight, b, N, C, OC);
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_NEAR(out[i], expected[i], 1e-4 * (1.0 + std::sqrt(static_cast<double>(C))))
          << "element " << i << (b ? " with bias" : " without bias");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(OddAndEvenSizes, MatmulForward,
                         ::testing::Values(Shape{1, 1, 1}, Shape{7, 13, 5}, Shape{3, 64, 17},
                                           Shape{67, 129, 33}, Shape{64, 64, 192}, Shape{5, 0, 3}));

TEST(MatmulBackward, AccumulatesTheTripleLoopGradients) {
  const int64_t N = 9, C = 11, OC = 6;
  auto inp = random_values(static_cast<size_t>(N * C), 4);
  auto weight = random_values(static_cast<size_t>(OC * C), 5);
  auto dout = random_values(static_cast<size_t>(N * OC), 6);
  // Start from non-zero gradients: backward must add to them (+=), not overwrite.
  auto dinp = random_values(static_cast<size_t>(N * C), 7);
  auto dweight = random_values(static_cast<size_t>(OC * C), 8);
  auto dbias = random_values(static_cast<size_t>(OC), 9);
  const auto dinp0 = dinp, dweight0 = dweight, dbias0 = dbias;
  matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(),
                  N, C, OC);
  auto at = [](const std::vector<float>& v, int64_t i) { return v[static_cast<size_t>(i)]; };
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      double expected = at(dinp0, n * C + c);
      for (int64_t o = 0; o < OC; ++o) expected += at(dout, n * OC + o) * at(weight, o * C + c);
      EXPECT_NEAR(at(dinp, n * C + c), expected, 1e-4);
    }
  }
  for (int64_t o = 0; o < OC; ++o) {
    double expected_bias = at(dbias0, o);
    for (int64_t n = 0; n < N; ++n) expected_bias += at(dout, n * OC + o);
    EXPECT_NEAR(at(dbias, o), expected_bias, 1e-4);
    for (int64_t c = 0; c < C; ++c) {
      double expected = at(dweight0, o * C + c);
      for (int64_t n = 0; n < N; ++n) expected += at(dout, n * OC + o) * at(inp, n * C + c);
      EXPECT_NEAR(at(dweight, o * C + c), expected, 1e-4);
    }
  }
}

TEST(MatmulBackward, NullGradientsAreSkipped) {
  const int64_t N = 4, C = 3, OC = 2;
  auto inp = random_values(static_cast<size_t>(N * C), 10);
  auto weight = random_values(static_cast<size_t>(OC * C), 11);
  auto dout = random_values(static_cast<size_t>(N * OC), 12);
  std::vector<float> dweight(static_cast<size_t>(OC * C), 0.0f);
  matmul_backward(nullptr, dweight.data(), nullptr, dout.data(), inp.data(), weight.data(), N, C,
                  OC);
  double norm = 0.0;
  for (float value : dweight) norm += std::abs(value);
  EXPECT_GT(norm, 0.0);
}

TEST(MatmulBackward, FiniteDifferences) {
  const int64_t N = 5, C = 7, OC = 3;
  auto inp = random_values(static_cast<size_t>(N * C), 13);
  auto weight = random_values(static_cast<size_t>(OC * C), 14);
  auto bias = random_values(static_cast<size_t>(OC), 15);
  auto weights = random_values(static_cast<size_t>(N * OC), 16);  // dL/dout
  std::vector<float> out(static_cast<size_t>(N * OC));
  auto objective = [&] {
    matmul_forward(out.data(), inp.data(), weight.data(), bias.data(), N, C, OC);
    return weighted_sum(out, weights);
  };
  std::vector<float> dinp(inp.size(), 0.0f), dweight(weight.size(), 0.0f), dbias(bias.size(), 0.0f);
  matmul_backward(dinp.data(), dweight.data(), dbias.data(), weights.data(), inp.data(),
                  weight.data(), N, C, OC);
  // The objective is linear in each input, so central differences are exact up to float rounding.
  for (auto [analytic, x, label] : {std::tuple{&dinp, &inp, "dinp"},
                                    {&dweight, &weight, "dweight"},
                                    {&dbias, &bias, "dbias"}}) {
    auto error = gradient_error(*analytic, numeric_gradient(*x, objective));
    EXPECT_LT(error.normwise, 1e-4) << label;
    EXPECT_LT(error.worst, 1e-3) << label;
  }
}

}  // namespace
}  // namespace partrain::runner::ops
