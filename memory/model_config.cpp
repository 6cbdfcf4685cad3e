#include "memory/model_config.h"

namespace partrain::memory {

ModelConfig gpt_model(int64_t layers, int64_t hidden, int64_t heads, int64_t vocab, int64_t seq) {
  ModelConfig model;
  model.name = "gpt";
  model.layers = layers;
  model.hidden = hidden;
  model.heads = heads;
  model.kv_heads = heads;
  model.ffn = 4 * hidden;
  model.vocab = vocab;
  model.seq = seq;
  return model;
}

ModelConfig bare_model(double params) {
  ModelConfig model;
  model.name = "params";
  model.bare_params = params;
  return model;
}

int64_t megatron_padded_vocab(int64_t vocab, int tp) {
  const int64_t multiple = 128 * static_cast<int64_t>(tp > 0 ? tp : 1);
  return vocab <= 0 ? vocab : (vocab + multiple - 1) / multiple * multiple;
}

Status validate_experts(const ModelConfig& model) {
  const MixtureOfExperts& e = model.moe;
  if (!e.enabled()) {
    const std::pair<const char*, bool> set[] = {{"top_k", e.top_k != 0},
                                                {"moe_ffn", e.expert_ffn != 0},
                                                {"shared_experts", e.shared_experts != 0},
                                                {"dense_layers", e.dense_layers != 0},
                                                {"capacity_factor", e.capacity_factor != 0}};
    for (const auto& [field, given] : set) {
      if (given) {
        return invalid_argument("model '{}': {} is for a mixture of experts: give experts too",
                                model.name, field);
      }
    }
    return Status::ok();
  }
  if (e.experts < 0) return invalid_argument("model '{}': experts must be positive", model.name);
  if (e.top_k < 1 || e.top_k > e.experts) {
    return invalid_argument("model '{}': top_k ({}) must be between 1 and experts ({})", model.name,
                            e.top_k, e.experts);
  }
  if (e.expert_ffn < 1) {
    return invalid_argument("model '{}': moe_ffn (one expert's MLP size) must be positive (got {})",
                            model.name, e.expert_ffn);
  }
  if (e.shared_experts < 0) {
    return invalid_argument("model '{}': shared_experts must be 0 or more (got {})", model.name,
                            e.shared_experts);
  }
  if (e.dense_layers < 0 || e.dense_layers >= model.layers) {
    return invalid_argument(
        "model '{}': dense_layers ({}) must be fewer than the {} layers: the "
        "others route to experts",
        model.name, e.dense_layers, model.layers);
  }
  if (!(e.capacity_factor >= 0)) {
    return invalid_argument("model '{}': capacity_factor must be 0 (dropless) or positive (got {})",
                            model.name, e.capacity_factor);
  }
  return Status::ok();
}

namespace {

Status validate_latent(const ModelConfig& model) {
  const LatentAttention& a = model.latent;
  const std::pair<const char*, int64_t> positive[] = {{"kv_lora_rank", a.kv_lora_rank},
                                                      {"qk_nope_dim", a.qk_nope_dim},
                                                      {"qk_rope_dim", a.qk_rope_dim},
                                                      {"v_head_dim", a.v_head_dim}};
  for (const auto& [field, value] : positive) {
    if (value <= 0) {
      return invalid_argument("model '{}': latent attention needs {} > 0 (got {})", model.name,
                              field, value);
    }
  }
  if (a.q_lora_rank < 0) {
    return invalid_argument("model '{}': q_lora_rank must be 0 (no query latent) or positive",
                            model.name);
  }
  return Status::ok();
}

}  // namespace

AttentionWidths attention_widths(const ModelConfig& model) {
  const auto d = [](int64_t value) { return static_cast<double>(value); };
  if (model.attention == AttentionKind::kLatent) {
    const LatentAttention& a = model.latent;
    const double heads = d(model.heads);
    const double qk = heads * d(a.qk_nope_dim + a.qk_rope_dim);
    return {qk, qk, heads * d(a.v_head_dim), heads * d(a.v_head_dim),
            d(a.q_lora_rank + a.kv_lora_rank + a.qk_rope_dim)};
  }
  return {d(model.q_dim()), d(model.kv_dim()), d(model.kv_dim()), d(model.q_dim()), 0};
}

Status validate_model(const ModelConfig& model) {
  if (model.is_bare()) return Status::ok();
  const std::pair<const char*, int64_t> positive[] = {
      {"layers", model.layers}, {"hidden", model.hidden},
      {"heads", model.heads},   {"kv_heads", model.kv_heads},
      {"ffn", model.ffn},       {"vocab", model.vocab},
      {"seq", model.seq}};
  for (const auto& [field, value] : positive) {
    if (model.architecture == Architecture::kMlp && std::string_view(field) != "layers" &&
        std::string_view(field) != "hidden") {
      continue;  // the deep MLP has no attention, vocabulary or sequence
    }
    if (value <= 0)
      return invalid_argument("model '{}': {} must be positive (got {})", model.name, field, value);
  }
  if (model.layers > kMostLayers) {
    return invalid_argument(
        "model '{}': {} layers is more than any model has (at most {}): check the layer count",
        model.name, model.layers, kMostLayers);
  }
  if (model.architecture == Architecture::kMlp) return Status::ok();
  RETURN_IF_ERROR(validate_experts(model));
  if (model.attention == AttentionKind::kLatent) return validate_latent(model);
  if (model.explicit_head_dim < 0) {
    return invalid_argument("model '{}': head_dim must be positive (got {})", model.name,
                            model.explicit_head_dim);
  }
  if (model.explicit_head_dim == 0 && model.hidden % model.heads != 0) {
    return invalid_argument("model '{}': heads ({}) must divide hidden ({}), or give head_dim",
                            model.name, model.heads, model.hidden);
  }
  if (model.heads % model.kv_heads != 0) {
    return invalid_argument("model '{}': kv_heads ({}) must divide heads ({})", model.name,
                            model.kv_heads, model.heads);
  }
  return Status::ok();
}

std::string_view architecture_name(Architecture value) {
  return value == Architecture::kMlp ? "mlp" : "transformer";
}
std::string_view mlp_name(MlpKind value) { return value == MlpKind::kSwiglu ? "swiglu" : "gelu"; }
std::string_view norm_name(NormKind value) {
  return value == NormKind::kRmsNorm ? "rmsnorm" : "layernorm";
}
std::string_view position_name(PositionKind value) {
  switch (value) {
    case PositionKind::kLearned:
      return "learned";
    case PositionKind::kRotary:
      return "rotary";
    case PositionKind::kAlibi:
      return "alibi";
  }
  return "learned";
}

std::string_view attention_name(AttentionKind value) {
  return value == AttentionKind::kLatent ? "mla" : "mha";
}

std::optional<AttentionKind> parse_attention(std::string_view text) {
  if (text == "mha") return AttentionKind::kMultiHead;
  if (text == "mla") return AttentionKind::kLatent;
  return std::nullopt;
}

std::optional<Architecture> parse_architecture(std::string_view text) {
  if (text == "transformer") return Architecture::kTransformer;
  if (text == "mlp") return Architecture::kMlp;
  return std::nullopt;
}
std::optional<MlpKind> parse_mlp(std::string_view text) {
  if (text == "gelu") return MlpKind::kGelu;
  if (text == "swiglu") return MlpKind::kSwiglu;
  return std::nullopt;
}
std::optional<NormKind> parse_norm(std::string_view text) {
  if (text == "layernorm") return NormKind::kLayerNorm;
  if (text == "rmsnorm") return NormKind::kRmsNorm;
  return std::nullopt;
}
std::optional<PositionKind> parse_position(std::string_view text) {
  if (text == "learned") return PositionKind::kLearned;
  if (text == "rotary") return PositionKind::kRotary;
  if (text == "alibi") return PositionKind::kAlibi;
  return std::nullopt;
}

}  // namespace partrain::memory
