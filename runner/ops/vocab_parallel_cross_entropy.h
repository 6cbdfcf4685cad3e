// Cross-entropy over logits split along the vocabulary across TP ranks, as Megatron's
// _VocabParallelCrossEntropy computes it (Shoeybi et al. 2019, sec. 3): each rank holds columns
// [vocab_start, vocab_start + V_local) and the full (N, V) logits are never gathered.
//
// Per row n, with M = max over all shards, S = sum over all shards of exp(logit - M) and z the
// target's logit (held by exactly one shard):
//   1. local_max            -> all-reduce MAX -> M
//   2. local_sum_exp(M)     -> all-reduce SUM -> S      (3. may run together with 2.)
//   3. local_target_logit   -> all-reduce SUM -> z      (0 on the shards without the target)
//   4. loss_n = log S + M - z                            (vocab_parallel_loss, identical on all
//   ranks)
//   5. dlogits_local = (exp(logit - M) / S - onehot) * dloss_scale   (no communication)
#pragma once

#include <cstdint>

namespace partrain::runner::ops {

// row_max (N) = max over the local logits (N, V_local).
void vocab_parallel_local_max(float* row_max, const float* logits, int64_t N, int64_t V_local);

// row_sum_exp (N) = sum_j exp(logits[n, j] - global_max[n]) over the local columns.
void vocab_parallel_local_sum_exp(float* row_sum_exp, const float* logits, const float* global_max,
                                  int64_t N, int64_t V_local);

// target_logit (N) = logits[n, targets[n] - vocab_start] if the target is local, else 0.
void vocab_parallel_local_target_logit(float* target_logit, const float* logits,
                                       const int32_t* targets, int64_t N, int64_t V_local,
                                       int64_t vocab_start);

// From the all-reduced statistics: losses (N, may be nullptr) and the mean over the N rows.
float vocab_parallel_loss(float* losses, const float* global_max, const float* global_sum_exp,
                          const float* global_target_logit, int64_t N);

// Accumulates (+=) the local columns of dlogits (N, V_local); dloss_scale as
// cross_entropy_backward.
void vocab_parallel_backward(float* dlogits, const float* logits, const int32_t* targets,
                             const float* global_max, const float* global_sum_exp, int64_t N,
                             int64_t V_local, int64_t vocab_start, float dloss_scale);

}  // namespace partrain::runner::ops
