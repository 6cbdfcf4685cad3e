// Fully connected layer as GPT-2 uses it (llm.c matmul_forward/backward): out = inp @ W^T + b with
// inp (N, C), W (OC, C) row-major as PyTorch stores nn.Linear, b (OC). The CPU version calls
// OpenBLAS sgemm; tests compare it with a triple loop.
#pragma once

#include <cstdint>

namespace partrain::runner::ops {

// out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias (OC). bias may be nullptr (no bias).
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t N,
                    int64_t C, int64_t OC);

// Accumulates (+=), as llm.c, so gradient accumulation and shared weights need no extra pass:
//   dinp (N, C) += dout @ weight;  dweight (OC, C) += dout^T @ inp;  dbias (OC) += sum_n dout.
// Any of dinp, dweight, dbias may be nullptr (not wanted: the first layer's input, no bias).
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t N, int64_t C, int64_t OC);

}  // namespace partrain::runner::ops
