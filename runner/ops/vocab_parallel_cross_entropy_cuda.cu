// Megatron's vocab-parallel cross-entropy on the GPU, beside its CPU reference
// (vocab_parallel_cross_entropy.h): each rank's part of the row maximum, the sum of exponentials
// and the target logit (the all-reduces between them are the caller's), then the loss and the
// gradient.
#include <cmath>
#include <cstdint>

#include "runner/device/cuda_kernel_support.cuh"
#include "runner/device/cuda_kernels.h"

namespace partrain::runner::cuda_kernels {
namespace {

__global__ void local_max_kernel(float* row_max, const float* logits, int64_t N, int64_t V_local) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float* row = logits + n * V_local;
    float m = -INFINITY;  // an empty shard must not win the MAX all-reduce
    for (int64_t j = threadIdx.x; j < V_local; j += blockDim.x) m = fmaxf(m, row[j]);
    m = block_reduce(m, Max{}, -INFINITY);
    if (threadIdx.x == 0) row_max[n] = m;
  }
}

__global__ void local_sum_exp_kernel(float* row_sum_exp, const float* logits,
                                     const float* global_max, int64_t N, int64_t V_local) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float* row = logits + n * V_local;
    const float m = global_max[n];
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < V_local; j += blockDim.x) sum += expf(row[j] - m);
    sum = block_reduce(sum, Sum{}, 0.0f);
    if (threadIdx.x == 0) row_sum_exp[n] = sum;
  }
}

__global__ void local_target_logit_kernel(float* target_logit, const float* logits,
                                          const int32_t* targets, int64_t N, int64_t V_local,
                                          int64_t vocab_start) {
  for (int64_t n = first_index(); n < N; n += index_stride()) {
    const int64_t local = targets[n] - vocab_start;
    target_logit[n] = local >= 0 && local < V_local ? logits[n * V_local + local] : 0.0f;
  }
}

__global__ void vocab_parallel_loss_kernel(float* losses, const float* global_max,
                                           const float* global_sum_exp,
                                           const float* global_target_logit, int64_t N) {
  for (int64_t n = first_index(); n < N; n += index_stride()) {
    losses[n] = static_cast<float>(log(static_cast<double>(global_sum_exp[n])) +
                                   static_cast<double>(global_max[n]) -
                                   static_cast<double>(global_target_logit[n]));
  }
}

__global__ void vocab_parallel_backward_kernel(float* dlogits, const float* logits,
                                               const int32_t* targets, const float* global_max,
                                               const float* global_sum_exp, int64_t N,
                                               int64_t V_local, int64_t vocab_start,
                                               float dloss_scale) {
  const int64_t n_elements = N * V_local;
  for (int64_t i = first_index(); i < n_elements; i += index_stride()) {
    const int64_t n = i / V_local;
    const int64_t j = i % V_local;
    const float probability = expf(logits[i] - global_max[n]) / global_sum_exp[n];
    const float indicator = j == targets[n] - vocab_start ? 1.0f : 0.0f;  // not here: never j
    dlogits[i] += (probability - indicator) * dloss_scale;
  }
}

}  // namespace

cudaError_t vocab_parallel_local_max(cudaStream_t stream, float* row_max, const float* logits,
                                     int64_t N, int64_t V_local) {
  if (N <= 0) return cudaSuccess;
  return launch(stream, row_blocks(N), local_max_kernel, row_max, logits, N, V_local);
}

cudaError_t vocab_parallel_local_sum_exp(cudaStream_t stream, float* row_sum_exp,
                                         const float* logits, const float* global_max, int64_t N,
                                         int64_t V_local) {
  if (N <= 0) return cudaSuccess;
  return launch(stream, row_blocks(N), local_sum_exp_kernel, row_sum_exp, logits, global_max, N,
                V_local);
}

cudaError_t vocab_parallel_local_target_logit(cudaStream_t stream, float* target_logit,
                                              const float* logits, const int32_t* targets,
                                              int64_t N, int64_t V_local, int64_t vocab_start) {
  return launch_elements(stream, N, local_target_logit_kernel, target_logit, logits, targets, N,
                         V_local, vocab_start);
}

cudaError_t vocab_parallel_loss(cudaStream_t stream, float* losses, const float* global_max,
                                const float* global_sum_exp, const float* global_target_logit,
                                int64_t N) {
  return launch_elements(stream, N, vocab_parallel_loss_kernel, losses, global_max, global_sum_exp,
                         global_target_logit, N);
}

cudaError_t vocab_parallel_backward(cudaStream_t stream, float* dlogits, const float* logits,
                                    const int32_t* targets, const float* global_max,
                                    const float* global_sum_exp, int64_t N, int64_t V_local,
                                    int64_t vocab_start, float dloss_scale) {
  return launch_elements(stream, N * V_local, vocab_parallel_backward_kernel, dlogits, logits,
                         targets, global_max, global_sum_exp, N, V_local, vocab_start, dloss_scale);
}

}  // namespace partrain::runner::cuda_kernels
