#include "runner/ops/layernorm.h"

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

TEST(Layernorm, ForwardMatchesTheDefinitionAndSavesStatistics) {
  const int64_t N = 3, C = 10;
  auto inp = random_values(static_cast<size_t>(N * C), 1, 3.0f);
  for (float& x : inp) x += 5.0f;  // an offset the normalisation must remove
  auto weight = random_values(static_cast<size_t>(C), 2);
  auto bias = random_values(static_cast<size_t>(C), 3);
  std::vector<float> out(inp.size()), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), N,
                    C);
  for (int64_t n = 0; n < N; ++n) {
    double m = 0.0, var = 0.0;
    for (int64_t i = 0; i < C; ++i) m += inp[static_cast<size_t>(n * C + i)];
    m /= C;
    for (int64_t i = 0; i < C; ++i) {
      var += std::pow(inp[static_cast<size_t>(n * C + i)] - m, 2);
    }
    var /= C;  // biased, as torch.nn.LayerNorm
    const double s = 1.0 / std::sqrt(var + 1e-5);
    EXPECT_NEAR(mean[static_cast<size_t>(n)], m, 1e-5);
    EXPECT_NEAR(rstd[static_cast<size_t>(n)], s, 1e-5);
    for (int64_t i = 0; i < C; ++i) {
      const auto k = static_cast<size_t>(n * C + i);
      const double expected =
          (inp[k] - m) * s * weight[static_cast<size_t>(i)] + bias[static_cast<size_t>(i)];
      EXPECT_NEAR(out[k], expected, 1e-5);
    }
  }
}

TEST(Layernorm, BackwardFiniteDifferences) {
  const int64_t N = 4, C = 8;
  auto inp = random_values(static_cast<size_t>(N * C), 4);
  auto weight = random_values(static_cast<size_t>(C), 5);
  auto bias = random_values(static_cast<size_t>(C), 6);
  auto weights = random_values(inp.size(), 7);
  std::vector<float> out(inp.size()), mean(N), rstd(N);
  auto objective = [&] {
    layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(),
                      N, C);
    return weighted_sum(out, weights);
  };
  objective();  // the saved statistics backward reads
  std::vector<float> dinp(inp.size(), 0.0f), dweight(C, 0.0f), dbias(C, 0.0f);
  layernorm_backward(dinp.data(), dweight.data(), dbias.data(), weights.data(), inp.data(),
                     weight.data(), mean.data(), rstd.data(), N, C);
  for (auto [analytic, x, label] : {std::tuple{&dinp, &inp, "dinp"},
                                    {&dweight, &weight, "dweight"},
                                    {&dbias, &bias, "dbias"}}) {
    auto error = gradient_error(*analytic, numeric_gradient(*x, objective, 1e-3f));
    EXPECT_LT(error.normwise, 1e-3) << label;
    EXPECT_LT(error.worst, 1e-2) << label;
  }
}

TEST(Layernorm, BackwardAccumulates) {
  const int64_t N = 2, C = 4;
  auto inp = random_values(static_cast<size_t>(N * C), 8);
  std::vector<float> weight(C, 1.0f), bias(C, 0.0f), out(inp.size()), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), N,
                    C);
  auto dout = random_values(inp.size(), 9);
  std::vector<float> once(inp.size(), 0.0f), twice(inp.size(), 0.0f), dw(C, 0.0f), db(C, 0.0f);
  layernorm_backward(once.data(), dw.data(), db.data(), dout.data(), inp.data(), weight.data(),
                     mean.data(), rstd.data(), N, C);
  for (int i = 0; i < 2; ++i) {
    layernorm_backward(twice.data(), dw.data(), db.data(), dout.data(), inp.data(), weight.data(),
                       mean.data(), rstd.data(), N, C);
  }
  for (size_t i = 0; i < once.size(); ++i) EXPECT_NEAR(twice[i], 2.0f * once[i], 1e-5);
  for (int64_t i = 0; i < C; ++i) {
    double column_sum = 0.0;
    for (int64_t n = 0; n < N; ++n) column_sum += dout[static_cast<size_t>(n * C + i)];
    EXPECT_NEAR(db[static_cast<size_t>(i)], 3.0 * column_sum, 1e-5);  // three backward calls
  }
}

}  // namespace
}  // namespace partrain::runner::ops
