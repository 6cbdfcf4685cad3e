// The MLP workload's mean-square loss gradient on the GPU, beside its CPU reference
// (mean_square_loss.h).
#include <cstdint>

#include "runner/device/cuda_kernel_support.cuh"
#include "runner/device/cuda_kernels.h"

namespace partrain::runner::cuda_kernels {
namespace {

__global__ void scaled_accumulate_kernel(float* dy, const float* y, int64_t n, float factor) {
  for (int64_t i = first_index(); i < n; i += index_stride()) dy[i] += factor * y[i];
}

}  // namespace

cudaError_t mean_square_loss_backward(cudaStream_t stream, float* dy, const float* y, int64_t n,
                                      float dloss_scale) {
  if (n <= 0) return cudaSuccess;
  // The factor as runner/ops/mean_square_loss.cpp rounds it.
  const auto factor = static_cast<float>(2.0 / static_cast<double>(n) * dloss_scale);
  return launch_elements(stream, n, scaled_accumulate_kernel, dy, y, n, factor);
}

}  // namespace partrain::runner::cuda_kernels
