// What transformers v4 left out of a vision-language wrapper's text_config: it saved the nested
// config as a diff against its class's defaults (gemma-3-4b-it's text_config has no vocab_size,
// llava-1.5-7b-hf's no hidden_size), and filled them back from the class when loading. The text
// model classes' size defaults, as transformers 5.24's configuration_*.py write them.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace partrain::memory {

// A wrapper's text_config completed from its text model class's defaults.
struct FilledTextConfig {
  std::string model_type;    // the text model's: text_config's own, else the wrapper's default
  std::string config_class;  // transformers' class the defaults are from ("LlamaConfig")
  std::vector<std::string> defaulted;  // "vocab_size 262208", each field taken from the class
};

// The text model type the wrapper `wrapper_type` builds when text_config names none (LLaVA:
// llama, Gemma 3: gemma3_text); nullopt for a wrapper partrain knows no default of.
std::optional<std::string> default_text_model_type(std::string_view wrapper_type);

// Fills `text_config` (a wrapper's, an object) with the defaults of the class of `model_type`
// for every size field it omits, and says which; nothing filled for a type without a table.
FilledTextConfig fill_text_config_defaults(nlohmann::json& text_config,
                                           const std::string& model_type);

}  // namespace partrain::memory
