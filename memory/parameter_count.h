// Parameter counts of a model, whole and per tensor-parallel rank: per transformer block
// (attention with grouped KV heads, GeLU or SwiGLU MLP, norms, biases), embeddings, LM head.
// Narayanan 2021 sec. 5.1 for the GPT closed form; the general count follows the same layers.
#pragma once

#include "memory/model_config.h"

namespace partrain::memory {

// One transformer block (or one MLP layer), split as Megatron's tensor parallelism splits it.
struct LayerParams {
  double split = 0;       // column/row-parallel weights and column-parallel biases: divided by t
  double replicated = 0;  // norms and row-parallel biases: every tensor-parallel rank holds them
  double total() const { return split + replicated; }
  double per_tp_rank(int tp) const { return split / tp + replicated; }
};

LayerParams layer_params(const ModelConfig& model);
double word_embedding_params(const ModelConfig& model);  // V h (vocab-parallel under TP)
double position_params(const ModelConfig& model);        // s h with learned positions, else 0
double lm_head_params(const ModelConfig& model);         // V h when untied, else 0
double norm_params(const ModelConfig& model);            // one norm: 2h LayerNorm, h RMSNorm
double total_params(const ModelConfig& model);           // the bare count when that is all we know
// Multiply-accumulate weights of one block (what a token's forward pass multiplies by).
double layer_matmul_params(const ModelConfig& model);

// Narayanan 2021 sec. 5.1: P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h)) (GPT, tied embeddings,
// learned positions; the final LayerNorm's 2h is left out, as in the paper).
double gpt_params_closed_form(double layers, double hidden, double vocab, double seq);

}  // namespace partrain::memory
