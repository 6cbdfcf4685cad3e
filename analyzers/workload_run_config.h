// The model and parallel layout of a run as `partrain launch` stores them in runs.config for the
// built-in workloads ({"workload", "model", "layout", "precision", "recompute", ...}), read
// without the runner: the pipeline and memory analyses need p, m, the schedule and the model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"
#include "memory/memory_estimate.h"
#include "memory/mesh_order.h"
#include "memory/training_layout.h"
#include "memory/workload_model.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

struct WorkloadRunConfig {
  memory::WorkloadKind kind = memory::WorkloadKind::kGpt;
  memory::WorkloadModel model;
  memory::ResolvedLayout resolved;
  std::string precision = "fp32";
  // launch --cpu-bind: "core" when each rank ran on cores of its own (older traces: "none").
  std::string cpu_bind = "none";

  // By the rank order of memory/mesh_order.h (Megatron's: tp innermost, then dp, then pp): a
  // rank's pipeline stage, and which pipeline it is in (0 to dp x tp - 1).
  int pp_stage(int rank) const { return memory::mesh_coords(rank, resolved.layout).pp; }
  int pipeline_of(int rank) const {
    return memory::mesh_group(rank, memory::MeshAxis::kPp, resolved.layout);
  }
};

// The memory estimator's input for the run: its model, layout and precision recipe, with no
// reserve (a trace measures tracked tensors, not the CUDA context or NCCL) and no DDP bucket
// copies (the workloads reduce gradients in place).
StatusOr<memory::EstimateInput> workload_estimate_input(const WorkloadRunConfig& config);

// nullopt when the run's config is not a built-in workload's (a foreign job under `partrain
// trace`); an error only when the runs view cannot be read.
StatusOr<std::optional<WorkloadRunConfig>> read_workload_run_config(
    const profiler::TraceReader& reader);
// The same from the JSON text (exposed for tests), read by memory's config codec leniently (an
// older trace's config lacks fields) and resolved by memory's rules: nullopt when it is not a
// built-in workload's config or does not resolve.
std::optional<WorkloadRunConfig> parse_workload_run_config(const std::string& json_text);

}  // namespace partrain::analyzers
