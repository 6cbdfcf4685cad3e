#include "memory/hf_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <utility>

#include "memory/hf_config_defaults.h"

namespace partrain::memory {
namespace {

using nlohmann::json;

constexpr int64_t kLargestDimension = int64_t{1} << 40;

// The config's fields as transformers writes them: a null is an unset field (n_inner,
// q_lora_rank), and a field may go by an older name (BLOOM's n_embed). A wrapper's language
// model is read from its text_config, whose fields the errors name as text_config.FIELD.
class HfFields {
 public:
  HfFields(const json& config, std::string_view origin, std::string prefix = "")
      : config_(config), origin_(origin), prefix_(std::move(prefix)) {}

  // The field as the user finds it in the file.
  std::string path(std::string_view name) const { return prefix_ + std::string(name); }

  template <typename... Args>
  Status error(fmt::format_string<Args...> format, Args&&... args) const {
    return make_status(StatusCode::kUnreadable, "{}: {}", origin_,
                       fmt::format(format, std::forward<Args>(args)...));
  }

  // The first of `names` present and not null, with the name it goes by.
  std::pair<const json*, const char*> find(std::initializer_list<const char*> names) const {
    for (const char* name : names) {
      auto it = config_.find(name);
      if (it != config_.end() && !it->is_null()) return {&*it, name};
    }
    return {nullptr, *names.begin()};
  }

  // The first of `names` present, an integer from `least` to `most`; `fallback` when none is.
  StatusOr<int64_t> integer(std::initializer_list<const char*> names,
                            std::optional<int64_t> fallback = std::nullopt, int64_t least = 1,
                            int64_t most = kLargestDimension) const {
    const auto [value, name] = find(names);
    if (value == nullptr) {
      if (fallback) return *fallback;
      if (prefix_.empty()) return error("Hugging Face config without '{}'", path(name));
      return error(
          "Hugging Face config without '{}', which partrain knows no default of for this "
          "language model: add it to {}, from the language model's own config.json",
          path(name), prefix_.substr(0, prefix_.size() - 1));
    }
    // Bounded, so that the products of dimensions the estimator forms stay exact.
    if (!value->is_number_integer() || value->get<int64_t>() < least ||
        value->get<int64_t>() > most) {
      return error("Hugging Face config field '{}' must be an integer from {} to {} (got {})",
                   path(name), least, most, value->dump());
    }
    return value->get<int64_t>();
  }

  StatusOr<bool> boolean(const char* name, bool fallback) const {
    const json* value = find({name}).first;
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) {
      return error("Hugging Face config field '{}' must be true or false (got {})", path(name),
                   value->dump());
    }
    return value->get<bool>();
  }

  // A dropout probability, when the config states one.
  StatusOr<std::optional<double>> probability(std::initializer_list<const char*> names) const {
    const auto [value, name] = find(names);
    if (value == nullptr) return std::optional<double>();
    if (!value->is_number() || value->get<double>() < 0 || value->get<double>() >= 1) {
      return error("Hugging Face config field '{}' must be a probability in [0, 1) (got {})",
                   path(name), value->dump());
    }
    return std::optional<double>(value->get<double>());
  }

