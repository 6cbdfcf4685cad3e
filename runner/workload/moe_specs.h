// A mixture-of-experts block's parameters beside its attention (gpt_specs.h): the router (a
// replicated C -> E linear layer, data-parallel like every dense weight), the shared experts
// every token uses (dense, tensor-parallel MLPs of moe_ffn), and the routed experts (GeLU MLPs of
// moe_ffn, split over tp as the dense MLP is), which expert parallelism shards over the ep ranks
// and which live in a unit of their own ("layer3.experts"), reduced over the expert-data group.
// Every parameter is named and seeded by its global expert index, so a split cannot change it.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "runner/workload/param_layout.h"
#include "runner/workload/workload_layout.h"

namespace partrain::runner {

// An expert MLP's parameters, in the order its specs list them.
enum ExpertParam { kExpertFcW, kExpertFcB, kExpertProjW, kExpertProjB, kExpertParams };

std::string router_name(int layer);                                       // "layer3.router"
std::string shared_expert_name(int layer, int shared, ExpertParam part);  // "layer3.shared0.fcw"
std::string routed_expert_name(int layer, int expert, ExpertParam part);  // "layer3.expert5.fcw"
std::string experts_unit_name(int layer);                                 // "layer3.experts"

// The router and the shared experts: part of block `layer`'s unit.
std::vector<ParamSpec> moe_block_specs(const WorkloadModel& model, int layer);
// Routed experts [first, first + count) of block `layer`: one unit on an expert-parallel rank.
std::vector<ParamSpec> routed_expert_specs(const WorkloadModel& model, int layer, int first,
                                           int count);

}  // namespace partrain::runner
