// What the CUDA device's kernels share (one .cu per op family, beside its CPU reference in
// runner/ops/, and runner/device/cuda_elementwise.cu): block sizes, grid-stride loops, widening
// bf16 to fp32, warp and block reductions, the launch helpers, and the column sums under matmul's
// dbias and LayerNorm's dweight and dbias. Included by .cu files only; rounding to bf16 is in
// cuda_kernel_bf16.cuh.
//
// Written to match the CPU references' arithmetic closely enough for 1e-5 relative checks
// (tests/gpu/cuda_device_test.cpp): plain, coalesced, grid-stride loops; reductions in registers,
// then warp shuffles, then one shared-memory slot per warp. No fast-math: expf, tanhf, sqrtf and
// division keep CUDA's accurate defaults.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace partrain::runner::cuda_kernels {

inline constexpr int kWarp = 32;
inline constexpr int kThreads = 256;  // element-wise and row blocks (a multiple of kWarp)
inline constexpr int kWarpsPerBlock = kThreads / kWarp;
inline constexpr int64_t kMaxBlocks = 65536;  // grid-stride loops cover anything larger

inline int element_blocks(int64_t n) {
  return static_cast<int>(std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
}
inline int row_blocks(int64_t rows) { return static_cast<int>(std::min(rows, kMaxBlocks)); }
inline int warp_row_blocks(int64_t rows) {
  return static_cast<int>(std::min((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxBlocks));
}

__device__ inline float quiet_nan() { return __int_as_float(0x7fc00000); }

// Grid-stride indices over [0, n).
__device__ inline int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t index_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// Grid-stride rows, one warp a row (kThreads-thread blocks).
__device__ inline int64_t first_warp_row() {
  return static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
}
__device__ inline int64_t warp_row_stride() {
  return static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
}

// A value as fp32: itself, or a bf16 one (a parameter or gradient as stored) widened exactly
// (its bits are fp32's top half).
__device__ inline float widened(float x) { return x; }
__device__ inline float widened(uint16_t x) {
  return __uint_as_float(static_cast<uint32_t>(x) << 16);
}
// And back: an fp32 result written as its destination stores it, here itself (rounded to bf16:
// cuda_kernel_bf16.cuh).
__device__ inline void store_as(float& destination, float x) { destination = x; }

struct Sum {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename T, typename Op>
__device__ T warp_reduce(T value, Op op) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

// The whole block's reduction, returned to every thread. Every thread of the block must call it
// (it synchronises); blockDim.x is a multiple of kWarp.
template <typename T, typename Op>
__device__ T block_reduce(T value, Op op, T identity) {
  __shared__ T per_warp[kWarp];
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  value = warp_reduce(value, op);
  __syncthreads();  // a previous call's readers are done with per_warp
  if (lane == 0) per_warp[warp] = value;
  __syncthreads();
  if (warp == 0) {
    const int warps = static_cast<int>(blockDim.x) / kWarp;
    value = warp_reduce(lane < warps ? per_warp[lane] : identity, op);
    if (lane == 0) per_warp[0] = value;
  }
  __syncthreads();
  return per_warp[0];
}

// A block owns kColumnTile adjacent columns over every row, so each sum is made in one place, in
// a fixed order (deterministic, no atomics); its kRowLanes thread rows read consecutive columns
// of a row together (coalesced) and are summed at the end.
inline constexpr int kColumnTile = 32;
inline constexpr int kRowLanes = 16;

// dbias[c] += sum_n dout[n, c]; with kLayerNorm also dweight[c] += sum_n xhat[n, c] dout[n, c],
// xhat recomputed from the input and the saved mean and rstd.
template <bool kLayerNorm>
__global__ void column_sums_kernel(float* dweight, float* dbias, const float* dout,
                                   const float* inp, const float* mean, const float* rstd,
                                   int64_t N, int64_t C) {
  __shared__ float bias_part[kRowLanes][kColumnTile + 1];  // +1: no bank conflicts on the sum
  __shared__ float weight_part[kRowLanes][kColumnTile + 1];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumnTile + threadIdx.x;
  float bias_sum = 0.0f;
  float weight_sum = 0.0f;
  if (c < C) {
    for (int64_t n = threadIdx.y; n < N; n += kRowLanes) {
      const float dy = dout[n * C + c];
      bias_sum += dy;
      if constexpr (kLayerNorm) weight_sum += (inp[n * C + c] - mean[n]) * rstd[n] * dy;
    }
  }
  bias_part[threadIdx.y][threadIdx.x] = bias_sum;
  weight_part[threadIdx.y][threadIdx.x] = weight_sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float bias_total = 0.0f;
    float weight_total = 0.0f;
    for (int lane = 0; lane < kRowLanes; ++lane) {
      bias_total += bias_part[lane][threadIdx.x];
      weight_total += weight_part[lane][threadIdx.x];
    }
    dbias[c] += bias_total;
    if constexpr (kLayerNorm) dweight[c] += weight_total;
  }
}

template <bool kLayerNorm>
cudaError_t launch_column_sums(cudaStream_t stream, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* mean, const float* rstd, int64_t N,
                               int64_t C) {
  const dim3 block(kColumnTile, kRowLanes);
  const auto grid = static_cast<unsigned>((C + kColumnTile - 1) / kColumnTile);
  column_sums_kernel<kLayerNorm>
      <<<grid, block, 0, stream>>>(dweight, dbias, dout, inp, mean, rstd, N, C);
  return cudaGetLastError();
}

// Queues kernel<<<blocks, kThreads>>> on `stream` and returns the launch's error.
template <typename... Params, typename... Args>
cudaError_t launch(cudaStream_t stream, int blocks, void (*kernel)(Params...), Args... args) {
  kernel<<<blocks, kThreads, 0, stream>>>(args...);
  return cudaGetLastError();
}

// An element-wise kernel, a grid-stride loop over n elements; nothing is queued when n is empty.
template <typename... Params, typename... Args>
cudaError_t launch_elements(cudaStream_t stream, int64_t n, void (*kernel)(Params...),
                            Args... args) {
  if (n <= 0) return cudaSuccess;
  return launch(stream, element_blocks(n), kernel, args...);
}

}  // namespace partrain::runner::cuda_kernels
