// The GPT of DESIGN.md "Reference workloads" as parameter specs: token and learned position
// embeddings, L blocks of [LayerNorm, causal attention, residual, LayerNorm, MLP (GeLU), residual],
// a final LayerNorm and an LM head tied to the token embedding (GPT-2's layout, as llm.c).
// Megatron's tensor-parallel split of each tensor is part of its spec.
#pragma once

#include <vector>

#include "runner/workload/param_layout.h"
#include "runner/workload/workload_layout.h"

namespace partrain::runner {

// Parameter names inside a block, in the order the specs list them.
enum GptBlockParam {
  kLn1W, kLn1B, kQkvW, kQkvB, kAttProjW, kAttProjB, kLn2W, kLn2B, kFcW, kFcB, kFcProjW, kFcProjB,
  kGptBlockParams
};

std::vector<ParamSpec> gpt_embedding_specs(const WorkloadModel& model);  // wte (V, C), wpe (T, C)
std::vector<ParamSpec> gpt_block_specs(const WorkloadModel& model, int layer);
std::vector<ParamSpec> gpt_final_specs(const WorkloadModel& model);      // lnf weight and bias

}  // namespace partrain::runner
