#include "memory/activations.h"

namespace partrain::memory {
namespace {

double d(int64_t value) { return static_cast<double>(value); }

// The lecture's deep MLP: each layer keeps its input x (for dW) and the GeLU input.
LayerActivations mlp_layer(const ModelConfig& m, const ActivationSetup& a) {
  LayerActivations act;
  const double bh = a.micro_batch * d(m.hidden);
  if (a.recompute == Recompute::kFull) {
    act.sequence_region = a.element_bytes * bh;
    return act;
  }
  act.sequence_region = a.element_bytes * bh;   // x, replicated under TP
  act.tensor_region = a.element_bytes * bh / a.tp;  // GeLU input, split with W's columns
  return act;
}

}  // namespace

// Korthikanti 2022 sec. 4.1-4.2, generalised to grouped KV heads (K and V are n_kv/n_h of Q)
// and to SwiGLU (gate, up and their product are kept: 3 s b f instead of GeLU's 2 s b f).
LayerActivations layer_activations(const ModelConfig& m, const ActivationSetup& a) {
  if (m.architecture == Architecture::kMlp) return mlp_layer(m, a);
  const double s = a.seq / a.cp, b = a.micro_batch, h = d(m.hidden), t = a.tp, e = a.element_bytes;
  const double sbh = s * b * h;
  const double seq_split = a.sp ? t : 1;
  const bool masks = a.dropout > 0;
  LayerActivations act;
  if (a.recompute == Recompute::kFull) {
    act.sequence_region = e * sbh / seq_split;  // only the block's input: 2sbh (2sbh/t with SP)
    return act;
  }
  // Two norm inputs, the QKV input, the fc1 input; dropout masks after attention and MLP.
  act.sequence_region = (e * 4 * sbh + (masks ? 2 * sbh : 0)) / seq_split;
  const double mlp_elements = (m.mlp == MlpKind::kSwiglu ? 3 : 2) * s * b * d(m.ffn);
  // Q, K, V (K and V scaled by grouped heads), the attention-out input, the MLP intermediates.
  act.tensor_region = e * (sbh * (2 + 2 * m.kv_ratio()) + mlp_elements) / t;
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

double layer_activation_bytes(const ModelConfig& model, const ActivationSetup& setup) {
  return layer_activations(model, setup).total();
}

double embedding_activation_bytes(const ModelConfig& model, const ActivationSetup& a) {
  if (model.architecture == Architecture::kMlp || a.dropout <= 0) return 0;
  const double sbh = a.seq / a.cp * a.micro_batch * d(model.hidden);
  return sbh / (a.sp ? a.tp : 1);  // Korthikanti 2022 sec. 4.3: the embedding dropout mask
}

// Korthikanti 2022 sec. 4.3: 4sbh/t (1 + v/h) = norm input + head input (16-bit) + fp32 logits.
double output_activation_bytes(const ModelConfig& model, const ActivationSetup& a) {
  if (model.architecture == Architecture::kMlp) return 0;
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
