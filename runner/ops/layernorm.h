// LayerNorm over the last dimension (Ba et al. 2016), GPT-2's pre-norm: out = (x - mean) * rstd *
// weight + bias per row of C values, eps = 1e-5 as PyTorch. Forward saves mean and rstd per row
// for backward (llm.c layernorm_forward/backward).
#pragma once

#include <cstdint>

namespace partrain::runner::ops {

inline constexpr float kLayerNormEps = 1e-5f;

// inp, out (N, C); weight, bias (C); mean, rstd (N) are written for backward.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int64_t C);

// Accumulates (+=) into dinp (N, C), dweight (C), dbias (C), from the saved mean and rstd.
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int64_t N, int64_t C);

}  // namespace partrain::runner::ops
