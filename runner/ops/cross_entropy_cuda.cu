// Cross-entropy over whole logits rows on the GPU, beside its CPU reference (cross_entropy.h):
// one block per row.
#include <cmath>
#include <cstdint>

#include "runner/device/cuda_kernel_support.cuh"
#include "runner/device/cuda_kernels.h"

namespace partrain::runner::cuda_kernels {
namespace {

struct RowSoftmax {
  float max_logit;
  float sum_exp;  // sum_j exp(logit_j - max_logit)
};

// Every thread of the block must call it.
__device__ RowSoftmax row_softmax(const float* row, int64_t V) {
  float max_logit = -INFINITY;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) max_logit = fmaxf(max_logit, row[j]);
  max_logit = block_reduce(max_logit, Max{}, -INFINITY);
  float sum_exp = 0.0f;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) sum_exp += expf(row[j] - max_logit);
  return {max_logit, block_reduce(sum_exp, Sum{}, 0.0f)};
}

__global__ void cross_entropy_forward_kernel(float* losses, const float* logits,
                                             const int32_t* targets, int64_t N, int64_t V) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float* row = logits + n * V;
    const RowSoftmax softmax = row_softmax(row, V);
    if (threadIdx.x == 0) {
      const int64_t target = targets[n];
      // log S + M - z in double: the loss can be small beside M, and the CPU adds in double.
      losses[n] = target >= 0 && target < V
                      ? static_cast<float>(log(static_cast<double>(softmax.sum_exp)) +
                                           softmax.max_logit - row[target])
                      : quiet_nan();
    }
  }
}

__global__ void cross_entropy_backward_kernel(float* dlogits, const float* logits,
                                              const int32_t* targets, int64_t N, int64_t V,
                                              float dloss_scale) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float* row = logits + n * V;
    float* drow = dlogits + n * V;
    const RowSoftmax softmax = row_softmax(row, V);
    const float inv_sum = 1.0f / softmax.sum_exp;
    const int64_t target = targets[n];
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
      const float probability = expf(row[j] - softmax.max_logit) * inv_sum;
      const float indicator = j == target ? 1.0f : 0.0f;
      drow[j] += (probability - indicator) * dloss_scale;
    }
  }
}

}  // namespace

cudaError_t cross_entropy_forward(cudaStream_t stream, float* losses, const float* logits,
                                  const int32_t* targets, int64_t N, int64_t V) {
  if (N <= 0) return cudaSuccess;
  return launch(stream, row_blocks(N), cross_entropy_forward_kernel, losses, logits, targets, N,
                V);
}

cudaError_t cross_entropy_backward(cudaStream_t stream, float* dlogits, const float* logits,
                                   const int32_t* targets, int64_t N, int64_t V,
                                   float dloss_scale) {
  if (N <= 0 || V <= 0) return cudaSuccess;
  return launch(stream, row_blocks(N), cross_entropy_backward_kernel, dlogits, logits, targets, N,
                V, dloss_scale);
}

}  // namespace partrain::runner::cuda_kernels