 private:
  const json& config_;
  std::string origin_;
  std::string prefix_;
};

// A rope block's original length (original_max_position_embeddings), under `path` for errors;
// nullopt when it names none.
StatusOr<std::optional<int64_t>> original_length(const HfFields& f, const json& rope,
                                                 const std::string& path) {
  auto original = rope.find("original_max_position_embeddings");
  if (original == rope.end() || original->is_null()) return std::optional<int64_t>();
  if (!original->is_number_integer() || original->get<int64_t>() < 1 ||
      original->get<int64_t>() > kLargestDimension) {
    return f.error(
        "Hugging Face config field '{}.original_max_position_embeddings' must be an integer from "
        "1 to {} (got {})",
        path, kLargestDimension, original->dump());
  }
  return std::optional<int64_t>(original->get<int64_t>());
}

// The original length in the rope block transformers v4 writes as rope_scaling and v5 as
// rope_parameters, which v5 nests by layer type where they differ (Gemma 3: full_attention,
// sliding_attention): the full attention's, else the largest a layer type names.
StatusOr<std::optional<int64_t>> rope_original_length(const HfFields& f) {
  for (const char* name : {"rope_scaling", "rope_parameters"}) {
    const json* rope = f.find({name}).first;
    if (rope == nullptr || !rope->is_object()) continue;
    ASSIGN_OR_RETURN(std::optional<int64_t> flat, original_length(f, *rope, f.path(name)));
    if (flat) return flat;
    std::optional<int64_t> longest;
    for (const auto& [layer_type, nested] : rope->items()) {
      if (!nested.is_object()) continue;
      ASSIGN_OR_RETURN(std::optional<int64_t> length,
                       original_length(f, nested, f.path(name) + "." + layer_type));
      if (length && layer_type == "full_attention") return length;
      if (length && (!longest || *length > *longest)) longest = length;
    }
    if (longest) return longest;
  }
  return std::optional<int64_t>();
}

// The length it was pre-trained with where the config says so (a context extended by YaRN or
// Llama 3.1's rope scaling keeps the original, in its rope block or, for Phi-3, beside it), else
// its context length; 0 without either.
StatusOr<int64_t> pretraining_seq(const HfFields& f,
                                  std::initializer_list<const char*> context_names) {
  ASSIGN_OR_RETURN(const std::optional<int64_t> original, rope_original_length(f));
  if (original) return *original;
  if (f.find({"original_max_position_embeddings"}).first != nullptr) {
    return f.integer({"original_max_position_embeddings"});
  }
  return f.integer(context_names, int64_t{0});
}

// Each head's width, where the config gives one other than hidden_size / num_attention_heads
// (Gemma, the small Qwen3s, Mistral-Nemo): the attention computes with heads x head_dim.
Status read_head_dim(const HfFields& f, ModelConfig& m) {
  ASSIGN_OR_RETURN(const int64_t head_dim, f.integer({"head_dim"}, int64_t{0}));
  if (head_dim > 0 && (m.hidden % m.heads != 0 || head_dim != m.hidden / m.heads)) {
    m.explicit_head_dim = head_dim;
  }
  return Status::ok();
}

// The decoders written like LLaMA: RMSNorm, rotary positions, a gated MLP of 3 matrices
// (SwiGLU), untied embeddings unless the config ties them.
// The block's fields, biases aside (read_llama_like refuses them, gpt-oss has them all).
Status read_llama_block(const HfFields& f, ModelConfig& m) {
  ASSIGN_OR_RETURN(m.hidden, f.integer({"hidden_size"}));
  ASSIGN_OR_RETURN(m.layers, f.integer({"num_hidden_layers"}, std::nullopt, 1, kMostLayers));
  ASSIGN_OR_RETURN(m.heads, f.integer({"num_attention_heads"}));
  ASSIGN_OR_RETURN(m.kv_heads, f.integer({"num_key_value_heads"}, m.heads));
  ASSIGN_OR_RETURN(m.ffn, f.integer({"intermediate_size"}));
  ASSIGN_OR_RETURN(m.vocab, f.integer({"vocab_size"}));
  ASSIGN_OR_RETURN(m.seq, pretraining_seq(f, {"max_position_embeddings"}));
  ASSIGN_OR_RETURN(m.tied_embeddings, f.boolean("tie_word_embeddings", false));
  m.mlp = MlpKind::kSwiglu;
  m.norm = NormKind::kRmsNorm;
  m.position = PositionKind::kRotary;
  RETURN_IF_ERROR(read_head_dim(f, m));
  ASSIGN_OR_RETURN(m.dropout, f.probability({"attention_dropout"}));
  return Status::ok();
}

Status read_llama_like(const HfFields& f, ModelConfig& m) {
  RETURN_IF_ERROR(read_llama_block(f, m));
  m.bias = false;
  ASSIGN_OR_RETURN(const bool attention_bias, f.boolean("attention_bias", false));
  ASSIGN_OR_RETURN(const bool mlp_bias, f.boolean("mlp_bias", false));
  if (attention_bias || mlp_bias) {
    return f.error(
        "Hugging Face config with attention_bias or mlp_bias true: partrain's LLaMA-style model "
        "has no linear biases; write the model in the presets' format (\"bias\": true) instead");
  }
  return Status::ok();
}

Status read_mixtral(const HfFields& f, ModelConfig& m) {
  RETURN_IF_ERROR(read_llama_like(f, m));
  ASSIGN_OR_RETURN(m.moe.experts, f.integer({"num_local_experts"}));
  ASSIGN_OR_RETURN(m.moe.top_k, f.integer({"num_experts_per_tok"}, std::nullopt, 1, m.moe.experts));
  m.moe.expert_ffn = m.ffn;
  return Status::ok();
}

// gpt-oss: LLaMA's block with biases on every linear layer (q/k/v/o and each expert's), routed
// experts of intermediate_size, and a learned attention sink per head (not counted, nor the
// router's bias).
Status read_gpt_oss(const HfFields& f, ModelConfig& m) {
  RETURN_IF_ERROR(read_llama_block(f, m));
  m.bias = true;
  ASSIGN_OR_RETURN(m.moe.experts, f.integer({"num_local_experts"}));
  ASSIGN_OR_RETURN(m.moe.top_k, f.integer({"num_experts_per_tok", "experts_per_token"},
                                          std::nullopt, 1, m.moe.experts));
  m.moe.expert_ffn = m.ffn;
  m.notes.push_back(
      fmt::format("its attention sinks and router biases ({:.0f} parameters) are not counted",
                  static_cast<double>(m.layers) * static_cast<double>(m.heads + m.moe.experts)));
  return Status::ok();
}

// A mixture whose `field` (how many blocks apart the routed ones are) is 1: partrain's routes
// every block after the dense ones; another spacing is refused naming the field.
Status every_block_routed(const HfFields& f, const char* field) {
  ASSIGN_OR_RETURN(const int64_t every, f.integer({field}, int64_t{1}));
  if (every == 1) return Status::ok();
  return f.error(
      "Hugging Face config field '{}' is {}: partrain's mixture of experts routes every block "
      "after the dense ones",
      field, every);
}

// DeepSeek-V2/V3: latent attention, shared and routed experts after the first dense blocks.
Status read_deepseek(const HfFields& f, ModelConfig& m) {
  RETURN_IF_ERROR(read_llama_like(f, m));
  m.kv_heads = m.heads;  // latent attention: every head has its keys and values
  m.attention = AttentionKind::kLatent;
  ASSIGN_OR_RETURN(m.latent.q_lora_rank, f.integer({"q_lora_rank"}, int64_t{0}, 0));
  ASSIGN_OR_RETURN(m.latent.kv_lora_rank, f.integer({"kv_lora_rank"}));
  ASSIGN_OR_RETURN(m.latent.qk_nope_dim, f.integer({"qk_nope_head_dim"}));
  ASSIGN_OR_RETURN(m.latent.qk_rope_dim, f.integer({"qk_rope_head_dim"}));
  ASSIGN_OR_RETURN(m.latent.v_head_dim, f.integer({"v_head_dim"}));
  // DeepSeek-V3's multi-token prediction: a block, its projection and norms beside the model,
  // trained with it and dropped for inference (Hugging Face's 685B counts them, 14B).
  ASSIGN_OR_RETURN(const int64_t predict_layers,
                   f.integer({"num_nextn_predict_layers"}, int64_t{0}, 0, kMostLayers));
  if (predict_layers > 0) {
    m.notes.push_back(fmt::format(
        "its {} multi-token-prediction module{} (num_nextn_predict_layers) {} not counted",
        predict_layers, predict_layers == 1 ? "" : "s", predict_layers == 1 ? "is" : "are"));
  }
  ASSIGN_OR_RETURN(m.moe.experts, f.integer({"n_routed_experts"}, int64_t{0}, 0));
  if (m.moe.experts == 0) return Status::ok();
  RETURN_IF_ERROR(every_block_routed(f, "moe_layer_freq"));
  ASSIGN_OR_RETURN(m.moe.top_k, f.integer({"num_experts_per_tok"}, std::nullopt, 1, m.moe.experts));
  ASSIGN_OR_RETURN(m.moe.expert_ffn, f.integer({"moe_intermediate_size"}));
  ASSIGN_OR_RETURN(m.moe.shared_experts, f.integer({"n_shared_experts"}, int64_t{0}, 0));
  ASSIGN_OR_RETURN(m.moe.dense_layers, f.integer({"first_k_dense_replace"}, int64_t{0}, 0));
  return Status::ok();
}

// The sizes every dense multi-head model has, under the names its type gives them.
Status read_sizes(const HfFields& f, ModelConfig& m, std::initializer_list<const char*> hidden,
                  std::initializer_list<const char*> layers,
                  std::initializer_list<const char*> heads) {
  ASSIGN_OR_RETURN(m.hidden, f.integer(hidden));
  ASSIGN_OR_RETURN(m.layers, f.integer(layers, std::nullopt, 1, kMostLayers));
  ASSIGN_OR_RETURN(m.heads, f.integer(heads));
  m.kv_heads = m.heads;
  ASSIGN_OR_RETURN(m.vocab, f.integer({"vocab_size"}));
  return Status::ok();
}

// GPT-NeoX and Pythia: LayerNorm, rotary positions, a GeLU MLP, biases, untied embeddings.
Status read_gpt_neox(const HfFields& f, ModelConfig& m) {
  RETURN_IF_ERROR(
      read_sizes(f, m, {"hidden_size"}, {"num_hidden_layers"}, {"num_attention_heads"}));
  ASSIGN_OR_RETURN(m.ffn, f.integer({"intermediate_size"}, 4 * m.hidden));
  ASSIGN_OR_RETURN(m.seq, pretraining_seq(f, {"max_position_embeddings"}));
  ASSIGN_OR_RETURN(m.tied_embeddings, f.boolean("tie_word_embeddings", false));
  m.position = PositionKind::kRotary;
  ASSIGN_OR_RETURN(m.dropout, f.probability({"hidden_dropout", "attention_dropout"}));
  return Status::ok();
}

// GPT-2: learned positions, tied embeddings, a 4h GeLU MLP unless n_inner says otherwise.
Status read_gpt2(const HfFields& f, ModelConfig& m) {
  RETURN_IF_ERROR(read_sizes(f, m, {"n_embd"}, {"n_layer"}, {"n_head"}));
  ASSIGN_OR_RETURN(m.ffn, f.integer({"n_inner"}, 4 * m.hidden));
  ASSIGN_OR_RETURN(m.seq, f.integer({"n_positions", "n_ctx"}, int64_t{0}));
  ASSIGN_OR_RETURN(m.tied_embeddings, f.boolean("tie_word_embeddings", true));
  ASSIGN_OR_RETURN(m.dropout, f.probability({"resid_pdrop"}));
  return Status::ok();
}

// OPT: learned positions, tied embeddings, a ReLU MLP of ffn_dim (GeLU's parameter count).
Status read_opt(const HfFields& f, ModelConfig& m) {
  RETURN_IF_ERROR(
      read_sizes(f, m, {"hidden_size"}, {"num_hidden_layers"}, {"num_attention_heads"}));
  ASSIGN_OR_RETURN(m.ffn, f.integer({"ffn_dim"}));
  ASSIGN_OR_RETURN(m.seq, f.integer({"max_position_embeddings"}, int64_t{0}));
  ASSIGN_OR_RETURN(m.tied_embeddings, f.boolean("tie_word_embeddings", true));
  ASSIGN_OR_RETURN(m.bias, f.boolean("enable_bias", true));
  ASSIGN_OR_RETURN(const int64_t projected, f.integer({"word_embed_proj_dim"}, m.hidden));
  if (projected != m.hidden) {
    return f.error(
        "Hugging Face config field 'word_embed_proj_dim' ({}) differs from hidden_size ({}): "
        "partrain's model has no projection between the embeddings and the blocks",
        projected, m.hidden);
  }
  ASSIGN_OR_RETURN(m.dropout, f.probability({"dropout"}));
  return Status::ok();
}

// BLOOM: ALiBi (no position weights, and no context length in the config), a LayerNorm after
// the word embedding, tied embeddings, a 4h GeLU MLP.
Status read_bloom(const HfFields& f, ModelConfig& m) {
  RETURN_IF_ERROR(read_sizes(f, m, {"hidden_size", "n_embed"}, {"n_layer", "num_hidden_layers"},
                             {"n_head", "num_attention_heads"}));
  ASSIGN_OR_RETURN(m.ffn, f.integer({"n_inner"}, 4 * m.hidden));
  m.seq = 0;
  ASSIGN_OR_RETURN(m.tied_embeddings, f.boolean("tie_word_embeddings", true));
  m.position = PositionKind::kAlibi;
  m.embedding_norm = true;
  ASSIGN_OR_RETURN(m.dropout, f.probability({"hidden_dropout"}));
  return Status::ok();
}

// Qwen2 is LLaMA's block with biases on the query, key and value projections alone, which
// partrain's model (biases on every linear layer or none) counts without: q_dim + 2 kv_dim
// parameters a block, about 0.002% of Qwen2-7B.
Status read_qwen2(const HfFields& f, ModelConfig& m) {
  RETURN_IF_ERROR(read_llama_like(f, m));
  m.notes.push_back(
      fmt::format("its q/k/v biases ({:.0f} parameters) are not counted",
                  static_cast<double>(m.layers) * static_cast<double>(m.q_dim() + 2 * m.kv_dim())));
  return Status::ok();
}

// Qwen3 and Gemma 3 add an RMSNorm over each head's queries and keys (2 head_dim weights a
// block), which partrain's model does not count.
void note_qk_norms(ModelConfig& m) {
  m.notes.push_back(
      fmt::format("its per-head q/k norms ({:.0f} parameters) are not counted",
                  static_cast<double>(m.layers) * static_cast<double>(2 * m.head_dim())));
}

Status read_qwen3(const HfFields& f, ModelConfig& m) {
  RETURN_IF_ERROR(read_llama_like(f, m));
  note_qk_norms(m);
  return Status::ok();
}

// Qwen's mixtures (qwen2_moe: Qwen1.5/Qwen2-MoE; qwen3_moe): LLaMA's attention (Qwen2's with
// q/k/v biases, Qwen3's with q/k norms, neither counted: read_qwen2, read_qwen3), every block
// routed except the dense ones `mlp_only_layers` lists, which partrain takes only as the first k.
// Qwen2-MoE's shared expert is one MLP of shared_expert_intermediate_size, counted as that many
// routed experts' widths (the same weights and FLOPs), behind a sigmoid gate of h weights a
// block, not counted.
Status read_qwen_moe(const HfFields& f, ModelConfig& m, bool shared_expert) {
  ASSIGN_OR_RETURN(m.moe.experts, f.integer({"num_experts"}));
  ASSIGN_OR_RETURN(m.moe.top_k, f.integer({"num_experts_per_tok"}, std::nullopt, 1, m.moe.experts));
  ASSIGN_OR_RETURN(m.moe.expert_ffn, f.integer({"moe_intermediate_size"}));
  RETURN_IF_ERROR(every_block_routed(f, "decoder_sparse_step"));
  if (const json* dense = f.find({"mlp_only_layers"}).first; dense != nullptr) {
    bool leading = dense->is_array();
    for (size_t i = 0; leading && i < dense->size(); ++i) {
      leading =
          (*dense)[i].is_number_integer() && (*dense)[i].get<int64_t>() == static_cast<int64_t>(i);
    }
    if (!leading) {
      return f.error(
          "Hugging Face config field 'mlp_only_layers' ({}) is not the first blocks 0, 1, ...: "
          "partrain's mixture of experts keeps dense MLPs in the first blocks only",
          dense->dump());
    }
    m.moe.dense_layers = static_cast<int64_t>(dense->size());
  }
  if (!shared_expert) return Status::ok();
  ASSIGN_OR_RETURN(const int64_t shared,
                   f.integer({"shared_expert_intermediate_size"}, int64_t{0}, 0));
  if (shared % m.moe.expert_ffn != 0) {
    return f.error(
        "Hugging Face config field 'shared_expert_intermediate_size' ({}) is not a multiple of "
        "moe_intermediate_size ({}): partrain's shared experts are routed experts' widths",
        shared, m.moe.expert_ffn);
  }
  m.moe.shared_experts = shared / m.moe.expert_ffn;
  if (shared > 0) {
    m.notes.push_back(fmt::format("its shared expert's gate ({:.0f} parameters) is not counted",
                                  static_cast<double>(m.layers) * static_cast<double>(m.hidden)));
  }
  return Status::ok();
}

Status read_qwen2_moe(const HfFields& f, ModelConfig& m) {
  RETURN_IF_ERROR(read_qwen2(f, m));
  return read_qwen_moe(f, m, true);
}

Status read_qwen3_moe(const HfFields& f, ModelConfig& m) {
  RETURN_IF_ERROR(read_qwen3(f, m));
  return read_qwen_moe(f, m, false);
}

// Gemma (the first): LLaMA's block with a gated GeLU (SwiGLU's count) and tied embeddings.
Status read_gemma(const HfFields& f, ModelConfig& m) {
  RETURN_IF_ERROR(read_llama_like(f, m));
  ASSIGN_OR_RETURN(m.tied_embeddings, f.boolean("tie_word_embeddings", true));
  return Status::ok();
}

// Gemma 2: Gemma's block with a norm after attention and after the MLP as well as before them
// (4 RMSNorms a block, 2 h weights more than partrain's model counts).
Status read_gemma2(const HfFields& f, ModelConfig& m) {
  RETURN_IF_ERROR(read_gemma(f, m));
  m.notes.push_back(
      fmt::format("its norms after attention and the MLP ({:.0f} parameters) are not "
                  "counted",
                  static_cast<double>(m.layers) * static_cast<double>(2 * m.hidden)));
  return Status::ok();
}

// Gemma 3's language model: Gemma 2's block with Qwen3's per-head q/k norms.
Status read_gemma3_text(const HfFields& f, ModelConfig& m) {
  RETURN_IF_ERROR(read_gemma2(f, m));
  note_qk_norms(m);
  return Status::ok();
}

// Sliding-window attention (Mistral 7B v0.1, Gemma 2's alternate blocks) attends to the last
// `sliding_window` keys only; partrain's attention core is causal over the whole sequence, so a
// sequence longer than the window (the config's, or --seq's) is costed as full attention, and a
// note says so.
Status note_sliding_window(const HfFields& f, ModelConfig& m) {
  ASSIGN_OR_RETURN(const bool used, f.boolean("use_sliding_window", true));
  ASSIGN_OR_RETURN(const int64_t window, f.integer({"sliding_window"}, int64_t{0}, 0));
  if (used && window > 0) {
    m.notes.push_back(fmt::format(
        "its sliding window ({} keys) is not modelled: a longer sequence is costed as full "
        "attention",
        window));
  }
  return Status::ok();
}

// A Hugging Face config's model name: its "_name_or_path" when set, else its directory's (the
// repository's name in a hub cache, models--ORG--NAME/snapshots/HASH/config.json).
std::string hf_model_name(const json& config, std::string_view origin) {
  auto named = config.find("_name_or_path");
  if (named != config.end() && named->is_string() && !named->get<std::string>().empty()) {
    return std::filesystem::path(named->get<std::string>()).filename().string();
  }
  const std::filesystem::path path(origin);
  std::filesystem::path dir = path.parent_path();
  if (dir.parent_path().filename() == "snapshots") {
    const std::string repo = dir.parent_path().parent_path().filename().string();
    const size_t dashes = repo.rfind("--");
    if (dashes != std::string::npos) return repo.substr(dashes + 2);
  }
  if (path.filename() == "config.json" && !dir.filename().empty()) return dir.filename().string();
  return path.stem().string();
}

struct Mapping {
  const char* model_type;
  Status (*read)(const HfFields&, ModelConfig&);
};

const Mapping kMappings[] = {
    {"llama", read_llama_like},
    {"mistral", read_llama_like},
    {"qwen2", read_qwen2},
    {"qwen3", read_qwen3},
    {"qwen2_moe", read_qwen2_moe},
    {"qwen3_moe", read_qwen3_moe},
    {"phi3", read_llama_like},
    {"gemma", read_gemma},
    {"gemma2", read_gemma2},
    {"gemma3_text", read_gemma3_text},
    {"mixtral", read_mixtral},
    {"gpt_oss", read_gpt_oss},
    {"deepseek_v2", read_deepseek},
    {"deepseek_v3", read_deepseek},
    {"gpt_neox", read_gpt_neox},
    {"gpt2", read_gpt2},
    {"opt", read_opt},
    {"bloom", read_bloom},
};

const Mapping* find_mapping(const json& config) {
  auto type = config.find("model_type");
  if (type == config.end() || !type->is_string()) return nullptr;
  for (const Mapping& m : kMappings) {
    if (type->get<std::string>() == m.model_type) return &m;
  }
  return nullptr;
}

}  // namespace

