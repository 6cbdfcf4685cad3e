#include "runner/ops/residual.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/runner/ops/gradient_check.h"

namespace partrain::runner::ops {
namespace {

using testing::gradient_error;
using testing::numeric_gradient;
using testing::random_values;
using testing::weighted_sum;

TEST(Residual, ForwardAdds) {
  std::vector<float> a = {1.0f, -2.0f, 3.5f}, b = {0.5f, 2.0f, -1.0f}, out(3);
  residual_forward(out.data(), a.data(), b.data(), 3);
  EXPECT_EQ(out, (std::vector<float>{1.5f, 0.0f, 2.5f}));
}

TEST(Residual, BackwardFiniteDifferencesAndNullBranch) {
  auto a = random_values(10, 1), b = random_values(10, 2), weights = random_values(10, 3);
  std::vector<float> out(10);
  auto objective = [&] {
    residual_forward(out.data(), a.data(), b.data(), 10);
    return weighted_sum(out, weights);
  };
  std::vector<float> da(10, 1.0f), db(10, 0.0f);
  residual_backward(da.data(), db.data(), weights.data(), 10);
  for (float& value : da) value -= 1.0f;  // accumulated onto 1
  EXPECT_LT(gradient_error(da, numeric_gradient(a, objective)).worst, 1e-3);
  EXPECT_LT(gradient_error(db, numeric_gradient(b, objective)).worst, 1e-3);
  residual_backward(nullptr, db.data(), weights.data(), 10);  // only one branch wanted
  for (size_t i = 0; i < 10; ++i) EXPECT_FLOAT_EQ(db[i], 2.0f * weights[i]);
}

}  // namespace
}  // namespace partrain::runner::ops
