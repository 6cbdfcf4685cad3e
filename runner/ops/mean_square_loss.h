// The mlp workload's loss (DESIGN.md "Reference workloads"): the mean of squares of the network's
// output, loss = (1/n) sum_i y_i^2, which drives the output toward zero.
#pragma once

#include <cstdint>

namespace partrain::runner::ops {

// Returns (1/n) sum_i y_i^2 over y (n), accumulated in double.
float mean_square_loss_forward(const float* y, int64_t n);

// Accumulates (+=) dy = (2/n) y * dloss_scale; dloss_scale is dL/dloss (1 for this batch's mean,
// 1/micro_batches when accumulating, n/n_total when this rank holds n of n_total outputs).
void mean_square_loss_backward(float* dy, const float* y, int64_t n, float dloss_scale);

}  // namespace partrain::runner::ops
