// Softmax cross-entropy over the vocabulary, the GPT loss: loss_n = logsumexp(logits_n) -
// logits_n[target_n]. The softmax is recomputed in backward from the logits instead of saving the
// (N, V) probabilities. The vocab-parallel form is in vocab_parallel_cross_entropy.h.
#pragma once

#include <cstdint>

namespace partrain::runner::ops {

// logits (N, V), targets (N) in [0, V). Writes each row's loss to losses (N) unless it is nullptr,
// and returns the mean over the N rows.
float cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int64_t N,
                            int64_t V);

// Accumulates (+=) dlogits (N, V) = (softmax(logits) - onehot(target)) * dloss_scale, where
// dloss_scale is dL/dloss_n: 1/N for the mean over this batch, 1/(N * micro_batches) when
// gradients are accumulated.
void cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets, int64_t N,
                            int64_t V, float dloss_scale);

}  // namespace partrain::runner::ops
