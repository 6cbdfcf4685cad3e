// AdamW on the GPU, beside its CPU reference (adamw.h): one fused pass over parameters,
// gradients (fp32, or bf16 widened as read) and both moments, writing the bf16 copy of the
// parameters where there is one.
#include <cstdint>

#include "runner/device/cuda_kernel_bf16.cuh"
#include "runner/device/cuda_kernel_support.cuh"
#include "runner/device/cuda_kernels.h"

namespace partrain::runner::cuda_kernels {
namespace {

template <typename Grad>
__global__ void adamw_kernel(float* params, const Grad* grads, float* m, float* v,
                             uint16_t* params_bf16, int64_t n, float learning_rate, float beta1,
                             float beta2, float eps, float weight_decay, float grad_scale,
                             float bias_correction1, float bias_correction2) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    const float g = widened(grads[i]) * grad_scale;
    const float m_i = beta1 * m[i] + (1.0f - beta1) * g;
    const float v_i = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = m_i;
    v[i] = v_i;
    const float m_hat = m_i / bias_correction1;
    const float v_hat = v_i / bias_correction2;
    const float p = params[i];
    const float updated = p - learning_rate * (m_hat / (sqrtf(v_hat) + eps) + weight_decay * p);
    params[i] = updated;
    if (params_bf16 != nullptr) store_as(params_bf16[i], updated);
  }
}

template <typename Grad>
cudaError_t launch_adamw(cudaStream_t stream, float* params, const Grad* grads, float* m, float* v,
                         uint16_t* params_bf16, int64_t n, const AdamWStep& s) {
  return launch_elements(stream, n, adamw_kernel<Grad>, params, grads, m, v, params_bf16, n,
                         s.learning_rate, s.beta1, s.beta2, s.eps, s.weight_decay, s.grad_scale,
                         s.bias_correction1, s.bias_correction2);
}

}  // namespace

cudaError_t adamw_update(cudaStream_t stream, float* params, const float* grads, float* m, float* v,
                         uint16_t* params_bf16, int64_t n, const AdamWStep& step) {
  return launch_adamw(stream, params, grads, m, v, params_bf16, n, step);
}

cudaError_t adamw_update(cudaStream_t stream, float* params, const uint16_t* grads, float* m,
                         float* v, uint16_t* params_bf16, int64_t n, const AdamWStep& step) {
  return launch_adamw(stream, params, grads, m, v, params_bf16, n, step);
}

}  // namespace partrain::runner::cuda_kernels
