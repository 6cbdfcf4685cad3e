#include "cli/expert_flags.h"

#include "cli/command.h"

namespace partrain::cli {

void add_expert_flags(CLI::App& cmd, ExpertFlags& f, const std::string& group) {
  CLI::Option* options[] = {
      cmd.add_option("--experts", f.experts, "Mixture of experts: routed experts per MoE layer")
          ->check(positive_number()),
      cmd.add_option("--top-k", f.top_k, "Mixture of experts: experts each token is routed to")
          ->check(positive_number()),
      cmd.add_option("--moe-ffn", f.moe_ffn,
                     "Mixture of experts: one expert's MLP size (default --ffn)")
          ->check(positive_number()),
      cmd.add_option("--shared-experts", f.shared_experts,
                     "Mixture of experts: experts every token uses (DeepSeekMoE)")
          ->check(non_negative_number()),
      cmd.add_option("--dense-layers", f.dense_layers,
                     "Mixture of experts: leading layers with a dense MLP of --ffn")
          ->check(non_negative_number()),
      cmd.add_option("--capacity-factor", f.capacity_factor,
                     "Mixture of experts: slots per expert over an even share (0: dropless)")
          ->check(non_negative_number()),
  };
  if (group.empty()) return;
  for (CLI::Option* option : options) option->group(group);
}

void apply_expert_flags(const ExpertFlags& f, int64_t ffn, memory::MixtureOfExperts& e) {
  if (f.experts > 0) e.experts = f.experts;
  if (f.top_k > 0) e.top_k = f.top_k;
  if (f.moe_ffn > 0) e.expert_ffn = f.moe_ffn;
  if (f.shared_experts >= 0) e.shared_experts = f.shared_experts;
  if (f.dense_layers >= 0) e.dense_layers = f.dense_layers;
  if (f.capacity_factor >= 0) e.capacity_factor = f.capacity_factor;
  // Experts given to a dense model are its MLP's size unless said.
  if (e.experts > 0 && e.expert_ffn == 0) e.expert_ffn = ffn;
}

const char* first_expert_flag(const ExpertFlags& f) {
  return first_given({{"--experts", f.experts > 0},
                      {"--top-k", f.top_k > 0},
                      {"--moe-ffn", f.moe_ffn > 0},
                      {"--shared-experts", f.shared_experts >= 0},
                      {"--dense-layers", f.dense_layers >= 0},
                      {"--capacity-factor", f.capacity_factor >= 0}});
}

}  // namespace partrain::cli
