// The CUDA device's own kernels: the non-GEMM ops of runner/ops, one kernel (or two) per op,
// written to match the CPU references' arithmetic closely enough for 1e-5 relative checks
// (tests/gpu/cuda_device_test.cpp). Plain, coalesced, grid-stride loops; reductions in registers,
// then warp shuffles, then one shared-memory slot per warp. No fast-math: expf, tanhf, sqrtf and
// division keep CUDA's accurate defaults.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "runner/device/cuda_kernels.h"
#include "runner/ops/layernorm.h"

namespace partrain::runner::cuda_kernels {
namespace {

constexpr int kWarp = 32;
constexpr int kThreads = 256;  // element-wise and row blocks (a multiple of kWarp)
constexpr int kWarpsPerBlock = kThreads / kWarp;
constexpr int64_t kMaxBlocks = 65536;                  // grid-stride loops cover anything larger
constexpr float kSqrtTwoOverPi = 0.7978845608028654f;  // runner/ops/gelu.cpp
constexpr float kGeluCubic = 0.044715f;

int element_blocks(int64_t n) {
  return static_cast<int>(std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
}
int row_blocks(int64_t rows) { return static_cast<int>(std::min(rows, kMaxBlocks)); }
int warp_row_blocks(int64_t rows) {
  return static_cast<int>(std::min((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxBlocks));
}

__device__ float quiet_nan() { return __int_as_float(0x7fc00000); }

// Grid-stride indices over [0, n).
__device__ int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ int64_t index_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// Grid-stride rows, one warp a row (kThreads-thread blocks).
__device__ int64_t first_warp_row() {
  return static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
}
__device__ int64_t warp_row_stride() { return static_cast<int64_t>(gridDim.x) * kWarpsPerBlock; }

// A value as fp32: itself, or a bf16 one (a parameter or gradient as stored) widened exactly
// (its bits are fp32's top half).
__device__ float widened(float x) { return x; }
__device__ float widened(uint16_t x) { return __uint_as_float(static_cast<uint32_t>(x) << 16); }
// And back: an fp32 result written as its destination stores it, itself or rounded to bf16
// (nearest even).
__device__ void store_as(float& destination, float x) { destination = x; }
__device__ void store_as(uint16_t& destination, float x) {
  destination = __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

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

// ---- element-wise ---------------------------------------------------------------------------

__global__ void fill_kernel(float* x, int64_t n, float value) {
  for (int64_t i = first_index(); i < n; i += index_stride()) x[i] = value;
}

__global__ void scale_kernel(float* x, int64_t n, float factor) {
  for (int64_t i = first_index(); i < n; i += index_stride()) x[i] *= factor;
}

__global__ void round_to_bf16_kernel(__nv_bfloat16* destination, const float* source, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    destination[i] = __float2bfloat16_rn(source[i]);
  }
}

// Two bf16 values as the 32 bits that hold them in memory, `first` at the lower address.
__device__ uint32_t bf16_pair_bits(float first, float second) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(first))) |
         static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(second))) << 16;
}

// Four elements a thread, one 16-byte load and one 8-byte store (a uint2: two bf16 pairs stored
// as a struct were two 4-byte stores in the PTX): the scalar loop's 2-byte stores moved about
// 1.9 TB/s of an H100's 3.35 (docs/gpu-validation.md, run 2).
__global__ void round_to_bf16_quads_kernel(uint2* destination, const float4* source,
                                           int64_t quads) {
  for (int64_t i = first_index(); i < quads; i += index_stride()) {
    const float4 q = source[i];
    destination[i] = make_uint2(bf16_pair_bits(q.x, q.y), bf16_pair_bits(q.z, q.w));
  }
}

__global__ void store_bf16_kernel(uint16_t* destination, float* values, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    const uint16_t bits = __bfloat16_as_ushort(__float2bfloat16_rn(values[i]));
    destination[i] = bits;
    values[i] = __uint_as_float(static_cast<uint32_t>(bits) << 16);
  }
}

