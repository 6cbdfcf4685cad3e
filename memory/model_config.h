// What a model is for the estimator: the dimensions of a GPT-style or LLaMA-style decoder
// (grouped KV heads or DeepSeek's latent attention, SwiGLU or GeLU MLP or a mixture of experts,
// LayerNorm or RMSNorm, learned/rotary/ALiBi positions, tied or untied embeddings), the
// lecture's deep MLP, or a bare parameter count.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace partrain::memory {

enum class Architecture { kTransformer, kMlp };
enum class MlpKind { kGelu, kSwiglu };                  // GeLU: 2 matrices h x f; SwiGLU: 3
enum class NormKind { kLayerNorm, kRmsNorm };           // LayerNorm: weight + bias; RMSNorm: weight
enum class PositionKind { kLearned, kRotary, kAlibi };  // only learned positions have weights
// Multi-head attention (grouped KV heads included), or DeepSeek-V2/V3's multi-head latent
// attention: queries and keys/values projected down to low-rank latents and back up per head.
enum class AttentionKind { kMultiHead, kLatent };

// Multi-head latent attention's sizes (DeepSeek-V2, Liu 2024, sec. 2.1): q_lora_rank 0 projects
// queries directly (V2-Lite).
struct LatentAttention {
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_dim = 0;  // per head, the part of Q and K without rotary positions
  int64_t qk_rope_dim = 0;  // per head, the rotary part (K's is shared by every head)
  int64_t v_head_dim = 0;
};

// A mixture-of-experts MLP (GShard, Lepikhin 2020; Switch, Fedus 2021; DeepSeekMoE, Dai 2024):
// each token goes to top_k of `experts` routed experts, plus `shared_experts` every token uses;
// the first `dense_layers` blocks keep a dense MLP of `ffn`.
struct MixtureOfExperts {
  int64_t experts = 0;  // routed experts per MoE block; 0: a dense model
  int64_t top_k = 0;
  int64_t expert_ffn = 0;  // one expert's MLP inner size
  int64_t shared_experts = 0;
  int64_t dense_layers = 0;
  double capacity_factor = 0;  // tokens an expert takes, over an even share; 0: dropless
  bool enabled() const { return experts > 0; }
  // Block `layer` (0-based) routes its tokens to experts: every block after the dense ones.
  bool is_moe_layer(int64_t layer) const { return enabled() && layer >= dense_layers; }
};

struct ModelConfig {
  std::string name = "custom";
  Architecture architecture = Architecture::kTransformer;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;  // grouped-query attention; equal to heads for multi-head attention
  // Each head's width where the model sets it apart from hidden / heads (Gemma, the small
  // Qwen3s, Mistral-Nemo: heads x head_dim wider or narrower than hidden); 0: hidden / heads.
  int64_t explicit_head_dim = 0;
  int64_t ffn = 0;       // MLP inner size (4h for GPT)
  int64_t vocab = 0;
  int64_t seq = 0;  // training sequence length (and learned position table size)
  MlpKind mlp = MlpKind::kGelu;
  NormKind norm = NormKind::kLayerNorm;
  PositionKind position = PositionKind::kLearned;
  bool tied_embeddings = true;
  bool bias = true;             // linear-layer biases (GPT, OPT, BLOOM: yes; LLaMA: no)
  bool embedding_norm = false;  // a LayerNorm right after the word embedding (BLOOM)
  AttentionKind attention = AttentionKind::kMultiHead;
  LatentAttention latent;  // with AttentionKind::kLatent
  MixtureOfExperts moe;
  double bare_params = 0;       // > 0: only a parameter count is known (model states only)
  // The dropout probability its published training recipe used (hidden and attention), when a
  // preset states it; unset: not published (recommend then takes Megatron-LM's default).
  std::optional<double> dropout;
  std::string source;           // where the dimensions were published
  // What the count leaves out or approximates of the model as published (a Hugging Face
  // config's parts ModelConfig has no field for), said with every estimate of it.
  std::vector<std::string> notes;

  bool is_bare() const { return bare_params > 0; }
  // The tokens of one training sample: seq, or 1 for a model without a sequence (an MLP's sample
  // is one input row).
  int64_t sample_seq() const { return seq > 0 ? seq : 1; }
  int64_t head_dim() const { return explicit_head_dim > 0 ? explicit_head_dim : hidden / heads; }
  int64_t q_dim() const { return heads * head_dim(); }  // the queries' (and attention out's) width
  int64_t kv_dim() const { return kv_heads * head_dim(); }
  double kv_ratio() const { return static_cast<double>(kv_heads) / static_cast<double>(heads); }
  bool is_moe() const { return moe.enabled(); }
  // Block `layer` (0-based) routes its tokens to experts: every block after the dense ones.
  bool is_moe_layer(int64_t layer) const { return moe.is_moe_layer(layer); }
};

// What a token's attention computes with, per block, in elements (summed over heads): Q and K
// rows (QK^T's inner size), V rows and the attention output before its projection; for latent
// attention also the latents kept beside them (compressed Q, compressed KV and the shared
// rotary key).
struct AttentionWidths {
  double q = 0, k = 0, v = 0, out = 0, latents = 0;
};
AttentionWidths attention_widths(const ModelConfig& model);

// The GPT-3-style model of Narayanan 2021 Table 1: learned positions, tied embeddings, 4h MLP.
ModelConfig gpt_model(int64_t layers, int64_t hidden, int64_t heads, int64_t vocab, int64_t seq);
// Megatron-LM pads the vocabulary to a multiple of 128 x tp (--make-vocab-size-divisible-by 128,
// times the tensor-parallel size) so that each rank's slice of the embedding and the LM head is a
// whole number of 128-row tiles.
int64_t megatron_padded_vocab(int64_t vocab, int tp);
// A model known only by its parameter count (`--params 7.5e9`).
ModelConfig bare_model(double params);

// Layers are walked one by one (pipeline stages, activations): a count past any model's (the
// largest published have a few hundred) is a mistake, refused before the walk would hang.
inline constexpr int64_t kMostLayers = 100'000;

// Every dimension positive, at most kMostLayers layers, heads divide hidden (unless each head's
// width is given), kv heads divide heads; kInvalidArgument naming the field otherwise.
Status validate_model(const ModelConfig& model);
// The mixture-of-experts fields alone (part of validate_model): top_k within the experts, no
// expert field on a dense model.
Status validate_experts(const ModelConfig& model);

std::string_view architecture_name(Architecture value);
std::string_view mlp_name(MlpKind value);
std::string_view norm_name(NormKind value);
std::string_view position_name(PositionKind value);
std::string_view attention_name(AttentionKind value);
std::optional<Architecture> parse_architecture(std::string_view text);
std::optional<MlpKind> parse_mlp(std::string_view text);
std::optional<NormKind> parse_norm(std::string_view text);
std::optional<PositionKind> parse_position(std::string_view text);
std::optional<AttentionKind> parse_attention(std::string_view text);

}  // namespace partrain::memory
