#include "analyzers/compute_cost.h"

#include <algorithm>


namespace partrain::analyzers {

double gemm_seconds(double m, double n, double k, double batch, double element_bytes,
                    const ComputeSpeed& speed) {
  const double flops = 2 * m * n * k * batch;
  const double traffic = (m * k + k * n + m * n) * batch * element_bytes;
  const double seconds = std::max(flops / (speed.peak_flops * speed.gemm_efficiency),
                                  traffic / speed.memory_bandwidth);
  return (seconds + speed.kernel_overhead_s) * speed.scale;
}

BlockTimes block_times(const memory::ModelConfig& model, const memory::ActivationSetup& shape,
                       const ComputeSpeed& speed) {
  const double t = shape.tp;
  const double tokens = shape.micro_batch * shape.seq / shape.cp;  // this rank's queries
  const double h = static_cast<double>(model.hidden);
  const double f = static_cast<double>(model.ffn);
  const double bytes = shape.element_bytes;
  auto gemm = [&](double m, double n, double k, double batch = 1) {
    return gemm_seconds(m, n, k, batch, bytes, speed);
  };
  BlockTimes times;
  double gemms = 0;
  if (model.architecture == memory::Architecture::kMlp) {
    gemms = gemm(tokens, h / t, h);
  } else {
    const double heads = static_cast<double>(model.heads) / t;
    const double d = static_cast<double>(model.head_dim());
    // Each rank's queries attend to the whole sequence (context parallelism passes K and V).
    times.attention_core_s = gemm(shape.seq / shape.cp, shape.seq, d, shape.micro_batch * heads) +
                             gemm(shape.seq / shape.cp, d, shape.seq, shape.micro_batch * heads);
    const double matrices = model.mlp == memory::MlpKind::kSwiglu ? 3 : 2;
    gemms = gemm(tokens, (h + 2 * static_cast<double>(model.kv_dim())) / t, h) +  // QKV
            gemm(tokens, h, h / t) +                                             // attention out
            (matrices - 1) * gemm(tokens, f / t, h) + gemm(tokens, h, f / t) +   // MLP
            times.attention_core_s;
  }
  // Element-wise kernels read and write about what the block keeps for backward (all of it:
  // whatever recompute later drops was written first).
  memory::ActivationSetup kept = shape;
  kept.recompute = memory::Recompute::kNone;
  kept.flash_attention = false;
  const double elementwise =
      2 * memory::layer_activation_bytes(model, kept) / speed.memory_bandwidth * speed.scale;
  times.forward_s = gemms + elementwise;
  times.backward_s = 2 * gemms + 2 * elementwise;
  return times;
}

double head_seconds(const memory::ModelConfig& model, const memory::ActivationSetup& shape,
                    const ComputeSpeed& speed) {
  if (model.architecture == memory::Architecture::kMlp) return 0;
  const double tokens = shape.micro_batch * shape.seq / shape.cp;
  const double vocab = static_cast<double>(model.vocab) / shape.tp;
  const double logits = gemm_seconds(tokens, vocab, static_cast<double>(model.hidden), 1,
                                     shape.element_bytes, speed);
  // fp32 logits: written, read by softmax and cross-entropy, gradient written.
  const double loss = 3 * 4 * tokens * vocab / speed.memory_bandwidth * speed.scale;
  return 3 * logits + loss;
}

}  // namespace partrain::analyzers
