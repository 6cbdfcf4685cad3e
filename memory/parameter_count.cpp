#include "memory/parameter_count.h"

namespace partrain::memory {
namespace {

double d(int64_t value) { return static_cast<double>(value); }

double mlp_matrices(const ModelConfig& m) { return m.mlp == MlpKind::kSwiglu ? 3 : 2; }

// One MLP of inner size f: the matrices, column-parallel biases (fc1; gate and up for SwiGLU) and
// the row-parallel fc2 bias.
struct MlpParams {
  double weights = 0, column_biases = 0, row_bias = 0;
};
MlpParams mlp_params(const ModelConfig& m, double f) {
  const double h = d(m.hidden);
  MlpParams p{mlp_matrices(m) * h * f, 0, 0};
  if (m.bias) {
    p.column_biases = (mlp_matrices(m) - 1) * f;
    p.row_bias = h;
  }
  return p;
}

// Attention's weights, split as Megatron splits them: QKV column-parallel and the output
// row-parallel (Shoeybi 2019 sec. 3); latent attention's down-projections and their norms are
// replicated, its up-projections column-parallel (Megatron-Core's MLA).
LayerParams attention_params(const ModelConfig& m) {
  const double h = d(m.hidden);
  LayerParams p;
  if (m.attention == AttentionKind::kLatent) {
    const LatentAttention& a = m.latent;
    const double heads = d(m.heads), qk_head = d(a.qk_nope_dim + a.qk_rope_dim);
    const double q_rank = d(a.q_lora_rank), kv_rank = d(a.kv_lora_rank);
    const bool q_latent = a.q_lora_rank > 0;
    p.replicated = h * (kv_rank + d(a.qk_rope_dim)) + kv_rank;     // KV down-projection, its norm
    if (q_latent) p.replicated += h * q_rank + q_rank;             // Q down-projection, its norm
    p.split = (q_latent ? q_rank : h) * heads * qk_head            // Q up-projection
              + kv_rank * heads * d(a.qk_nope_dim + a.v_head_dim)  // K (no rope) and V up
              + heads * d(a.v_head_dim) * h;                       // attention out
    return p;
  }
  const double q = d(m.q_dim()), kv = d(m.kv_dim());
  p.split = 2 * h * q + 2 * h * kv;  // Q, K, V, attention out
  if (m.bias) {
    p.split += q + 2 * kv;  // column-parallel QKV biases
    p.replicated += h;      // row-parallel attention-out bias
  }
  return p;
}

// Weights and biases of one block, by how tensor and expert parallelism shard them.
LayerParams transformer_layer(const ModelConfig& m, int64_t layer) {
  LayerParams p = attention_params(m);
  p.replicated += 2 * norm_params(m);  // before attention, before the MLP
  if (!m.is_moe_layer(layer)) {
    const MlpParams mlp = mlp_params(m, d(m.ffn));
    p.split += mlp.weights + mlp.column_biases;
    p.replicated += mlp.row_bias;
    return p;
  }
  const MixtureOfExperts& e = m.moe;
  const MlpParams expert = mlp_params(m, d(e.expert_ffn));
  const double per_expert = expert.weights + expert.column_biases + expert.row_bias;
  p.experts = d(e.experts) * per_expert;
  p.split += d(e.shared_experts) * (expert.weights + expert.column_biases);
  p.replicated += d(e.shared_experts) * expert.row_bias;
  p.replicated += d(m.hidden) * d(e.experts);  // the router's gate (replicated, as in Megatron)
  return p;
}

}  // namespace

double norm_params(const ModelConfig& model) {
  return model.norm == NormKind::kRmsNorm ? d(model.hidden) : 2 * d(model.hidden);
}

LayerParams layer_params(const ModelConfig& model, int64_t layer) {
  if (model.architecture == Architecture::kMlp) {
    return {d(model.hidden) * d(model.hidden), 0, 0};  // the lecture's x @ W, no bias
  }
  return transformer_layer(model, layer);
}

double layer_matmul_params(const ModelConfig& model, int64_t layer) {
  if (model.architecture == Architecture::kMlp) return d(model.hidden) * d(model.hidden);
  const double h = d(model.hidden);
  const LayerParams attention = attention_params(model);
  // Weights only: the norms' and biases' elementwise work is not a matmul.
  double attention_weights = attention.split + attention.replicated;
  if (model.bias && model.attention == AttentionKind::kMultiHead) {
    attention_weights -= d(model.q_dim()) + 2 * d(model.kv_dim()) + h;  // QKV's, attention out's
  }
  if (model.attention == AttentionKind::kLatent) {
    attention_weights -= d(model.latent.kv_lora_rank + model.latent.q_lora_rank);  // the norms
  }
  if (!model.is_moe_layer(layer)) return attention_weights + mlp_matrices(model) * h * d(model.ffn);
  const MixtureOfExperts& e = model.moe;
  const double experts_used = d(e.top_k + e.shared_experts);
  return attention_weights + experts_used * mlp_matrices(model) * h * d(e.expert_ffn) +
         h * d(e.experts);  // the router's logits
}

double blocks_matmul_params(const ModelConfig& model) {
  if (!model.is_moe()) return d(model.layers) * layer_matmul_params(model);
  const double dense = d(model.moe.dense_layers);
  return dense * layer_matmul_params(model, 0) +
         (d(model.layers) - dense) * layer_matmul_params(model, model.moe.dense_layers);
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

namespace {

// Every block's parameters, each routed expert counted `expert_share` times (1: all of them).
double blocks_params(const ModelConfig& model, double expert_share) {
  auto block = [&](int64_t layer) {
    const LayerParams p = layer_params(model, layer);
    return p.split + p.replicated + expert_share * p.experts;
  };
  if (!model.is_moe()) return d(model.layers) * block(0);
  const double dense = d(model.moe.dense_layers);
  return dense * block(0) + (d(model.layers) - dense) * block(model.moe.dense_layers);
}

double outside_blocks_params(const ModelConfig& model) {
  double total = word_embedding_params(model) + position_params(model) + lm_head_params(model);
  total += norm_params(model);                            // final norm
  if (model.embedding_norm) total += norm_params(model);  // BLOOM's word_embeddings_layernorm
  return total;
}

}  // namespace

double active_params(const ModelConfig& model) {
  if (model.is_bare() || !model.is_moe()) return total_params(model);
  const double share = d(model.moe.top_k) / d(model.moe.experts);
  return blocks_params(model, share) + outside_blocks_params(model);
}

double total_params(const ModelConfig& model) {
  if (model.is_bare()) return model.bare_params;
  double total = blocks_params(model, 1);
  if (model.architecture == Architecture::kMlp) return total;
  return total + outside_blocks_params(model);
}

// Narayanan 2021 sec. 5.1, eq. for P.
double gpt_params_closed_form(double layers, double hidden, double vocab, double seq) {
  return 12 * layers * hidden * hidden *
         (1 + 13 / (12 * hidden) + (vocab + seq) / (12 * layers * hidden));
}

}  // namespace partrain::memory
