// Attention's causal softmax on the GPU, beside its CPU reference (attention.h; the products QK^T
// and PV are cuBLAS's): one warp per row, the row held in registers up to 2048 columns and
// streamed through memory beyond.
#include <cmath>
#include <cstdint>

#include "runner/device/cuda_kernel_bf16.cuh"
#include "runner/device/cuda_kernel_support.cuh"
#include "runner/device/cuda_kernels.h"

namespace partrain::runner::cuda_kernels {
namespace {

// The probabilities and dL/d(scores) as stored: fp32 (rounded to bf16 values when asked: the
// operands of bf16 GEMMs), or bf16 bits. Read back as fp32.
__device__ inline void store_element(float* x, float value, bool round) {
  *x = round ? __bfloat162float(__float2bfloat16_rn(value)) : value;
}
__device__ inline void store_element(uint16_t* x, float value, bool) {
  *x = __bfloat16_as_ushort(__float2bfloat16_rn(value));
}
__device__ inline float load_element(const float* x) { return *x; }
__device__ inline float load_element(const uint16_t* x) {
  return __bfloat162float(__ushort_as_bfloat16(*x));
}

// Each lane touches only its own columns j = lane, lane + 32, ..., so the row is updated in
// place without synchronisation (probabilities may be the scores themselves, in fp32); all 32
// lanes of a warp share a row, so the shuffles are full. The exponentials go through the scores.
template <typename Prob>
__global__ void causal_softmax_forward_kernel(float* scores, Prob* probabilities, int64_t rows,
                                              int64_t T, bool round) {
  const int lane = threadIdx.x % kWarp;
  for (int64_t r = first_warp_row(); r < rows; r += warp_row_stride()) {
    float* row = scores + r * T;
    Prob* out = probabilities + r * T;
    const int64_t t = r % T;  // the query; keys t2 <= t are visible
    float max_score = -INFINITY;
    for (int64_t j = lane; j <= t; j += kWarp) max_score = fmaxf(max_score, row[j]);
    max_score = warp_reduce(max_score, Max{});
    float exp_sum = 0.0f;
    for (int64_t j = lane; j <= t; j += kWarp) {
      const float e = expf(row[j] - max_score);
      row[j] = e;
      exp_sum += e;
    }
    const float inv_sum = 1.0f / warp_reduce(exp_sum, Sum{});
    for (int64_t j = lane; j < T; j += kWarp) {
      store_element(out + j, j <= t ? row[j] * inv_sum : 0.0f, round);
    }
  }
}

// dp holds dL/dP; dscores may be dp itself (fp32).
template <typename Prob, typename Grad>
__global__ void causal_softmax_backward_kernel(const float* dp, const Prob* probabilities,
                                               Grad* dscores, int64_t rows, int64_t T,
                                               float scale) {
  const int lane = threadIdx.x % kWarp;
  for (int64_t r = first_warp_row(); r < rows; r += warp_row_stride()) {
    const Prob* p = probabilities + r * T;
    const float* d = dp + r * T;
    Grad* out = dscores + r * T;
    const int64_t t = r % T;
    float weighted_sum = 0.0f;
    for (int64_t j = lane; j <= t; j += kWarp) weighted_sum += load_element(p + j) * d[j];
    weighted_sum = warp_reduce(weighted_sum, Sum{});
    for (int64_t j = lane; j < T; j += kWarp) {
      const float value = j <= t ? load_element(p + j) * (d[j] - weighted_sum) * scale : 0.0f;
      store_element(out + j, value, false);
    }
  }
}

// Rows of up to kWarp * kPerLane columns (kPerLane a compile-time bound, so the row lives in
// registers): the visible part of the row is read from memory once and the whole row written
// once, the floor for a softmax; the loops above read it three times and write it twice, about
// 4x that floor on an H100 at T = 2048 (docs/gpu-validation.md). Lane `lane` holds columns
// lane + kWarp i, so each lane's sums run in the same order as above.
template <typename Prob, int kPerLane>
__global__ void __launch_bounds__(kThreads)
    causal_softmax_forward_rows_kernel(const float* scores, Prob* probabilities, int64_t rows,
                                       int64_t T, bool round) {
  const int lane = threadIdx.x % kWarp;
  for (int64_t r = first_warp_row(); r < rows; r += warp_row_stride()) {
    const float* row = scores + r * T;
    Prob* out = probabilities + r * T;
    const int64_t t = r % T;
    float values[kPerLane];
    float max_score = -INFINITY;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t j = lane + static_cast<int64_t>(kWarp) * i;
      values[i] = j <= t ? row[j] : -INFINITY;
      max_score = fmaxf(max_score, values[i]);
    }
    max_score = warp_reduce(max_score, Max{});
    float exp_sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t j = lane + static_cast<int64_t>(kWarp) * i;
      values[i] = j <= t ? expf(values[i] - max_score) : 0.0f;
      exp_sum += values[i];
    }
    const float inv_sum = 1.0f / warp_reduce(exp_sum, Sum{});
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t j = lane + static_cast<int64_t>(kWarp) * i;
      if (j < T) store_element(out + j, j <= t ? values[i] * inv_sum : 0.0f, round);
    }
  }
}

