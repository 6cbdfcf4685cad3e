// The sum of squares under the global gradient norm on the GPU, beside its CPU reference
// (global_norm.h): in double, in two passes (each block's partial, then one block over those),
// so the sum is the same from run to run.
#include <algorithm>
#include <cstdint>

#include "runner/device/cuda_kernel_support.cuh"
#include "runner/device/cuda_kernels.h"

namespace partrain::runner::cuda_kernels {
namespace {

// Two passes for a deterministic sum: each block's double partial, then one block over those.
template <typename Value>
__global__ void sum_of_squares_partials_kernel(double* partials, const Value* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    const double value = widened(x[i]);
    sum += value * value;
  }
  sum = block_reduce(sum, Sum{}, 0.0);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void sum_partials_kernel(double* result, const double* partials, int count) {
  double sum = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_reduce(sum, Sum{}, 0.0);
  if (threadIdx.x == 0) *result = sum;
}

template <typename Value>
cudaError_t launch_sum_of_squares(cudaStream_t stream, double* result, double* partials,
                                  const Value* x, int64_t n) {
  // At least one block, so an empty input still writes 0.
  const int blocks = std::max(1, std::min(element_blocks(n), kSumOfSquaresPartials));
  const cudaError_t error = launch(stream, blocks, sum_of_squares_partials_kernel<Value>,
                                   partials, x, std::max<int64_t>(n, 0));
  if (error != cudaSuccess) return error;
  return launch(stream, 1, sum_partials_kernel, result, partials, blocks);
}

}  // namespace

cudaError_t sum_of_squares(cudaStream_t stream, double* result, double* partials, const float* x,
                           int64_t n) {
  return launch_sum_of_squares(stream, result, partials, x, n);
}

cudaError_t sum_of_squares(cudaStream_t stream, double* result, double* partials,
                           const uint16_t* x, int64_t n) {
  return launch_sum_of_squares(stream, result, partials, x, n);
}

}  // namespace partrain::runner::cuda_kernels