// As round_to_bf16_quads_kernel, writing the rounded values back as well.
__global__ void store_bf16_quads_kernel(uint2* destination, float4* values, int64_t quads) {
  for (int64_t i = first_index(); i < quads; i += index_stride()) {
    const float4 q = values[i];
    const uint2 bits = make_uint2(bf16_pair_bits(q.x, q.y), bf16_pair_bits(q.z, q.w));
    destination[i] = bits;
    values[i] = make_float4(__uint_as_float(bits.x << 16), __uint_as_float(bits.x & 0xffff0000u),
                            __uint_as_float(bits.y << 16), __uint_as_float(bits.y & 0xffff0000u));
  }
}

__global__ void widen_bf16_kernel(float* destination, const uint16_t* source, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    destination[i] = __uint_as_float(static_cast<uint32_t>(source[i]) << 16);
  }
}

__global__ void accumulate_bf16_kernel(uint16_t* sum, const float* x, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    const float total = __uint_as_float(static_cast<uint32_t>(sum[i]) << 16) + x[i];
    sum[i] = __bfloat16_as_ushort(__float2bfloat16_rn(total));
  }
}

__global__ void add_kernel(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride()) out[i] = a[i] + b[i];
}

__global__ void accumulate_kernel(float* gradient, const float* dout, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride()) gradient[i] += dout[i];
}

// Each side fp32 or bf16 as stored (runner/ops/gelu.h), computed in fp32.
template <typename Out, typename In>
__global__ void gelu_forward_kernel(Out* out, const In* inp, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    const float x = widened(inp[i]);
    const float inner = kSqrtTwoOverPi * (x + kGeluCubic * x * x * x);
    store_as(out[i], 0.5f * x * (1.0f + tanhf(inner)));
  }
}

template <typename In>
__global__ void gelu_backward_kernel(float* dinp, const In* inp, const float* dout, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    const float x = widened(inp[i]);
    const float inner = kSqrtTwoOverPi * (x + kGeluCubic * x * x * x);
    const float tanh_inner = tanhf(inner);
    const float sech_squared = 1.0f - tanh_inner * tanh_inner;
    const float local_grad = 0.5f * (1.0f + tanh_inner) + 0.5f * x * sech_squared * kSqrtTwoOverPi *
                                                              (1.0f + 3.0f * kGeluCubic * x * x);
    dinp[i] += local_grad * dout[i];
  }
}

__global__ void add_bias_kernel(float* out, const float* bias, int64_t N, int64_t OC) {
  const int64_t n = N * OC;
  for (int64_t i = first_index(); i < n; i += index_stride()) out[i] += bias[i % OC];
}

__global__ void add_bias_and_round_kernel(uint16_t* out, const float* product, const float* bias,
                                          int64_t N, int64_t OC) {
  const int64_t n = N * OC;
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    store_as(out[i], bias != nullptr ? product[i] + bias[i % OC] : product[i]);
  }
}

// Four elements a thread (OC a multiple of 4: the four lie in one row), as the rounding quads.
__global__ void add_bias_and_round_quads_kernel(uint2* out, const float4* product,
                                                const float* bias, int64_t quads, int64_t OC) {
  for (int64_t i = first_index(); i < quads; i += index_stride()) {
    float4 q = product[i];
    if (bias != nullptr) {
      const int64_t column = (4 * i) % OC;
      q.x += bias[column];
      q.y += bias[column + 1];
      q.z += bias[column + 2];
      q.w += bias[column + 3];
    }
    out[i] = make_uint2(bf16_pair_bits(q.x, q.y), bf16_pair_bits(q.z, q.w));
  }
}

// ---- column sums: dbias and LayerNorm's dweight, dbias ----------------------------------------

