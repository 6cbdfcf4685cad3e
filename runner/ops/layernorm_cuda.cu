// LayerNorm on the GPU, beside its CPU reference (layernorm.h): one block per row, the variance
// about the mean in two passes as the CPU computes it; dweight and dbias are column sums.
#include <cstdint>

#include "runner/device/cuda_kernel_support.cuh"
#include "runner/device/cuda_kernels.h"
#include "runner/ops/layernorm.h"

namespace partrain::runner::cuda_kernels {
namespace {

__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp,
                                         const float* weight, const float* bias, int64_t N,
                                         int64_t C) {
  const auto width = static_cast<float>(C);
  for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
    const float* x = inp + row * C;
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) sum += x[i];
    const float m = block_reduce(sum, Sum{}, 0.0f) / width;
    // Two passes, as the CPU reference: the variance about the mean, not E[x^2] - E[x]^2.
    float square_sum = 0.0f;
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) square_sum += (x[i] - m) * (x[i] - m);
    const float variance = block_reduce(square_sum, Sum{}, 0.0f) / width;  // biased
    const float s = 1.0f / sqrtf(variance + ops::kLayerNormEps);
    float* y = out + row * C;
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x)
      y[i] = (x[i] - m) * s * weight[i] + bias[i];
    if (threadIdx.x == 0) {
      mean[row] = m;
      rstd[row] = s;
    }
  }
}

// dinp only; dweight and dbias are column sums (column_sums_kernel<true>).
__global__ void layernorm_backward_kernel(float* dinp, const float* dout, const float* inp,
                                          const float* weight, const float* mean, const float* rstd,
                                          int64_t N, int64_t C) {
  const auto width = static_cast<float>(C);
  for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
    const float* x = inp + row * C;
    const float* dy = dout + row * C;
    const float m = mean[row];
    const float s = rstd[row];
    float dnorm_sum = 0.0f;
    float dnorm_norm_sum = 0.0f;
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
      const float norm = (x[i] - m) * s;
      const float dnorm = weight[i] * dy[i];
      dnorm_sum += dnorm;
      dnorm_norm_sum += dnorm * norm;
    }
    const float dnorm_mean = block_reduce(dnorm_sum, Sum{}, 0.0f) / width;
    const float dnorm_norm_mean = block_reduce(dnorm_norm_sum, Sum{}, 0.0f) / width;
    float* dx = dinp + row * C;
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
      const float norm = (x[i] - m) * s;
      const float dnorm = weight[i] * dy[i];
      dx[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
  }
}

}  // namespace

cudaError_t layernorm_forward(cudaStream_t stream, float* out, float* mean, float* rstd,
                              const float* inp, const float* weight, const float* bias, int64_t N,
                              int64_t C) {
  if (N <= 0 || C <= 0) return cudaSuccess;
  return launch(stream, row_blocks(N), layernorm_forward_kernel, out, mean, rstd, inp, weight,
                bias, N, C);
}

cudaError_t layernorm_backward(cudaStream_t stream, float* dinp, float* dweight, float* dbias,
                               const float* dout, const float* inp, const float* weight,
                               const float* mean, const float* rstd, int64_t N, int64_t C) {
  if (N <= 0 || C <= 0) return cudaSuccess;
  const cudaError_t error = launch(stream, row_blocks(N), layernorm_backward_kernel, dinp, dout,
                                   inp, weight, mean, rstd, N, C);
  if (error != cudaSuccess) return error;
  return launch_column_sums<true>(stream, dweight, dbias, dout, inp, mean, rstd, N, C);
}

}  // namespace partrain::runner::cuda_kernels
