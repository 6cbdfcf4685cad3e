#include "runner/ops/vocab_parallel_cross_entropy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "runner/ops/cross_entropy.h"
#include "tests/unit/runner/ops/gradient_check.h"

namespace partrain::runner::ops {
namespace {

using testing::random_values;

constexpr int64_t N = 5, V = 11;
const std::vector<int32_t> kTargets = {0, 10, 4, 7, 5};

// Runs the Megatron decomposition over vocab shards [boundaries[s], boundaries[s + 1]), doing
// the three all-reduces (MAX, SUM, SUM) in the test, and compares loss and gradient with the full
// cross-entropy.
void check_shards(const std::vector<int64_t>& boundaries) {
  auto logits = random_values(N * V, 1, 3.0f);
  std::vector<float> full_losses(N), full_dlogits(N * V, 0.0f);
  const float full_mean =
      cross_entropy_forward(full_losses.data(), logits.data(), kTargets.data(), N, V);
  cross_entropy_backward(full_dlogits.data(), logits.data(), kTargets.data(), N, V, 1.0f / N);

  const size_t shards = boundaries.size() - 1;
  std::vector<std::vector<float>> local(shards);  // each shard's (N, V_local) columns
  for (size_t s = 0; s < shards; ++s) {
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t j = boundaries[s]; j < boundaries[s + 1]; ++j) {
        local[s].push_back(logits[static_cast<size_t>(n * V + j)]);
      }
    }
  }
  auto v_local = [&](size_t s) { return boundaries[s + 1] - boundaries[s]; };

  std::vector<float> global_max(N, -1e30f), global_sum(N, 0.0f), global_target(N, 0.0f);
  for (size_t s = 0; s < shards; ++s) {  // all-reduce MAX
    std::vector<float> row_max(N);
    vocab_parallel_local_max(row_max.data(), local[s].data(), N, v_local(s));
    for (int64_t n = 0; n < N; ++n) {
      global_max[static_cast<size_t>(n)] =
          std::max(global_max[static_cast<size_t>(n)], row_max[static_cast<size_t>(n)]);
    }
  }
  for (size_t s = 0; s < shards; ++s) {  // all-reduce SUM, twice
    std::vector<float> sum_exp(N), target(N);
    vocab_parallel_local_sum_exp(sum_exp.data(), local[s].data(), global_max.data(), N, v_local(s));
    vocab_parallel_local_target_logit(target.data(), local[s].data(), kTargets.data(), N,
                                      v_local(s), boundaries[s]);
    for (size_t n = 0; n < N; ++n) {
      global_sum[n] += sum_exp[n];
      global_target[n] += target[n];
    }
  }
  std::vector<float> losses(N);
  const float mean = vocab_parallel_loss(losses.data(), global_max.data(), global_sum.data(),
                                         global_target.data(), N);
  EXPECT_NEAR(mean, full_mean, 1e-5 * full_mean);
  for (size_t n = 0; n < N; ++n) EXPECT_NEAR(losses[n], full_losses[n], 1e-5) << "row " << n;

  for (size_t s = 0; s < shards; ++s) {
    std::vector<float> dlocal(local[s].size(), 0.0f);
    vocab_parallel_backward(dlocal.data(), local[s].data(), kTargets.data(), global_max.data(),
                            global_sum.data(), N, v_local(s), boundaries[s], 1.0f / N);
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t j = 0; j < v_local(s); ++j) {
        EXPECT_NEAR(dlocal[static_cast<size_t>(n * v_local(s) + j)],
                    full_dlogits[static_cast<size_t>(n * V + boundaries[s] + j)], 1e-6)
            << "shard " << s << " row " << n << " column " << j;
      }
    }
  }
}

TEST(VocabParallelCrossEntropy, TwoShardsEqualTheFullLossAndGradient) { check_shards({0, 6, V}); }
TEST(VocabParallelCrossEntropy, ThreeUnevenShardsEqualTheFullLossAndGradient) {
  check_shards({0, 4, 8, V});
}
TEST(VocabParallelCrossEntropy, OneShardIsTheFullCrossEntropy) { check_shards({0, V}); }

TEST(VocabParallelCrossEntropy, TargetLogitIsZeroOffTheShard) {
  std::vector<float> logits = {1.0f, 2.0f, 3.0f, 4.0f};  // N = 2 rows of V_local = 2
  const std::vector<int32_t> targets = {5, 2};           // shard holds columns [4, 6)
  std::vector<float> target(2);
  vocab_parallel_local_target_logit(target.data(), logits.data(), targets.data(), 2, 2, 4);
  EXPECT_EQ(target, (std::vector<float>{2.0f, 0.0f}));
}

}  // namespace
}  // namespace partrain::runner::ops
