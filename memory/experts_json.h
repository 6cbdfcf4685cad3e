// A mixture of experts' fields (MixtureOfExperts) in JSON, as the model presets and files and
// the built-in workload's config (workload_json.h) both write them: "experts", "top_k",
// "moe_ffn", "shared_experts", "dense_layers", "capacity_factor"; absent: a dense model.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "core/json_fields.h"
#include "core/status.h"
#include "memory/model_config.h"

namespace partrain::memory {

// Reads the fields present into `experts` (ranges: validate_experts).
Status read_experts(JsonFields& fields, MixtureOfExperts& experts);
// Adds the fields to `object` for a mixture of experts; nothing for a dense model.
void write_experts(const MixtureOfExperts& experts, nlohmann::json& object);

}  // namespace partrain::memory
