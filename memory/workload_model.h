// The models of partrain's built-in workloads (`partrain launch --workload gpt|mlp`, DESIGN.md
// "Reference workloads") by their dimensions, and as the estimator sees them: the runner trains
// them, the analyzers size a traced run of them, both through this one description.
#pragma once

#include <optional>
#include <string_view>

#include "core/status.h"
#include "memory/model_config.h"

namespace partrain::memory {

enum class WorkloadKind { kGpt, kMlp };
std::optional<WorkloadKind> parse_workload_kind(std::string_view name);
std::string_view workload_kind_name(WorkloadKind kind);  // gpt, mlp

// A dimension the model does not have is 0: the lecture's MLP has square hidden x hidden layers,
// no heads and no vocabulary (its ffn is the hidden size).
struct WorkloadModel {
  int layers = 4;
  int hidden = 256;
  int heads = 8;
  int seq = 128;
  int vocab = 512;
  int ffn = 1024;
  MixtureOfExperts moe;  // the gpt's MLPs as a mixture of experts; experts 0: dense
};

// Every dimension the model has at least 1 (the vocabulary 2) and hidden divisible by heads, and
// the mixture-of-experts fields as validate_experts has them (the gpt only); kInvalidArgument
// naming the flag (`--hidden 60 is not divisible by --heads 8`).
Status check_workload_model(WorkloadKind kind, const WorkloadModel& model);

// "builtin-gpt" (learned positions, tied embeddings, GeLU MLP of width ffn) or "builtin-mlp".
ModelConfig workload_model_config(WorkloadKind kind, const WorkloadModel& model);

}  // namespace partrain::memory
