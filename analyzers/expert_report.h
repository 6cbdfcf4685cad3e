// What `partrain recommend` says of a mixture of experts' step (docs/recommend.md "Mixtures of
// experts"): one MoE block's router and experts, the all_to_all with its group and link, and the
// two gradient groups, in --explain/--check's words and --json's keys (the same facts).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "analyzers/step_cost.h"

namespace partrain::analyzers {

// What the ranking of a mixture of experts rests on: the tie margin is the error shown on dense
// runs; no measured MoE run has validated the expert terms (text and --json's "moe_note").
std::string_view moe_note();

// Empty for a dense model.
std::string experts_text(const StepCost& cost, const memory::TrainingLayout& layout);
nlohmann::json experts_json(const StepCost& cost);

// "inside a node" / "across nodes"; --json's "intra_node" / "inter_node".
std::string_view level_words(LinkLevel level);
std::string_view level_key(LinkLevel level);

}  // namespace partrain::analyzers
