// What a model is for the estimator: the dimensions of a GPT-style or LLaMA-style decoder
// (grouped KV heads, SwiGLU or GeLU MLP, LayerNorm or RMSNorm, learned/rotary/ALiBi positions,
// tied or untied embeddings), the lecture's deep MLP, or a bare parameter count.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace partrain::memory {

enum class Architecture { kTransformer, kMlp };
enum class MlpKind { kGelu, kSwiglu };                  // GeLU: 2 matrices h x f; SwiGLU: 3
enum class NormKind { kLayerNorm, kRmsNorm };           // LayerNorm: weight + bias; RMSNorm: weight
enum class PositionKind { kLearned, kRotary, kAlibi };  // only learned positions have weights

struct ModelConfig {
  std::string name = "custom";
  Architecture architecture = Architecture::kTransformer;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;  // grouped-query attention; equal to heads for multi-head attention
  int64_t ffn = 0;       // MLP inner size (4h for GPT)
  int64_t vocab = 0;
  int64_t seq = 0;  // training sequence length (and learned position table size)
  MlpKind mlp = MlpKind::kGelu;
  NormKind norm = NormKind::kLayerNorm;
  PositionKind position = PositionKind::kLearned;
  bool tied_embeddings = true;
  bool bias = true;             // linear-layer biases (GPT, OPT, BLOOM: yes; LLaMA: no)
  bool embedding_norm = false;  // a LayerNorm right after the word embedding (BLOOM)
  double bare_params = 0;       // > 0: only a parameter count is known (model states only)
  std::string source;           // where the dimensions were published

  bool is_bare() const { return bare_params > 0; }
  // The tokens of one training sample: seq, or 1 for a model without a sequence (an MLP's sample
  // is one input row).
  int64_t sample_seq() const { return seq > 0 ? seq : 1; }
  int64_t head_dim() const { return hidden / heads; }
  int64_t kv_dim() const { return kv_heads * head_dim(); }
  double kv_ratio() const { return static_cast<double>(kv_heads) / static_cast<double>(heads); }
};

// The GPT-3-style model of Narayanan 2021 Table 1: learned positions, tied embeddings, 4h MLP.
ModelConfig gpt_model(int64_t layers, int64_t hidden, int64_t heads, int64_t vocab, int64_t seq);
// Megatron-LM pads the vocabulary to a multiple of 128 x tp (--make-vocab-size-divisible-by 128,
// times the tensor-parallel size) so that each rank's slice of the embedding and the LM head is a
// whole number of 128-row tiles.
int64_t megatron_padded_vocab(int64_t vocab, int tp);
// A model known only by its parameter count (`--params 7.5e9`).
ModelConfig bare_model(double params);

// Every dimension positive, heads divide hidden, kv heads divide heads; kInvalidArgument naming
// the field otherwise.
Status validate_model(const ModelConfig& model);

std::string_view architecture_name(Architecture value);
std::string_view mlp_name(MlpKind value);
std::string_view norm_name(NormKind value);
std::string_view position_name(PositionKind value);
std::optional<Architecture> parse_architecture(std::string_view text);
std::optional<MlpKind> parse_mlp(std::string_view text);
std::optional<NormKind> parse_norm(std::string_view text);
std::optional<PositionKind> parse_position(std::string_view text);

}  // namespace partrain::memory
