// Parameter counts of a model, whole and per tensor-/expert-parallel rank: per transformer block
// (attention with grouped KV heads or latent attention, GeLU or SwiGLU MLP or a mixture of
// experts, norms, biases), embeddings, LM head; a mixture of experts' total and active counts.
// Narayanan 2021 sec. 5.1 for the GPT closed form; the general count follows the same layers.
#pragma once

#include "memory/model_config.h"

namespace partrain::memory {

// One transformer block (or one MLP layer), split as Megatron's tensor parallelism splits it.
struct LayerParams {
  double split = 0;       // column/row-parallel weights and column-parallel biases: divided by t
  double replicated = 0;  // norms, row-parallel biases, a router: every tensor-parallel rank
  double experts = 0;     // routed experts: divided by t (expert tensor parallelism) and by ep
  double total() const { return split + replicated + experts; }
  double dense_per_rank(int tp) const { return split / tp + replicated; }
  double experts_per_rank(int tp, int ep) const { return experts / (tp * static_cast<double>(ep)); }
  double per_rank(int tp, int ep = 1) const {
    return dense_per_rank(tp) + experts_per_rank(tp, ep);
  }
};

// Block `layer` (0-based: a mixture of experts' leading blocks are dense); every block of a dense
// model is alike.
LayerParams layer_params(const ModelConfig& model, int64_t layer = 0);
double word_embedding_params(const ModelConfig& model);  // V h (vocab-parallel under TP)
double position_params(const ModelConfig& model);        // s h with learned positions, else 0
double lm_head_params(const ModelConfig& model);         // V h when untied, else 0
double norm_params(const ModelConfig& model);            // one norm: 2h LayerNorm, h RMSNorm
double total_params(const ModelConfig& model);           // the bare count when that is all we know
// The parameters one token computes with: a mixture of experts' top_k routed experts (and the
// shared ones) instead of all of them; total_params for a dense model.
double active_params(const ModelConfig& model);
// Multiply-accumulate weights of block `layer` one token's forward pass multiplies by (its
// routed experts only).
double layer_matmul_params(const ModelConfig& model, int64_t layer = 0);
// The same summed over every block.
double blocks_matmul_params(const ModelConfig& model);

// Narayanan 2021 sec. 5.1: P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h)) (GPT, tied embeddings,
// learned positions; the final LayerNorm's 2h is left out, as in the paper).
double gpt_params_closed_form(double layers, double hidden, double vocab, double seq);

}  // namespace partrain::memory