bool is_hf_config(const json& object) {
  return object.is_object() && object.contains("model_type") && !object.contains("layers");
}

const std::vector<std::string>& hf_model_types() {
  static const std::vector<std::string> types = [] {
    std::vector<std::string> out;
    for (const Mapping& m : kMappings) out.emplace_back(m.model_type);
    return out;
  }();
  return types;
}

namespace {

std::string model_type_list() {
  std::string types;
  for (const std::string& t : hf_model_types()) types += (types.empty() ? "" : ", ") + t;
  return types;
}

Status not_read(const json& config, const std::string& model_type, std::string_view origin) {
  return HfFields(config, origin)
      .error(
          "Hugging Face model_type \"{}\" is not one partrain reads (it reads {}): write the "
          "model in the presets' format (share/models/*.json, docs/memory.md)",
          model_type, model_type_list());
}

// The model in `config`, whose model_type `mapping` reads; `prefix` names where its fields are
// ("text_config." in a wrapper).
StatusOr<ModelConfig> read_model(const json& config, const Mapping& mapping,
                                 std::string_view origin, std::string prefix) {
  HfFields f(config, origin, std::move(prefix));
  ModelConfig m;
  m.name = hf_model_name(config, origin);
  m.source = fmt::format("{} (Hugging Face config, model_type {})", origin, mapping.model_type);
  RETURN_IF_ERROR(mapping.read(f, m));
  RETURN_IF_ERROR(note_sliding_window(f, m));
  if (m.attention != AttentionKind::kLatent) {
    if (m.explicit_head_dim == 0 && m.hidden % m.heads != 0) {
      return f.error(
          "the number of attention heads ({}) must divide the hidden size ({}), or the config "
          "must give head_dim",
          m.heads, m.hidden);
    }
    if (m.heads % m.kv_heads != 0) {
      return f.error("the number of key/value heads ({}) must divide the attention heads ({})",
                     m.kv_heads, m.heads);
    }
  }
  if (Status experts = validate_experts(m); !experts.is_ok()) {
    return f.error("{}", experts.message());
  }
  return m;
}

// A vision-language wrapper (gemma3, mistral3, llava...) keeps its language model in
// text_config: that is the model trained here; the vision encoder is not counted, and a note
// says so. transformers v4 saved text_config as a diff against its class's defaults, which fill
// what it omits, as transformers does when it loads it, and a note says which.
StatusOr<ModelConfig> read_text_config(const json& config, const json& text,
                                       const std::string& wrapper_type, std::string_view origin) {
  const HfFields f(config, origin);
  std::optional<std::string> text_type = default_text_model_type(wrapper_type);
  if (auto named = text.find("model_type"); named != text.end() && named->is_string()) {
    text_type = named->get<std::string>();
  }
  if (!text_type) {
    return f.error(
        "Hugging Face {} config whose text_config has no model_type: add "
        "text_config.model_type, the language model's (one of {})",
        wrapper_type, model_type_list());
  }
  const Mapping* mapping = find_mapping(json{{"model_type", *text_type}});
  if (mapping == nullptr) {
    return f.error(
        "Hugging Face {} config's language model, text_config.model_type \"{}\", is not one "
        "partrain reads (it reads {}): write the model in the presets' format "
        "(share/models/*.json, docs/memory.md)",
        wrapper_type, *text_type, model_type_list());
  }
  json filled_text = text;
  filled_text["model_type"] = *text_type;
  const FilledTextConfig filled = fill_text_config_defaults(filled_text, *text_type);
  ASSIGN_OR_RETURN(ModelConfig m, read_model(filled_text, *mapping, origin, "text_config."));
  m.name = hf_model_name(config, origin);
  if (!filled.defaulted.empty()) {
    m.notes.insert(m.notes.begin(),
                   fmt::format("its text_config leaves {} at transformers' {} defaults ({})",
                               filled.defaulted.size() == 1 ? "a field" : "fields",
                               filled.config_class, fmt::join(filled.defaulted, ", ")));
  }
  m.notes.insert(m.notes.begin(),
                 fmt::format("a {} config: its language model (text_config, model_type {}) is "
                             "counted, its vision encoder and projector are not",
                             wrapper_type, *text_type));
  return m;
}

// A quantized checkpoint's weights (AWQ, GPTQ, bitsandbytes, fp8, mxfp4) are stored narrower
// than training keeps them; partrain counts every weight at the recipe's width, which a note
// says, with the width the checkpoint stores where the config says it (docs/decisions.md).
void note_quantization(const json& config, ModelConfig& m) {
  auto quantization = config.find("quantization_config");
  if (quantization == config.end() || !quantization->is_object()) return;
  auto method = quantization->find("quant_method");
  const std::string name =
      method != quantization->end() && method->is_string() ? method->get<std::string>() : "";
  std::string width;
  if (auto bits = quantization->find("bits"); bits != quantization->end() && bits->is_number()) {
    width = fmt::format("{} bits a weight", bits->dump());
  } else if (quantization->value("load_in_4bit", false)) {
    width = "4 bits a weight";
  } else if (quantization->value("load_in_8bit", false) || name == "fp8") {
    width = "8 bits a weight";
  } else if (name == "mxfp4") {
    width = "4.25 bits a weight (4-bit values, an 8-bit scale a 32)";
  }
  std::string kept;
  if (auto unconverted = quantization->find("modules_to_not_convert");
      unconverted != quantization->end() && unconverted->is_array() && !unconverted->empty()) {
    std::vector<std::string> modules;
    for (const json& module : *unconverted) {
      if (module.is_string()) modules.push_back(module.get<std::string>());
    }
    kept = fmt::format(", except {}", fmt::join(modules, ", "));
  }
  m.notes.push_back(fmt::format(
      "its checkpoint is quantized (quantization_config: {}{}{}): partrain counts every weight "
      "at the --precision width training keeps, so an --inference estimate of the quantized "
      "weights is too large",
      name.empty() ? "quant_method unstated" : name, width.empty() ? "" : ", " + width, kept));
}

}  // namespace

StatusOr<ModelConfig> model_from_hf_config(const json& config, std::string_view origin) {
  const json& type = config.at("model_type");
  if (!type.is_string()) {
    return HfFields(config, origin)
        .error("Hugging Face config field 'model_type' must be a string (got {})", type.dump());
  }
  const std::string model_type = type.get<std::string>();
  StatusOr<ModelConfig> m = [&]() -> StatusOr<ModelConfig> {
    if (const Mapping* mapping = find_mapping(config)) {
      return read_model(config, *mapping, origin, "");
    }
    auto text = config.find("text_config");
    if (text == config.end() || !text->is_object()) return not_read(config, model_type, origin);
    return read_text_config(config, *text, model_type, origin);
  }();
  if (m.is_ok()) note_quantization(config, *m);
  return m;
}

}  // namespace partrain::memory
