#include "memory/parameter_count.h"

namespace partrain::memory {
namespace {

double d(int64_t value) { return static_cast<double>(value); }

// Weights and biases of one block, by how tensor parallelism shards them (Megatron-LM:
// QKV and fc1 column-parallel, attention-out and fc2 row-parallel; Shoeybi 2019 sec. 3).
LayerParams transformer_layer(const ModelConfig& m) {
  const double h = d(m.hidden), f = d(m.ffn), kv = d(m.kv_dim());
  const double mlp_matrices = m.mlp == MlpKind::kSwiglu ? 3 : 2;
  LayerParams p;
  p.split = h * h + 2 * h * kv + h * h  // Q, K, V, attention out
            + mlp_matrices * h * f;     // fc1 (gate and up for SwiGLU), fc2
  if (m.bias) {
    p.split += h + 2 * kv + (mlp_matrices - 1) * f;  // column-parallel biases: QKV, fc1
    p.replicated += 2 * h;                           // row-parallel biases: attention out, fc2
  }
  p.replicated += 2 * norm_params(m);  // before attention, before the MLP
  return p;
}

}  // namespace

double norm_params(const ModelConfig& model) {
  return model.norm == NormKind::kRmsNorm ? d(model.hidden) : 2 * d(model.hidden);
}

LayerParams layer_params(const ModelConfig& model) {
  if (model.architecture == Architecture::kMlp) {
    return {d(model.hidden) * d(model.hidden), 0};  // the lecture's x @ W, no bias
  }
  return transformer_layer(model);
}

double layer_matmul_params(const ModelConfig& model) {
  if (model.architecture == Architecture::kMlp) return d(model.hidden) * d(model.hidden);
  const double h = d(model.hidden);
  const double mlp_matrices = model.mlp == MlpKind::kSwiglu ? 3 : 2;
  return 2 * h * h + 2 * h * d(model.kv_dim()) + mlp_matrices * h * d(model.ffn);
}

double word_embedding_params(const ModelConfig& model) {
  if (model.architecture == Architecture::kMlp) return 0;
  return d(model.vocab) * d(model.hidden);
}

double position_params(const ModelConfig& model) {
  if (model.architecture == Architecture::kMlp || model.position != PositionKind::kLearned) return 0;
  return d(model.seq) * d(model.hidden);
}

double lm_head_params(const ModelConfig& model) {
  if (model.architecture == Architecture::kMlp || model.tied_embeddings) return 0;
  return d(model.vocab) * d(model.hidden);
}

double total_params(const ModelConfig& model) {
  if (model.is_bare()) return model.bare_params;
  double total = d(model.layers) * layer_params(model).total();
  if (model.architecture == Architecture::kMlp) return total;
  total += word_embedding_params(model) + position_params(model) + lm_head_params(model);
  total += norm_params(model);                               // final norm
  if (model.embedding_norm) total += norm_params(model);     // BLOOM's word_embeddings_layernorm
  return total;
}

// Narayanan 2021 sec. 5.1, eq. for P.
double gpt_params_closed_form(double layers, double hidden, double vocab, double seq) {
  return 12 * layers * hidden * hidden *
         (1 + 13 / (12 * hidden) + (vocab + seq) / (12 * layers * hidden));
}

}  // namespace partrain::memory
