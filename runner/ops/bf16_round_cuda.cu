// bf16 on the GPU, beside its CPU reference (bf16_round.h): fp32 values rounded to bf16 (nearest
// even; four elements a thread where the buffers are aligned), bf16 storage written and widened
// back, and bf16 gradients accumulated.
#include <cstdint>

#include "runner/device/cuda_kernel_bf16.cuh"
#include "runner/device/cuda_kernel_support.cuh"
#include "runner/device/cuda_kernels.h"

namespace partrain::runner::cuda_kernels {
namespace {

__global__ void round_to_bf16_kernel(__nv_bfloat16* destination, const float* source, int64_t n) {
  for (int64_t i = first_index(); i < n; i += index_stride()) {
    destination[i] = __float2bfloat16_rn(source[i]);
  }
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

}  // namespace

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

}  // namespace partrain::runner::cuda_kernels
