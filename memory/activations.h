// Activation memory saved for the backward pass, per layer and for the input/output layers
// (Korthikanti 2022 "Reducing Activation Recomputation in Large Transformer Models", sec. 4-5):
// sbh(34 + 5as/h) bytes per layer with 16-bit activations and 1-byte dropout masks.
#pragma once

#include "memory/model_config.h"
#include "memory/training_layout.h"

namespace partrain::memory {

struct ActivationSetup {
  double micro_batch = 1;     // b
  double seq = 1;             // s, the whole sequence (before context parallelism)
  int cp = 1;                 // the sequence is split over cp ranks
  int tp = 1;                 // t
  bool sp = false;            // sequence parallelism: the replicated regions split by t too
  Recompute recompute = Recompute::kNone;
  bool flash_attention = false;  // the attention core is never materialised (like selective)
  double dropout = 0;         // > 0: 1-byte dropout masks are kept
  double element_bytes = 2;   // 2 for 16-bit activations, 4 for fp32
};

// One block's activations, split by how tensor/sequence parallelism divides them.
struct LayerActivations {
  double sequence_region = 0;  // norm inputs, QKV and fc1 inputs, dropout masks: / t only with SP
  double tensor_region = 0;    // Q, K, V, attention-out input, MLP intermediates: / t
  double attention_core = 0;   // softmax output (and dropout) a s^2 b: / t; gone with selective
  double total() const { return sequence_region + tensor_region + attention_core; }
};

// Bytes block `layer` (0-based) keeps for one micro-batch on one tensor-parallel rank. A mixture
// of experts' block keeps the router's fp32 logits and probabilities, the tokens dispatched to
// its experts and their outputs (top_k copies, times the capacity factor when tokens are capped),
// the experts' intermediates (split by t, expert tensor parallelism) and the shared experts'.
LayerActivations layer_activations(const ModelConfig& model, const ActivationSetup& setup,
                                   int64_t layer = 0);
double layer_activation_bytes(const ModelConfig& model, const ActivationSetup& setup,
                              int64_t layer = 0);
// The MLP's share of layer_activations (its intermediates; a mixture of experts' routing,
// dispatched tokens and experts' intermediates).
LayerActivations mlp_activations(const ModelConfig& model, const ActivationSetup& setup,
                                 int64_t layer);
// The first stage's extra: the embedding output is the first block's input (already counted);
// with dropout its 1-byte mask s b h is added (Korthikanti 2022 sec. 4.3).
double embedding_activation_bytes(const ModelConfig& model, const ActivationSetup& setup);
// The last stage's extra: final norm input, LM head input and the fp32 logits, 4 s b h/t (1 + V/h)
// in 16-bit (Korthikanti 2022 sec. 4.3); the MLP's, the loss's input (b h).
double output_activation_bytes(const ModelConfig& model, const ActivationSetup& setup);

// Korthikanti 2022 Table 2, bytes per layer (16-bit, with dropout), in closed form:
//   none sbh(34 + 5as/h); TP sbh(10 + 24/t + 5as/(ht)); TP+SP sbh(34/t + 5as/(ht));
//   selective drops the 5as/h term; full recompute keeps 2sbh (2sbh/t with SP).
double korthikanti_layer_bytes(double s, double b, double h, double a, double t, bool sp,
                               Recompute recompute);

}  // namespace partrain::memory
