#include "runner/ops/layernorm.h"

#include <cmath>

namespace partrain::runner::ops {

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    // Two passes (mean, then variance about it) instead of E[x^2] - E[x]^2, which cancels badly.
    double sum = 0.0;
    for (int64_t i = 0; i < C; ++i) sum += x[i];
    const double m = sum / static_cast<double>(C);
    double square_sum = 0.0;
    for (int64_t i = 0; i < C; ++i) square_sum += (x[i] - m) * (x[i] - m);
    const double variance = square_sum / static_cast<double>(C);  // biased, as PyTorch
    const auto s = static_cast<float>(1.0 / std::sqrt(variance + kLayerNormEps));
    const auto mf = static_cast<float>(m);
    float* y = out + n * C;
    for (int64_t i = 0; i < C; ++i) y[i] = (x[i] - mf) * s * weight[i] + bias[i];
    mean[n] = mf;
    rstd[n] = s;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    const float* dy = dout + n * C;
    const float m = mean[n];
    const float s = rstd[n];
    // dxhat = dy * weight; dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) (llm.c).
    double dnorm_sum = 0.0;
    double dnorm_norm_sum = 0.0;
    for (int64_t i = 0; i < C; ++i) {
      const float norm = (x[i] - m) * s;
      const float dnorm = weight[i] * dy[i];
      dnorm_sum += dnorm;
      dnorm_norm_sum += dnorm * norm;
    }
    const auto dnorm_mean = static_cast<float>(dnorm_sum / static_cast<double>(C));
    const auto dnorm_norm_mean = static_cast<float>(dnorm_norm_sum / static_cast<double>(C));
    float* dx = dinp + n * C;
    for (int64_t i = 0; i < C; ++i) {
      const float norm = (x[i] - m) * s;
      const float dnorm = weight[i] * dy[i];
      dbias[i] += dy[i];
      dweight[i] += norm * dy[i];
      dx[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
  }
}

}  // namespace partrain::runner::ops
