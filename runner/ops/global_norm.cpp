#include "runner/ops/global_norm.h"

#include <algorithm>

#include "runner/comm/dtype.h"

namespace partrain::runner::ops {

double sum_of_squares(const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

double sum_of_squares(const uint16_t* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double value = comm::bf16_to_float(x[i]);
    sum += value * value;
  }
  return sum;
}

void scale(float* x, int64_t n, float factor) {
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

float clip_factor(double global_norm, double max_norm) {
  // PyTorch's 1e-6 keeps a zero norm finite.
  return static_cast<float>(std::min(1.0, max_norm / (global_norm + 1e-6)));
}

}  // namespace partrain::runner::ops