// A block owns kColumnTile adjacent columns over every row, so each sum is made in one place, in
// a fixed order (deterministic, no atomics); its kRowLanes thread rows read consecutive columns
// of a row together (coalesced) and are summed at the end.
constexpr int kColumnTile = 32;
constexpr int kRowLanes = 16;

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

cudaError_t launch_column_sums(cudaStream_t stream, bool layernorm, float* dweight, float* dbias,
                               const float* dout, const float* inp, const float* mean,
                               const float* rstd, int64_t N, int64_t C) {
  const dim3 block(kColumnTile, kRowLanes);
  const auto grid = static_cast<unsigned>((C + kColumnTile - 1) / kColumnTile);
  if (layernorm) {
    column_sums_kernel<true>
        <<<grid, block, 0, stream>>>(dweight, dbias, dout, inp, mean, rstd, N, C);
  } else {
    column_sums_kernel<false>
        <<<grid, block, 0, stream>>>(dweight, dbias, dout, inp, mean, rstd, N, C);
  }
  return cudaGetLastError();
}

// ---- LayerNorm: one block per row ----------------------------------------------------------

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

// ---- attention's causal softmax: one warp per row ---------------------------------------------

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

// ---- embeddings -----------------------------------------------------------------------------

// Tables stored in fp32 or bf16 (Table), written in fp32.
template <typename Table>
__global__ void embedding_forward_kernel(float* out, const int32_t* tokens, const Table* wte_shard,
                                         const Table* wpe, int64_t T, int64_t C, int64_t n,
                                         int64_t vocab_start, int64_t vocab_end) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    const int64_t token_index = i / C;  // b * T + t
    const int64_t c = i % C;
    const int64_t token = tokens[token_index];
    float value = 0.0f;
    if (token >= vocab_start && token < vocab_end) {
      value = widened(wte_shard[(token - vocab_start) * C + c]);
    }
    if (wpe != nullptr) value += widened(wpe[(token_index % T) * C + c]);
    out[i] = value;
  }
}

// Tokens repeat (and every sample shares the positions), so rows are summed with atomics.
__global__ void embedding_backward_kernel(float* dwte_shard, float* dwpe, const float* dout,
                                          const int32_t* tokens, int64_t T, int64_t C, int64_t n,
                                          int64_t vocab_start, int64_t vocab_end) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    const int64_t token_index = i / C;
    const int64_t c = i % C;
    const int64_t token = tokens[token_index];
    const float dy = dout[i];
    if (token >= vocab_start && token < vocab_end) {
      atomicAdd(&dwte_shard[(token - vocab_start) * C + c], dy);
    }
    if (dwpe != nullptr) atomicAdd(&dwpe[(token_index % T) * C + c], dy);
  }
}

// ---- cross-entropy: one block per row ---------------------------------------------------------

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

// ---- vocab-parallel cross-entropy ---------------------------------------------------------------

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

// ---- mean-square loss, AdamW, global norm -------------------------------------------------------

__global__ void scaled_accumulate_kernel(float* dy, const float* y, int64_t n, float factor) {
  for (int64_t i = first_index(); i < n; i += index_stride()) dy[i] += factor * y[i];
}

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

}  // namespace

// ---- launchers ----------------------------------------------------------------------------------

