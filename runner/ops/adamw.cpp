#include "runner/ops/adamw.h"

#include <cmath>

#include "runner/comm/dtype.h"

namespace partrain::runner::ops {
namespace {

float widen(float grad) { return grad; }
float widen(uint16_t grad) { return comm::bf16_to_float(grad); }

template <typename Grad>
void update(float* params, const Grad* grads, float* m, float* v, int64_t n,
            const AdamWConfig& config, int64_t step) {
  const auto exponent = static_cast<double>(step);
  const auto bias_correction1 = static_cast<float>(1.0 - std::pow(config.beta1, exponent));
  const auto bias_correction2 = static_cast<float>(1.0 - std::pow(config.beta2, exponent));
  for (int64_t i = 0; i < n; ++i) {
    const float g = widen(grads[i]) * config.grad_scale;
    m[i] = config.beta1 * m[i] + (1.0f - config.beta1) * g;
    v[i] = config.beta2 * v[i] + (1.0f - config.beta2) * g * g;
    const float m_hat = m[i] / bias_correction1;
    const float v_hat = v[i] / bias_correction2;
    params[i] -= config.learning_rate *
                 (m_hat / (std::sqrt(v_hat) + config.eps) + config.weight_decay * params[i]);
  }
}

}  // namespace

void adamw_update(float* params, const float* grads, float* m, float* v, int64_t n,
                  const AdamWConfig& config, int64_t step) {
  update(params, grads, m, v, n, config, step);
}

void adamw_update(float* params, const uint16_t* grads, float* m, float* v, int64_t n,
                  const AdamWConfig& config, int64_t step) {
  update(params, grads, m, v, n, config, step);
}

}  // namespace partrain::runner::ops
