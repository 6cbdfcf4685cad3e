// The bias parts of matmul on the GPU, beside its CPU reference (matmul.h; the products are
// cuBLAS's, runner/device/cuda_device_cuda.cpp): the bias added to an fp32 product, or added and
// rounded once into a bf16 output, and dbias as column sums.
#include <cstdint>

#include "runner/device/cuda_kernel_bf16.cuh"
#include "runner/device/cuda_kernel_support.cuh"
#include "runner/device/cuda_kernels.h"

namespace partrain::runner::cuda_kernels {
namespace {

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

}  // namespace

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
  return launch_column_sums<false>(stream, nullptr, dbias, dout, nullptr, nullptr, nullptr, N, OC);
}

}  // namespace partrain::runner::cuda_kernels
