#include "memory/activations.h"

namespace partrain::memory {
namespace {

double d(int64_t value) { return static_cast<double>(value); }

// The lecture's deep MLP: each layer keeps its input x (for dW) and the GeLU input.
// The lecture's deep MLP under TP alternates column-parallel layers (even: x whole, the GeLU
// input split with W's columns) and row-parallel ones (odd: x split, the GeLU input whole after
// the all-reduce).
LayerActivations mlp_layer(const ModelConfig& m, const ActivationSetup& a, int64_t layer) {
  LayerActivations act;
  const double bh = a.micro_batch * d(m.hidden);
  const bool column = layer % 2 == 0;
  const double x = a.element_bytes * bh / (column ? 1 : a.tp);
  if (a.recompute == Recompute::kFull) {
    act.sequence_region = x;
    return act;
  }
  act.sequence_region = x;
  act.tensor_region = a.element_bytes * bh / (column ? a.tp : 1);
  return act;
}

// The MLP's kept tensors: a dense MLP's intermediates (tensor region), or a mixture of experts'
// (MixtureOfExperts): routing and dispatched tokens follow the sequence (split by t only with SP,
// as the block's input is), the experts' intermediates are split by t.
void add_mlp(const ModelConfig& m, const ActivationSetup& a, int64_t layer, double sb,
             LayerActivations& act) {
  if (a.recompute == Recompute::kFull) return;  // only the block's input is kept
  const double matrices = m.mlp == MlpKind::kSwiglu ? 3 : 2, e = a.element_bytes, t = a.tp;
  if (!m.is_moe_layer(layer)) {
    act.tensor_region += e * matrices * sb * d(m.ffn) / t;
    return;
  }
  const MixtureOfExperts& moe = m.moe;
  // Dropless routing sends top_k copies of every token on average; a capacity factor reserves
  // capacity_factor x that (padded slots are kept too).
  const double slots = d(moe.top_k) * (moe.capacity_factor > 0 ? moe.capacity_factor : 1) * sb;
  const double router = 2 * 4 * sb * d(moe.experts);      // fp32 logits and probabilities
  const double dispatched = e * 2 * slots * d(m.hidden);  // experts' inputs and outputs
  act.sequence_region += (router + dispatched) / (a.sp ? t : 1);
  act.tensor_region += e * matrices * (slots + d(moe.shared_experts) * sb) * d(moe.expert_ffn) / t;
}

}  // namespace

LayerActivations mlp_activations(const ModelConfig& model, const ActivationSetup& setup,
                                 int64_t layer) {
  LayerActivations act;
  if (model.architecture == Architecture::kTransformer) {
    add_mlp(model, setup, layer, setup.seq / setup.cp * setup.micro_batch, act);
  }
  return act;
}

// Korthikanti 2022 sec. 4.1-4.2, generalised to grouped KV heads (K and V are n_kv/n_h of Q),
// latent attention (its Q, K, V widths and the latents), SwiGLU (gate, up and their product are
// kept: 3 s b f instead of GeLU's 2 s b f) and mixtures of experts.
LayerActivations layer_activations(const ModelConfig& m, const ActivationSetup& a, int64_t layer) {
  if (m.architecture == Architecture::kMlp) return mlp_layer(m, a, layer);
  const double s = a.seq / a.cp, b = a.micro_batch, h = d(m.hidden), t = a.tp, e = a.element_bytes;
  const double sbh = s * b * h;
  const double seq_split = a.sp ? t : 1;
  const bool masks = a.dropout > 0;
  LayerActivations act;
  if (a.recompute == Recompute::kFull) {
    act.sequence_region = e * sbh / seq_split;  // only the block's input: 2sbh (2sbh/t with SP)
    return act;
  }
  // Two norm inputs, the QKV input, the fc1 input; dropout masks after attention and MLP; latent
  // attention's latents.
  const AttentionWidths w = attention_widths(m);
  act.sequence_region = (e * (4 * sbh + s * b * w.latents) + (masks ? 2 * sbh : 0)) / seq_split;
  // Q, K, V (K and V scaled by grouped heads), the attention-out input, then the MLP's.
  act.tensor_region = e * s * b * (w.q + w.k + w.v + w.out) / t;
  add_mlp(m, a, layer, s * b, act);
  const double heads = d(m.heads);
  const bool core_kept = a.recompute == Recompute::kNone && !a.flash_attention;
  if (core_kept) {
    // Softmax output a s^2 b (plus dropout output and its 1-byte mask): 5as^2b in 16-bit.
    const double scores = heads * s * a.seq * b;  // this rank's queries against every key
    act.attention_core = (masks ? 2 * e + 1 : e) * scores / t;
  } else if (a.flash_attention) {
    act.tensor_region += 4 * heads * s * b / t;  // FlashAttention's fp32 log-sum-exp per row
  }
  return act;
}

double layer_activation_bytes(const ModelConfig& model, const ActivationSetup& setup,
                              int64_t layer) {
  return layer_activations(model, setup, layer).total();
}

double embedding_activation_bytes(const ModelConfig& model, const ActivationSetup& a) {
  if (model.architecture == Architecture::kMlp || a.dropout <= 0) return 0;
  const double sbh = a.seq / a.cp * a.micro_batch * d(model.hidden);
  return sbh / (a.sp ? a.tp : 1);  // Korthikanti 2022 sec. 4.3: the embedding dropout mask
}

// Korthikanti 2022 sec. 4.3: 4sbh/t (1 + v/h) = norm input + head input (16-bit) + fp32 logits.
double output_activation_bytes(const ModelConfig& model, const ActivationSetup& a) {
  // The MLP's head is its loss, which keeps its input: the last layer's output.
  if (model.architecture == Architecture::kMlp)
    return a.element_bytes * a.micro_batch * d(model.hidden);
  const double sb = a.seq / a.cp * a.micro_batch;
  const double hidden_states = 2 * a.element_bytes * sb * d(model.hidden) / (a.sp ? a.tp : 1);
  const double logits = 4 * sb * d(model.vocab) / a.tp;
  return hidden_states + logits;
}

// Korthikanti 2022 Table 2.
double korthikanti_layer_bytes(double s, double b, double h, double a, double t, bool sp,
                               Recompute recompute) {
  const double sbh = s * b * h;
  const double core = recompute == Recompute::kNone ? 5 * a * s / (h * t) : 0;
  if (recompute == Recompute::kFull) return sp ? 2 * sbh / t : 2 * sbh;
  if (sp) return sbh * (34 / t + core);
  return sbh * (10 + 24 / t + core);  // with t = 1 this is sbh(34 + 5as/h)
}

}  // namespace partrain::memory
