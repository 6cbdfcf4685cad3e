// A Hugging Face transformers `config.json`, read as a model: the file users already have for
// their model (as the Hugging Face and DeepSpeed memory calculators take it), given to
// --model-file like a preset. Each supported `model_type` is mapped field by field onto
// ModelConfig; what ModelConfig cannot express (embeddings projected to another width, experts
// of mixed sizes, linear biases on some layers only) is refused naming the field, never
// approximated silently. Errors are StatusCode::kUnreadable naming the file and the field.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "memory/model_config.h"

namespace partrain::memory {

// A config.json is one: an object with "model_type" and none of the presets' "layers".
bool is_hf_config(const nlohmann::json& object);

// The model_types read, in the order the error message lists them.
const std::vector<std::string>& hf_model_types();

// The model in `config`, read from the file `origin`. Its sequence length is the one it was
// pre-trained with where the config says (rope_scaling's original_max_position_embeddings), else
// its context length (max_position_embeddings, n_positions); 0 when the config has neither
// (BLOOM): --seq gives it. Its name is "_name_or_path"'s last part when set, else the file's
// directory (the repository's name in a hub cache, models--ORG--NAME/snapshots/HASH/config.json).
StatusOr<ModelConfig> model_from_hf_config(const nlohmann::json& config, std::string_view origin);

}  // namespace partrain::memory
