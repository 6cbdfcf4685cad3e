// Global-norm gradient clipping (Pascanu et al. 2013; PyTorch clip_grad_norm_): the norm is taken
// over every gradient of the model, so each rank sums the squares of what it holds, the sums are
// all-reduced, and every rank scales its gradients by the same factor.
#pragma once

#include <cstdint>

namespace partrain::runner::ops {

// sum_i x_i^2 over n values, accumulated in double (the local part of the squared global norm).
double sum_of_squares(const float* x, int64_t n);
// The same over bf16 values (bf16 gradients), each widened exactly.
double sum_of_squares(const uint16_t* x, int64_t n);

// x *= factor.
void scale(float* x, int64_t n, float factor);

// The factor clip_grad_norm_ applies: min(1, max_norm / (global_norm + 1e-6)).
float clip_factor(double global_norm, double max_norm);

}  // namespace partrain::runner::ops
