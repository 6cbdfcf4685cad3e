// The CUDA device's fill and scale (Device::fill, Device::scale): grid-stride loops, and the
// driver's memset for the zero fills that clear gradients and accumulators.
#include <cmath>
#include <cstdint>

#include "runner/device/cuda_kernel_support.cuh"
#include "runner/device/cuda_kernels.h"

namespace partrain::runner::cuda_kernels {
namespace {

__global__ void fill_kernel(float* x, int64_t n, float value) {
  for (int64_t i = first_index(); i < n; i += index_stride()) x[i] = value;
}

__global__ void scale_kernel(float* x, int64_t n, float factor) {
  for (int64_t i = first_index(); i < n; i += index_stride()) x[i] *= factor;
}

}  // namespace

cudaError_t fill(cudaStream_t stream, float* x, int64_t n, float value) {
  // +0.0f is all zero bits: the driver's memset (most fills zero gradients and accumulators).
  if (value == 0.0f && !std::signbit(value) && n > 0) {
    return cudaMemsetAsync(x, 0, static_cast<size_t>(n) * sizeof(float), stream);
  }
  return launch_elements(stream, n, fill_kernel, x, n, value);
}

cudaError_t scale(cudaStream_t stream, float* x, int64_t n, float factor) {
  return launch_elements(stream, n, scale_kernel, x, n, factor);
}

}  // namespace partrain::runner::cuda_kernels
