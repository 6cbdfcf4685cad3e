// Rounding to bf16 in the CUDA kernels: an fp32 result stored as bf16 (nearest even, as
// __float2bfloat16_rn and the CPU's runner/ops/bf16_round.h), and two of them packed as they lie
// in memory. Apart from cuda_kernel_support.cuh so that the kernels with no bf16 output leave out
// cuda_bf16.h, about a third of a small kernel file's compile time.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "runner/device/cuda_kernel_support.cuh"

namespace partrain::runner::cuda_kernels {

__device__ inline void store_as(uint16_t& destination, float x) {
  destination = __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

// Two bf16 values as the 32 bits that hold them in memory, `first` at the lower address.
__device__ inline uint32_t bf16_pair_bits(float first, float second) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(first))) |
         static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(second))) << 16;
}

}  // namespace partrain::runner::cuda_kernels
