#include "runner/ops/vocab_parallel_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace partrain::runner::ops {

void vocab_parallel_local_max(float* row_max, const float* logits, int64_t N, int64_t V_local) {
  for (int64_t n = 0; n < N; ++n) {
    const float* row = logits + n * V_local;
    // An empty shard (V_local = 0) must not win the MAX all-reduce.
    row_max[n] = V_local > 0 ? *std::max_element(row, row + V_local)
                             : -std::numeric_limits<float>::infinity();
  }
}

void vocab_parallel_local_sum_exp(float* row_sum_exp, const float* logits, const float* global_max,
                                  int64_t N, int64_t V_local) {
  for (int64_t n = 0; n < N; ++n) {
    const float* row = logits + n * V_local;
    double sum = 0.0;
    for (int64_t j = 0; j < V_local; ++j)
      sum += std::exp(static_cast<double>(row[j] - global_max[n]));
    row_sum_exp[n] = static_cast<float>(sum);
  }
}

void vocab_parallel_local_target_logit(float* target_logit, const float* logits,
                                       const int32_t* targets, int64_t N, int64_t V_local,
                                       int64_t vocab_start) {
  for (int64_t n = 0; n < N; ++n) {
    const int64_t local = targets[n] - vocab_start;
    target_logit[n] = local >= 0 && local < V_local ? logits[n * V_local + local] : 0.0f;
  }
}

float vocab_parallel_loss(float* losses, const float* global_max, const float* global_sum_exp,
                          const float* global_target_logit, int64_t N) {
  double total = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    const double loss =
        std::log(static_cast<double>(global_sum_exp[n])) + global_max[n] - global_target_logit[n];
    if (losses != nullptr) losses[n] = static_cast<float>(loss);
    total += loss;
  }
  return N > 0 ? static_cast<float>(total / static_cast<double>(N)) : 0.0f;
}

void vocab_parallel_backward(float* dlogits, const float* logits, const int32_t* targets,
                             const float* global_max, const float* global_sum_exp, int64_t N,
                             int64_t V_local, int64_t vocab_start, float dloss_scale) {
  for (int64_t n = 0; n < N; ++n) {
    const float* row = logits + n * V_local;
    float* drow = dlogits + n * V_local;
    const double inv_sum = 1.0 / static_cast<double>(global_sum_exp[n]);
    const int64_t local_target = targets[n] - vocab_start;  // outside [0, V_local): not here
    for (int64_t j = 0; j < V_local; ++j) {
      const double probability = std::exp(static_cast<double>(row[j] - global_max[n])) * inv_sum;
      const double indicator = j == local_target ? 1.0 : 0.0;
      drow[j] += static_cast<float>((probability - indicator) * dloss_scale);
    }
  }
}

}  // namespace partrain::runner::ops
