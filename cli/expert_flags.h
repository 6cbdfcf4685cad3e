// The mixture-of-experts flags (memory::MixtureOfExperts), one definition for every command that
// takes a model: `partrain memory`, `partrain recommend` and the built-in gpt workload of
// `partrain launch`, with the same names, help and defaults.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "memory/model_config.h"

namespace partrain::cli {

// Unset: -1 for the fields that may be 0, 0 for the others (the preset's value stays).
struct ExpertFlags {
  int64_t experts = 0, top_k = 0, moe_ffn = 0, shared_experts = -1, dense_layers = -1;
  double capacity_factor = -1;
};

// Adds --experts, --top-k, --moe-ffn, --shared-experts, --dense-layers and --capacity-factor
// (in `group` when not empty).
void add_expert_flags(CLI::App& cmd, ExpertFlags& f, const std::string& group = "");
// The flags given, over `experts`; an expert's MLP defaults to `ffn` when experts are given.
void apply_expert_flags(const ExpertFlags& f, int64_t ffn, memory::MixtureOfExperts& experts);
// The first expert flag given ("--top-k"), or null.
const char* first_expert_flag(const ExpertFlags& f);

}  // namespace partrain::cli
