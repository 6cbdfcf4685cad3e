#include "runner/ops/cross_entropy.h"

#include <algorithm>
#include <cmath>

namespace partrain::runner::ops {
namespace {

struct RowSoftmax {
  float max_logit;
  double sum_exp;  // sum_j exp(logit_j - max_logit)
};

// Shifted by the row maximum so exp cannot overflow.
RowSoftmax row_softmax(const float* row, int64_t V) {
  const float max_logit = *std::max_element(row, row + V);
  double sum_exp = 0.0;
  for (int64_t j = 0; j < V; ++j) sum_exp += std::exp(static_cast<double>(row[j] - max_logit));
  return {max_logit, sum_exp};
}

}  // namespace

float cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int64_t N,
                            int64_t V) {
  double total = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    const float* row = logits + n * V;
    const RowSoftmax softmax = row_softmax(row, V);
    const double loss = std::log(softmax.sum_exp) + softmax.max_logit - row[targets[n]];
    if (losses != nullptr) losses[n] = static_cast<float>(loss);
    total += loss;
  }
  return N > 0 ? static_cast<float>(total / static_cast<double>(N)) : 0.0f;
}

void cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets, int64_t N,
                            int64_t V, float dloss_scale) {
  for (int64_t n = 0; n < N; ++n) {
    const float* row = logits + n * V;
    float* drow = dlogits + n * V;
    const RowSoftmax softmax = row_softmax(row, V);
    const double inv_sum = 1.0 / softmax.sum_exp;
    for (int64_t j = 0; j < V; ++j) {
      const double probability =
          std::exp(static_cast<double>(row[j] - softmax.max_logit)) * inv_sum;
      const double indicator = j == targets[n] ? 1.0 : 0.0;
      drow[j] += static_cast<float>((probability - indicator) * dloss_scale);
    }
  }
}

}  // namespace partrain::runner::ops
