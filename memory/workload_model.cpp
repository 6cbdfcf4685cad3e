#include "memory/workload_model.h"

#include <utility>

namespace partrain::memory {

std::optional<WorkloadKind> parse_workload_kind(std::string_view name) {
  if (name == "gpt") return WorkloadKind::kGpt;
  if (name == "mlp") return WorkloadKind::kMlp;
  return std::nullopt;
}

std::string_view workload_kind_name(WorkloadKind kind) {
  return kind == WorkloadKind::kGpt ? "gpt" : "mlp";
}

Status check_workload_model(WorkloadKind kind, const WorkloadModel& m) {
  for (const auto& [flag, value] :
       {std::pair{"--layers", m.layers}, {"--hidden", m.hidden}, {"--seq", m.seq}}) {
    if (value < 1) return invalid_argument("{} must be at least 1, got {}", flag, value);
  }
  if (kind == WorkloadKind::kMlp) {
    if (m.moe.enabled()) {
      return invalid_argument("--experts applies to --workload gpt only: the MLP workload has no "
                              "mixture of experts");
    }
    return Status::ok();
  }
  if (m.heads < 1 || m.hidden % m.heads != 0) {
    return invalid_argument("--hidden {} is not divisible by --heads {}: each head gets "
                            "hidden / heads dimensions",
                            m.hidden, m.heads);
  }
  if (m.vocab < 2) return invalid_argument("--vocab must be at least 2");
  if (m.ffn < 1) return invalid_argument("--ffn must be at least 1");
  // One definition of the mixture's rules, memory's; its messages name the model's fields, which
  // are the flags' names (top_k: --top-k).
  return validate_experts(workload_model_config(kind, m))
      .with_context("the mixture-of-experts flags (--experts, --top-k, --moe-ffn, "
                    "--shared-experts, --dense-layers, --capacity-factor)");
}

ModelConfig workload_model_config(WorkloadKind kind, const WorkloadModel& m) {
  ModelConfig config;
  if (kind == WorkloadKind::kMlp) {
    config.name = "builtin-mlp";
    config.architecture = Architecture::kMlp;
    config.layers = m.layers;
    config.hidden = m.hidden;
    return config;
  }
  config = gpt_model(m.layers, m.hidden, m.heads, m.vocab, m.seq);
  config.name = "builtin-gpt";
  config.ffn = m.ffn;
  config.moe = m.moe;
  return config;
}

}  // namespace partrain::memory
