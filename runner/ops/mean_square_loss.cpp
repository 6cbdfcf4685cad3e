#include "runner/ops/mean_square_loss.h"

namespace partrain::runner::ops {

float mean_square_loss_forward(const float* y, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(y[i]) * y[i];
  return n > 0 ? static_cast<float>(sum / static_cast<double>(n)) : 0.0f;
}

void mean_square_loss_backward(float* dy, const float* y, int64_t n, float dloss_scale) {
  if (n == 0) return;
  const auto factor = static_cast<float>(2.0 / static_cast<double>(n) * dloss_scale);
  for (int64_t i = 0; i < n; ++i) dy[i] += factor * y[i];
}

}  // namespace partrain::runner::ops
