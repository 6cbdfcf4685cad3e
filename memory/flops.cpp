#include "memory/flops.h"

#include "memory/parameter_count.h"

namespace partrain::memory {
namespace {

struct ForwardFlops {
  double blocks = 0;          // matmuls of all blocks, attention core included
  double attention_core = 0;  // QK^T and AV of all blocks
  double logits = 0;          // the LM head
};

ForwardFlops forward_flops(const ModelConfig& model, double batch, double seq) {
  const double tokens = batch * seq;
  const double layers = static_cast<double>(model.layers);
  ForwardFlops f;
  // Narayanan 2021 sec. 5.1: 2 FLOPs per multiply-accumulate; per layer 24 B s h^2 of weights
  // (for GPT) and 4 B s^2 h for the attention scores and their product with V (QK^T over Q's
  // width, AV over the output's: h each for multi-head attention). A mixture of experts'
  // token multiplies by its top_k routed experts only.
  if (model.architecture != Architecture::kMlp) {
    const AttentionWidths w = attention_widths(model);
    f.attention_core = layers * 2 * tokens * seq * (w.q + w.out);
  }
  f.blocks = 2 * tokens * blocks_matmul_params(model) + f.attention_core;
  if (model.architecture == Architecture::kTransformer) {
    f.logits = 2 * tokens * static_cast<double>(model.hidden) * static_cast<double>(model.vocab);
  }
  return f;
}

}  // namespace

double training_flops(const ModelConfig& model, double batch, double seq, Recompute recompute) {
  if (model.is_bare()) {
    // Kaplan 2020: 6 N per token; full recompute repeats the forward's 2 N (Narayanan 2021 sec.
    // 5.1: 8 T P). Selective recompute repeats the attention core, which needs s and h that a bare
    // count does not have: counted as none.
    const double per_token = recompute == Recompute::kFull ? 8 : 6;
    return per_token * model.bare_params * batch * seq;
  }
  ForwardFlops f = forward_flops(model, batch, seq);
  double flops = 3 * (f.blocks + f.logits);  // forward + backward (2x forward)
  if (recompute == Recompute::kFull) flops += f.blocks;                 // Narayanan 2021 eq. 3
  if (recompute == Recompute::kSelective) flops += f.attention_core;    // Korthikanti 2022 sec. 5
  return flops;
}

double training_flops_per_token(const ModelConfig& model, double seq, Recompute recompute) {
  return training_flops(model, 1, seq, recompute) / seq;
}

// Narayanan 2021 eq. 3 (96, V/(16lh) with recomputation; 72, V/(12lh) without).
double narayanan_flops(double batch, double seq, double layers, double hidden, double vocab,
                       bool full_recompute) {
  const double lead = full_recompute ? 96 : 72;
  const double logit_term = vocab / ((full_recompute ? 16 : 12) * layers * hidden);
  return lead * batch * seq * layers * hidden * hidden * (1 + seq / (6 * hidden) + logit_term);
}

// PaLM (Chowdhery 2022) app. B: MFU = achieved model FLOP/s / peak FLOP/s.
double mfu(double flops_per_iteration, double seconds_per_iteration, double gpus,
           double peak_flops_per_gpu) {
  return flops_per_iteration / (seconds_per_iteration * gpus * peak_flops_per_gpu);
}

// Narayanan 2021 sec. 5.1: time ~ 8TP/(nX) (6TP/(nX) without recomputation).
double training_days(double tokens, double params, double gpus, double flops_per_gpu,
                     bool full_recompute) {
  const double flops_per_param_token = full_recompute ? 8 : 6;
  return flops_per_param_token * tokens * params / (gpus * flops_per_gpu) / 86400.0;
}

}  // namespace partrain::memory
