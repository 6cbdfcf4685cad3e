// Causal multi-head self-attention core (Vaswani et al. 2017, GPT-2's masked variant), after the
// QKV projection and before the output projection: softmax(Q K^T / sqrt(hs) + causal mask) V per
// head. NH is the number of heads held locally, so tensor parallelism passes its subset of heads.
#pragma once

#include <cstdint>

namespace partrain::runner::ops {

// Layouts (row-major; C = NH * hs, the local attention width):
//   qkv (B, T, 3C): each token is [Q | K | V], each part C wide and split into NH heads of hs,
//                   head h at offset h * hs within its part (how a fused c_attn GEMM writes it).
//   out (B, T, C):  head h's output at offset h * hs, ready for the output projection.
//   att (B, NH, T, T): the attention probabilities, row t over keys t2 <= t; t2 > t is 0.
// bf16_products: the products read bf16 operands, as a tensor core under bf16 GEMMs: forward
// rounds the probabilities to bf16 where it computes them (att keeps the rounded values, which
// P V reads), backward rounds dL/d(scores) before dQ and dK. qkv, dout and att are multiplied as
// given: rounding them is the caller's (the devices round a GEMM's inputs).
void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t NH,
                       int64_t hs, bool bf16_products = false);

// Accumulates (+=) into dqkv (B, T, 3C) from dout (B, T, C), using the saved probabilities.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                        int64_t B, int64_t T, int64_t NH, int64_t hs, bool bf16_products = false);

}  // namespace partrain::runner::ops
