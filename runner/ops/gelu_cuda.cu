// GeLU (tanh approximation) on the GPU, beside its CPU reference (gelu.h): each side fp32 or
// bf16 as stored, computed in fp32.
#include <cstdint>

#include "runner/device/cuda_kernel_bf16.cuh"
#include "runner/device/cuda_kernel_support.cuh"
#include "runner/device/cuda_kernels.h"

namespace partrain::runner::cuda_kernels {
namespace {

constexpr float kSqrtTwoOverPi = 0.7978845608028654f;  // runner/ops/gelu.cpp
constexpr float kGeluCubic = 0.044715f;

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

}  // namespace

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

}  // namespace partrain::runner::cuda_kernels
