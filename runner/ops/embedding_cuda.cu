// Token and position embeddings on the GPU, beside their CPU reference (embedding.h), over the
// rank's rows of a vocab-parallel table.
#include <cstdint>

#include "runner/device/cuda_kernel_support.cuh"
#include "runner/device/cuda_kernels.h"

namespace partrain::runner::cuda_kernels {
namespace {

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

}  // namespace

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

}  // namespace partrain::runner::cuda_kernels
