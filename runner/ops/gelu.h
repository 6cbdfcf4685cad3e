// GeLU with GPT-2's tanh approximation (Hendrycks & Gimpel 2016, eq. for "gelu_new"):
// gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Element-wise over n values.
#pragma once

#include <cstdint>

namespace partrain::runner::ops {

void gelu_forward(float* out, const float* inp, int64_t n);

// Accumulates (+=) dinp from dout and the forward's input (the output is not needed).
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n);

// The same over values stored in bf16 (the bf16 recipes' activations): a bf16 input widened as it
// is read, a bf16 output rounded to nearest even as it is written, each element computed in fp32
// exactly as above; so the results are those of widening, the fp32 op, and rounding, without the
// fp32 copies.
void gelu_forward(uint16_t* out, const uint16_t* inp, int64_t n);
void gelu_forward(uint16_t* out, const float* inp, int64_t n);
void gelu_forward(float* out, const uint16_t* inp, int64_t n);
void gelu_backward(float* dinp, const uint16_t* inp, const float* dout, int64_t n);

}  // namespace partrain::runner::ops