// The backward the same way: the visible parts of P and dL/dP read once, dS written once. Both
// rows in registers take 200 to 254 of them a thread at kPerLane 64 (sm_80, sm_90: one 256-thread
// block an SM, no spills); __launch_bounds__ keeps every variant launchable at kThreads.
template <typename Prob, typename Grad, int kPerLane>
__global__ void __launch_bounds__(kThreads)
    causal_softmax_backward_rows_kernel(const float* dp, const Prob* probabilities, Grad* dscores,
                                        int64_t rows, int64_t T, float scale) {
  const int lane = threadIdx.x % kWarp;
  for (int64_t r = first_warp_row(); r < rows; r += warp_row_stride()) {
    const Prob* p = probabilities + r * T;
    const float* d = dp + r * T;
    Grad* out = dscores + r * T;
    const int64_t t = r % T;
    float p_values[kPerLane];
    float d_values[kPerLane];
    float weighted_sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t j = lane + static_cast<int64_t>(kWarp) * i;
      p_values[i] = j <= t ? load_element(p + j) : 0.0f;
      d_values[i] = j <= t ? d[j] : 0.0f;
      if (j <= t) weighted_sum += p_values[i] * d_values[i];
    }
    weighted_sum = warp_reduce(weighted_sum, Sum{});
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t j = lane + static_cast<int64_t>(kWarp) * i;
      if (j < T) {
        store_element(out + j, j <= t ? p_values[i] * (d_values[i] - weighted_sum) * scale : 0.0f,
                      false);
      }
    }
  }
}

// The register-resident kernels for rows up to kWarp * 64 = 2048 columns (the smallest variant
// that holds the row, so short rows waste no registers); longer rows stream through memory.
template <typename Prob>
cudaError_t launch_softmax_forward(cudaStream_t stream, float* scores, Prob* probabilities,
                                   int64_t rows, int64_t T, bool round) {
  if (rows <= 0 || T <= 0) return cudaSuccess;
  const int blocks = warp_row_blocks(rows);
  if (T <= kWarp * 4) {
    return launch(stream, blocks, causal_softmax_forward_rows_kernel<Prob, 4>, scores,
                  probabilities, rows, T, round);
  }
  if (T <= kWarp * 16) {
    return launch(stream, blocks, causal_softmax_forward_rows_kernel<Prob, 16>, scores,
                  probabilities, rows, T, round);
  }
  if (T <= kWarp * 64) {
    return launch(stream, blocks, causal_softmax_forward_rows_kernel<Prob, 64>, scores,
                  probabilities, rows, T, round);
  }
  return launch(stream, blocks, causal_softmax_forward_kernel<Prob>, scores, probabilities, rows, T,
                round);
}

template <typename Prob, typename Grad>
cudaError_t launch_softmax_backward(cudaStream_t stream, const float* dp, const Prob* probabilities,
                                    Grad* dscores, int64_t rows, int64_t T, float scale) {
  if (rows <= 0 || T <= 0) return cudaSuccess;
  const int blocks = warp_row_blocks(rows);
  if (T <= kWarp * 4) {
    return launch(stream, blocks, causal_softmax_backward_rows_kernel<Prob, Grad, 4>, dp,
                  probabilities, dscores, rows, T, scale);
  }
  if (T <= kWarp * 16) {
    return launch(stream, blocks, causal_softmax_backward_rows_kernel<Prob, Grad, 16>, dp,
                  probabilities, dscores, rows, T, scale);
  }
  if (T <= kWarp * 64) {
    return launch(stream, blocks, causal_softmax_backward_rows_kernel<Prob, Grad, 64>, dp,
                  probabilities, dscores, rows, T, scale);
  }
  return launch(stream, blocks, causal_softmax_backward_kernel<Prob, Grad>, dp, probabilities,
                dscores, rows, T, scale);
}

}  // namespace

cudaError_t causal_softmax_forward(cudaStream_t stream, float* scores, float* probabilities,
                                   int64_t rows, int64_t T, bool round_to_bf16) {
  return launch_softmax_forward(stream, scores, probabilities, rows, T, round_to_bf16);
}

cudaError_t causal_softmax_forward(cudaStream_t stream, float* scores, uint16_t* probabilities,
                                   int64_t rows, int64_t T) {
  return launch_softmax_forward(stream, scores, probabilities, rows, T, true);
}

cudaError_t causal_softmax_backward(cudaStream_t stream, const float* dp,
                                    const float* probabilities, float* dscores, int64_t rows,
                                    int64_t T, float scale) {
  return launch_softmax_backward(stream, dp, probabilities, dscores, rows, T, scale);
}

cudaError_t causal_softmax_backward(cudaStream_t stream, const float* dp,
                                    const uint16_t* probabilities, uint16_t* dscores, int64_t rows,
                                    int64_t T, float scale) {
  return launch_softmax_backward(stream, dp, probabilities, dscores, rows, T, scale);
}

}  // namespace partrain::runner::cuda_kernels
