// GeLU with GPT-2's tanh approximation (Hendrycks & Gimpel 2016, eq. for "gelu_new"):
// gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Element-wise over n values.
#pragma once

#include <cstdint>

namespace partrain::runner::ops {

void gelu_forward(float* out, const float* inp, int64_t n);

// Accumulates (+=) dinp from dout and the forward's input (the output is not needed).
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n);

}  // namespace partrain::runner::ops