namespace {

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

cudaError_t round_to_bf16(cudaStream_t stream, void* destination, const float* source, int64_t n) {
  auto* rounded = static_cast<__nv_bfloat16*>(destination);
  const bool aligned = reinterpret_cast<uintptr_t>(source) % alignof(float4) == 0 &&
                       reinterpret_cast<uintptr_t>(destination) % alignof(uint2) == 0;
  if (!aligned) return launch_elements(stream, n, round_to_bf16_kernel, rounded, source, n);
  const int64_t quads = n / 4;
  const cudaError_t error =
      launch_elements(stream, quads, round_to_bf16_quads_kernel,
                      static_cast<uint2*>(destination),
                      reinterpret_cast<const float4*>(source), quads);
  if (error != cudaSuccess) return error;
  const int64_t done = 4 * quads;  // the last n % 4 one at a time
  return launch_elements(stream, n - done, round_to_bf16_kernel, rounded + done, source + done,
                         n - done);
}

cudaError_t store_bf16(cudaStream_t stream, uint16_t* destination, float* values, int64_t n) {
  const bool aligned = reinterpret_cast<uintptr_t>(values) % alignof(float4) == 0 &&
                       reinterpret_cast<uintptr_t>(destination) % alignof(uint2) == 0;
  const int64_t quads = aligned ? n / 4 : 0;
  const cudaError_t error =
      launch_elements(stream, quads, store_bf16_quads_kernel, reinterpret_cast<uint2*>(destination),
                      reinterpret_cast<float4*>(values), quads);
  if (error != cudaSuccess) return error;
  const int64_t done = 4 * quads;  // the rest (all of it when unaligned) one at a time
  return launch_elements(stream, n - done, store_bf16_kernel, destination + done, values + done,
                         n - done);
}

cudaError_t widen_bf16(cudaStream_t stream, float* destination, const uint16_t* source, int64_t n) {
  return launch_elements(stream, n, widen_bf16_kernel, destination, source, n);
}

cudaError_t accumulate_bf16(cudaStream_t stream, uint16_t* sum, const float* x, int64_t n) {
  return launch_elements(stream, n, accumulate_bf16_kernel, sum, x, n);
}

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

cudaError_t gelu_forward(cudaStream_t stream, float* out, const float* inp, int64_t n) {
  return launch_elements(stream, n, gelu_forward_kernel<float, float>, out, inp, n);
}

cudaError_t gelu_forward(cudaStream_t stream, uint16_t* out, const uint16_t* inp, int64_t n) {
  return launch_elements(stream, n, gelu_forward_kernel<uint16_t, uint16_t>, out, inp, n);
}

cudaError_t gelu_forward(cudaStream_t stream, uint16_t* out, const float* inp, int64_t n) {
  return launch_elements(stream, n, gelu_forward_kernel<uint16_t, float>, out, inp, n);
}

cudaError_t gelu_forward(cudaStream_t stream, float* out, const uint16_t* inp, int64_t n) {
  return launch_elements(stream, n, gelu_forward_kernel<float, uint16_t>, out, inp, n);
}

cudaError_t gelu_backward(cudaStream_t stream, float* dinp, const float* inp, const float* dout,
                          int64_t n) {
  return launch_elements(stream, n, gelu_backward_kernel<float>, dinp, inp, dout, n);
}

cudaError_t gelu_backward(cudaStream_t stream, float* dinp, const uint16_t* inp, const float* dout,
                          int64_t n) {
  return launch_elements(stream, n, gelu_backward_kernel<uint16_t>, dinp, inp, dout, n);
}

cudaError_t add_bias(cudaStream_t stream, float* out, const float* bias, int64_t N, int64_t OC) {
  if (OC <= 0) return cudaSuccess;
  return launch_elements(stream, N * OC, add_bias_kernel, out, bias, N, OC);
}

cudaError_t add_bias_and_round(cudaStream_t stream, uint16_t* out, const float* product,
                               const float* bias, int64_t N, int64_t OC) {
  const bool quads = OC % 4 == 0 && reinterpret_cast<uintptr_t>(product) % alignof(float4) == 0 &&
                     reinterpret_cast<uintptr_t>(out) % alignof(uint2) == 0;
  if (!quads) {
    return launch_elements(stream, N * OC, add_bias_and_round_kernel, out, product, bias, N, OC);
  }
  return launch_elements(stream, N * OC / 4, add_bias_and_round_quads_kernel,
                         reinterpret_cast<uint2*>(out), reinterpret_cast<const float4*>(product),
                         bias, N * OC / 4, OC);
}

cudaError_t bias_backward(cudaStream_t stream, float* dbias, const float* dout, int64_t N,
                          int64_t OC) {
  if (N <= 0 || OC <= 0) return cudaSuccess;
  return launch_column_sums(stream, false, nullptr, dbias, dout, nullptr, nullptr, nullptr, N, OC);
}

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
  return launch_column_sums(stream, true, dweight, dbias, dout, inp, mean, rstd, N, C);
}

