// AdamW (Loshchilov & Hutter 2019, Algorithm 2; PyTorch torch.optim.AdamW): Adam with bias
// correction and weight decay decoupled from the gradient, on fp32 parameters with fp32 first and
// second moments m and v (the kOptimizer category).
#pragma once

#include <cstdint>

namespace partrain::runner::ops {

struct AdamWConfig {
  float learning_rate = 1e-3f;
  float beta1 = 0.9f;  // PyTorch's defaults
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  // Each gradient is multiplied by this first: global-norm clipping's max_norm / norm
  // (torch.nn.utils.clip_grad_norm_), fused into the update instead of a pass of its own over
  // the gradients, which are left as they were.
  float grad_scale = 1.0f;
};

// One update of n parameters; step counts from 1 (the bias corrections divide by 1 - beta^step):
//   g = grad_scale grads[i]
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   p -= lr * ((m / (1 - beta1^step)) / (sqrt(v / (1 - beta2^step)) + eps) + weight_decay * p)
// A shard of the parameters (ZeRO) updates the same way: the update is element-wise.
void adamw_update(float* params, const float* grads, float* m, float* v, int64_t n,
                  const AdamWConfig& config, int64_t step);
// The same update from bf16 gradients (bf16-mixed: the fp32 master in `params`), each widened
// exactly as it is read, so it equals widening them all first and calling the fp32 update.
void adamw_update(float* params, const uint16_t* grads, float* m, float* v, int64_t n,
                  const AdamWConfig& config, int64_t step);

}  // namespace partrain::runner::ops
