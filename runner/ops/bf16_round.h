// bf16 GEMM operands on the CPU: each value rounded to the nearest bfloat16 (ties to even, as
// __float2bfloat16_rn and the CUDA device's round_to_bf16 kernel) and kept as an fp32, so sgemm
// over the rounded values computes the bf16 products a tensor core does, exactly.
#pragma once

#include <cstdint>

namespace partrain::runner::ops {

// out (n) = inp rounded to bf16; in place when out == inp. NaN stays NaN (with its sign and
// payload, quieted; CUDA's conversion gives its canonical NaN, so NaN bits may differ between the
// devices), +-Inf stays Inf, and a finite value beyond bf16's largest rounds to Inf.
void round_to_bf16(float* out, const float* inp, int64_t n);

// bf16 storage (the parameters under --precision bf16): out (n) = inp's bf16 bits, rounded as
// above; and back, exactly.
void to_bf16(uint16_t* out, const float* inp, int64_t n);
void from_bf16(float* out, const uint16_t* inp, int64_t n);
// A bf16 activation kept from the fp32 its op wrote: out (n) = values' bf16 bits, and values
// rounded in place to what out holds (one pass: to_bf16 then from_bf16).
void store_bf16(uint16_t* out, float* values, int64_t n);
// bf16 gradients: sum (n) = bf16(sum + x), the addition in fp32 and rounded once.
void accumulate_bf16(uint16_t* sum, const float* x, int64_t n);

}  // namespace partrain::runner::ops
