#include "memory/experts_json.h"

#include <nlohmann/json.hpp>

namespace partrain::memory {

Status read_experts(JsonFields& r, MixtureOfExperts& e) {
  RETURN_IF_ERROR(r.integer("experts", e.experts, 1, false));
  RETURN_IF_ERROR(r.integer("top_k", e.top_k, 1, false));
  RETURN_IF_ERROR(r.integer("moe_ffn", e.expert_ffn, 1, false));
  RETURN_IF_ERROR(r.integer("shared_experts", e.shared_experts, 0, false));
  RETURN_IF_ERROR(r.integer("dense_layers", e.dense_layers, 0, false));
  return r.positive_number("capacity_factor", e.capacity_factor, false);
}

void write_experts(const MixtureOfExperts& e, nlohmann::json& object) {
  if (!e.enabled()) return;
  object["experts"] = e.experts;
  object["top_k"] = e.top_k;
  object["moe_ffn"] = e.expert_ffn;
  object["shared_experts"] = e.shared_experts;
  object["dense_layers"] = e.dense_layers;
  if (e.capacity_factor > 0) object["capacity_factor"] = e.capacity_factor;  // absent: dropless
}

}  // namespace partrain::memory
