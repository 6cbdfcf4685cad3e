#include "runner/workload/moe_specs.h"

#include <fmt/format.h>

namespace partrain::runner {
namespace {

constexpr const char* kPartNames[kExpertParams] = {"fcw", "fcb", "projw", "projb"};

// Ids above every dense parameter's (gpt_specs: 100 + 16 x layer + 12), one range per layer.
uint64_t layer_base(int layer) {
  return (uint64_t{1} << 32) + (static_cast<uint64_t>(layer) << 20);
}

// An expert MLP of `ffn` (fc column-parallel, proj row-parallel, as the dense MLP).
std::vector<ParamSpec> expert_mlp(const std::string& prefix, uint64_t id, int64_t C, int64_t F) {
  return {
      {prefix + kPartNames[kExpertFcW], id + 0, {F, C}, TpSplit::kColumn, InitKind::kNormal, false},
      {prefix + kPartNames[kExpertFcB], id + 1, {F}, TpSplit::kColumn, InitKind::kZeros, false},
      {prefix + kPartNames[kExpertProjW],
       id + 2,
       {C, F},
       TpSplit::kRow,
       InitKind::kResidualNormal,
       false},
      {prefix + kPartNames[kExpertProjB],
       id + 3,
       {C},
       TpSplit::kReplicated,
       InitKind::kZeros,
       false}};
}

}  // namespace

std::string router_name(int layer) { return fmt::format("layer{}.router", layer); }

std::string shared_expert_name(int layer, int shared, ExpertParam part) {
  return fmt::format("layer{}.shared{}.{}", layer, shared, kPartNames[part]);
}

std::string routed_expert_name(int layer, int expert, ExpertParam part) {
  return fmt::format("layer{}.expert{}.{}", layer, expert, kPartNames[part]);
}

std::string experts_unit_name(int layer) { return fmt::format("layer{}.experts", layer); }

std::vector<ParamSpec> moe_block_specs(const WorkloadModel& m, int layer) {
  const uint64_t base = layer_base(layer);
  std::vector<ParamSpec> specs = {{router_name(layer),
                                   base,
                                   {m.moe.experts, m.hidden},
                                   TpSplit::kReplicated,
                                   InitKind::kNormal,
                                   false}};
  for (int s = 0; s < m.moe.shared_experts; ++s) {
    for (ParamSpec& spec :
         expert_mlp(fmt::format("layer{}.shared{}.", layer, s),
                    base + 1 + 4 * static_cast<uint64_t>(s), m.hidden, m.moe.expert_ffn)) {
      specs.push_back(std::move(spec));
    }
  }
  return specs;
}

std::vector<ParamSpec> routed_expert_specs(const WorkloadModel& m, int layer, int first,
                                           int count) {
  std::vector<ParamSpec> specs;
  for (int e = first; e < first + count; ++e) {
    for (ParamSpec& spec :
         expert_mlp(fmt::format("layer{}.expert{}.", layer, e),
                    layer_base(layer) + (uint64_t{1} << 16) + 4 * static_cast<uint64_t>(e),
                    m.hidden, m.moe.expert_ffn)) {
      specs.push_back(std::move(spec));
    }
  }
  return specs;
}

}  // namespace partrain::runner
