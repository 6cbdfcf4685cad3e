// The residual connection of a transformer block: out = a + b element-wise; its backward passes
// dout unchanged to both branches.
#pragma once

#include <cstdint>

namespace partrain::runner::ops {

// out may alias a or b (x += branch in place).
void residual_forward(float* out, const float* a, const float* b, int64_t n);

// Accumulates (+=) dout into da and db (either may be nullptr).
void residual_backward(float* da, float* db, const float* dout, int64_t n);

}  // namespace partrain::runner::ops
