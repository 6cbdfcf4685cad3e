#include "runner/ops/residual.h"

namespace partrain::runner::ops {

void residual_forward(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void residual_backward(float* da, float* db, const float* dout, int64_t n) {
  if (da != nullptr) {
    for (int64_t i = 0; i < n; ++i) da[i] += dout[i];
  }
  if (db != nullptr) {
    for (int64_t i = 0; i < n; ++i) db[i] += dout[i];
  }
}

}  // namespace partrain::runner::ops
