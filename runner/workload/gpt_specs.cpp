#include "runner/workload/gpt_specs.h"

#include <fmt/format.h>

#include "runner/workload/moe_specs.h"

namespace partrain::runner {

std::vector<ParamSpec> gpt_embedding_specs(const WorkloadModel& m) {
  // Megatron's vocab-parallel embedding splits wte's rows (the vocabulary); wpe is replicated.
  return {{"wte", 1, {m.vocab, m.hidden}, TpSplit::kColumn, InitKind::kNormal, false},
          {"wpe", 2, {m.seq, m.hidden}, TpSplit::kReplicated, InitKind::kNormal, false}};
}

std::vector<ParamSpec> gpt_block_specs(const WorkloadModel& m, int layer) {
  const int64_t C = m.hidden;
  const int64_t F = m.ffn;
  const uint64_t base = 100 + 16 * static_cast<uint64_t>(layer);
  auto name = [layer](const char* part) { return fmt::format("layer{}.{}", layer, part); };
  // QKV and fc1 are column-parallel, the attention and MLP output projections row-parallel
  // (their biases replicated); layernorms replicated, their grads partial under SP.
  std::vector<ParamSpec> specs = {
      {name("ln1w"), base + 0, {C}, TpSplit::kReplicated, InitKind::kOnes, true},
      {name("ln1b"), base + 1, {C}, TpSplit::kReplicated, InitKind::kZeros, true},
      {name("qkvw"), base + 2, {3 * C, C}, TpSplit::kQkv, InitKind::kNormal, false},
      {name("qkvb"), base + 3, {3 * C}, TpSplit::kQkv, InitKind::kZeros, false},
      {name("attprojw"), base + 4, {C, C}, TpSplit::kRow, InitKind::kResidualNormal, false},
      {name("attprojb"), base + 5, {C}, TpSplit::kReplicated, InitKind::kZeros, false},
      {name("ln2w"), base + 6, {C}, TpSplit::kReplicated, InitKind::kOnes, true},
      {name("ln2b"), base + 7, {C}, TpSplit::kReplicated, InitKind::kZeros, true},
      {name("fcw"), base + 8, {F, C}, TpSplit::kColumn, InitKind::kNormal, false},
      {name("fcb"), base + 9, {F}, TpSplit::kColumn, InitKind::kZeros, false},
      {name("fcprojw"), base + 10, {C, F}, TpSplit::kRow, InitKind::kResidualNormal, false},
      {name("fcprojb"), base + 11, {C}, TpSplit::kReplicated, InitKind::kZeros, false},
  };
  if (m.moe.is_moe_layer(layer)) {  // the MLP's place: the router and the shared experts
    specs.resize(kLn2B + 1);
    for (ParamSpec& spec : moe_block_specs(m, layer)) specs.push_back(std::move(spec));
  }
  return specs;
}

std::vector<ParamSpec> gpt_final_specs(const WorkloadModel& m) {
  return {{"lnfw", 3, {m.hidden}, TpSplit::kReplicated, InitKind::kOnes, true},
          {"lnfb", 4, {m.hidden}, TpSplit::kReplicated, InitKind::kZeros, true}};
}

}  // namespace partrain::runner
