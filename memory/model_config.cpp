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
  if (model.architecture == Architecture::kMlp) return Status::ok();
  if (model.hidden % model.heads != 0) {
    return invalid_argument("model '{}': heads ({}) must divide hidden ({})", model.name,
                            model.heads, model.hidden);
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