// The register-resident kernels for rows up to kWarp * 64 = 2048 columns (the smallest variant
// that holds the row, so short rows waste no registers); longer rows stream through memory.
namespace {

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

cudaError_t embedding_forward(cudaStream_t stream, float* out, const int32_t* tokens,
                              const float* wte_shard, const float* wpe, int64_t B, int64_t T,
                              int64_t C, int64_t vocab_start, int64_t vocab_end) {
  const int64_t n = B * T * C;
  return launch_elements(stream, n, embedding_forward_kernel<float>, out, tokens, wte_shard, wpe,
                         T, C, n, vocab_start, vocab_end);
}

cudaError_t embedding_forward(cudaStream_t stream, float* out, const int32_t* tokens,
                              const uint16_t* wte_shard, const uint16_t* wpe, int64_t B,
                              int64_t T, int64_t C, int64_t vocab_start, int64_t vocab_end) {
  const int64_t n = B * T * C;
  return launch_elements(stream, n, embedding_forward_kernel<uint16_t>, out, tokens, wte_shard,
                         wpe, T, C, n, vocab_start, vocab_end);
}

cudaError_t embedding_backward(cudaStream_t stream, float* dwte_shard, float* dwpe,
                               const float* dout, const int32_t* tokens, int64_t B, int64_t T,
                               int64_t C, int64_t vocab_start, int64_t vocab_end) {
  const int64_t n = B * T * C;
  return launch_elements(stream, n, embedding_backward_kernel, dwte_shard, dwpe, dout, tokens, T,
                         C, n, vocab_start, vocab_end);
}

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

cudaError_t mean_square_loss_backward(cudaStream_t stream, float* dy, const float* y, int64_t n,
                                      float dloss_scale) {
  if (n <= 0) return cudaSuccess;
  // The factor as runner/ops/mean_square_loss.cpp rounds it.
  const auto factor = static_cast<float>(2.0 / static_cast<double>(n) * dloss_scale);
  return launch_elements(stream, n, scaled_accumulate_kernel, dy, y, n, factor);
}

namespace {

template <typename Grad>
cudaError_t launch_adamw(cudaStream_t stream, float* params, const Grad* grads, float* m, float* v,
                         uint16_t* params_bf16, int64_t n, const AdamWStep& s) {
  return launch_elements(stream, n, adamw_kernel<Grad>, params, grads, m, v, params_bf16, n,
                         s.learning_rate, s.beta1, s.beta2, s.eps, s.weight_decay, s.grad_scale,
                         s.bias_correction1, s.bias_correction2);
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

cudaError_t adamw_update(cudaStream_t stream, float* params, const float* grads, float* m, float* v,
                         uint16_t* params_bf16, int64_t n, const AdamWStep& step) {
  return launch_adamw(stream, params, grads, m, v, params_bf16, n, step);
}

cudaError_t adamw_update(cudaStream_t stream, float* params, const uint16_t* grads, float* m,
                         float* v, uint16_t* params_bf16, int64_t n, const AdamWStep& step) {
  return launch_adamw(stream, params, grads, m, v, params_bf16, n, step);
}

cudaError_t sum_of_squares(cudaStream_t stream, double* result, double* partials, const float* x,
                           int64_t n) {
  return launch_sum_of_squares(stream, result, partials, x, n);
}

cudaError_t sum_of_squares(cudaStream_t stream, double* result, double* partials,
                           const uint16_t* x, int64_t n) {
  return launch_sum_of_squares(stream, result, partials, x, n);
}

}  // namespace partrain::runner::cuda_kernels
