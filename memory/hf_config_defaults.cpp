#include "memory/hf_config_defaults.h"

#include <fmt/format.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>

namespace partrain::memory {
namespace {

struct Default {
  const char* field;
  int64_t value;
};

// The fields partrain reads whose absence would change the model: the sizes, and head counts
// or widths whose class default is not what the reader falls back to (num_key_value_heads =
// num_attention_heads, head_dim = hidden_size / num_attention_heads). Booleans (tied
// embeddings, biases) are the readers' own defaults already.
struct TextClass {
  const char* model_type;
  const char* config_class;
  std::vector<Default> defaults;
};

// transformers 5.24, models/<type>/configuration_<type>.py, the class attributes.
const TextClass kTextClasses[] = {
    {"llama",
     "LlamaConfig",
     {{"vocab_size", 32000},
      {"hidden_size", 4096},
      {"intermediate_size", 11008},
      {"num_hidden_layers", 32},
      {"num_attention_heads", 32},
      {"max_position_embeddings", 2048}}},
    {"mistral",
     "MistralConfig",
     {{"vocab_size", 32000},
      {"hidden_size", 4096},
      {"intermediate_size", 14336},
      {"num_hidden_layers", 32},
      {"num_attention_heads", 32},
      {"num_key_value_heads", 8},
      {"max_position_embeddings", 131072},
      {"sliding_window", 4096}}},
    {"qwen2",
     "Qwen2Config",
     {{"vocab_size", 151936},
      {"hidden_size", 4096},
      {"intermediate_size", 22016},
      {"num_hidden_layers", 32},
      {"num_attention_heads", 32},
      {"num_key_value_heads", 32},
      {"max_position_embeddings", 32768}}},
    {"gemma",
     "GemmaConfig",
     {{"vocab_size", 256000},
      {"hidden_size", 3072},
      {"intermediate_size", 24576},
      {"num_hidden_layers", 28},
      {"num_attention_heads", 16},
      {"num_key_value_heads", 16},
      {"head_dim", 256},
      {"max_position_embeddings", 8192}}},
    {"gemma2",
     "Gemma2Config",
     {{"vocab_size", 256000},
      {"hidden_size", 2304},
      {"intermediate_size", 9216},
      {"num_hidden_layers", 26},
      {"num_attention_heads", 8},
      {"num_key_value_heads", 4},
      {"head_dim", 256},
      {"max_position_embeddings", 8192},
      {"sliding_window", 4096}}},
    {"gemma3_text",
     "Gemma3TextConfig",
     {{"vocab_size", 262208},
      {"hidden_size", 2304},
      {"intermediate_size", 9216},
      {"num_hidden_layers", 26},
      {"num_attention_heads", 8},
      {"num_key_value_heads", 4},
      {"head_dim", 256},
      {"max_position_embeddings", 131072},
      {"sliding_window", 4096}}},
};

// transformers 5.24: each wrapper's sub_configs_defaults["text_config"] (a dict text_config is
// built with its class's defaults; the wrapper's init_kwargs apply only when it is absent).
const std::pair<const char*, const char*> kWrapperTextTypes[] = {
    {"llava", "llama"},           {"llava_next", "llama"},   {"vipllava", "llama"},
    {"llava_onevision", "qwen2"}, {"gemma3", "gemma3_text"},
};

}  // namespace

std::optional<std::string> default_text_model_type(std::string_view wrapper_type) {
  for (const auto& [wrapper, text] : kWrapperTextTypes) {
    if (wrapper_type == wrapper) return text;
  }
  return std::nullopt;
}

FilledTextConfig fill_text_config_defaults(nlohmann::json& text_config,
                                           const std::string& model_type) {
  FilledTextConfig filled{model_type, "", {}};
  for (const TextClass& text_class : kTextClasses) {
    if (model_type != text_class.model_type) continue;
    filled.config_class = text_class.config_class;
    for (const Default& d : text_class.defaults) {
      if (text_config.contains(d.field)) continue;  // an explicit null is the user's: unset
      text_config[d.field] = d.value;
      filled.defaulted.push_back(fmt::format("{} {}", d.field, d.value));
    }
  }
  return filled;
}

}  // namespace partrain::memory
