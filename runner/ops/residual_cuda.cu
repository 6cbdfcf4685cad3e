// The residual connection on the GPU, beside its CPU reference (residual.h).
#include <cstdint>

#include "runner/device/cuda_kernel_support.cuh"
#include "runner/device/cuda_kernels.h"

namespace partrain::runner::cuda_kernels {
namespace {

__global__ void add_kernel(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride()) out[i] = a[i] + b[i];
}

__global__ void accumulate_kernel(float* gradient, const float* dout, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride()) gradient[i] += dout[i];
}

}  // namespace

cudaError_t residual_forward(cudaStream_t stream, float* out, const float* a, const float* b,
                             int64_t n) {
  return launch_elements(stream, n, add_kernel, out, a, b, n);
}

cudaError_t residual_backward(cudaStream_t stream, float* da, float* db, const float* dout,
                              int64_t n) {
  cudaError_t error = cudaSuccess;
  if (da != nullptr) error = launch_elements(stream, n, accumulate_kernel, da, dout, n);
  if (error == cudaSuccess && db != nullptr) {
    error = launch_elements(stream, n, accumulate_kernel, db, dout, n);
  }
  return error;
}

}  // namespace partrain::runner::cuda_kernels
