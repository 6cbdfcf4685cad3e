// The model and parallel layout of a run as `partrain launch` stores them in runs.config for the
// built-in workloads ({"workload", "model", "layout", "precision", "recompute", ...}), read
// without the runner: the pipeline and memory analyses need p, m, the schedule and the model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "memory/memory_estimate.h"
#include "memory/training_layout.h"
#include "profiler/sqlite_db.h"

namespace partrain::analyzers {

struct WorkloadRunConfig {
  std::string workload;  // "gpt" or "mlp"
  int64_t layers = 0, hidden = 0, heads = 0, seq = 0, vocab = 0, ffn = 0;
  int world = 1;
  int dp = 1, tp = 1, pp = 1, vpp = 1, zero = 0;
  bool sp = false;
  memory::PipelineSchedule schedule = memory::PipelineSchedule::kOneFOneB;
  int micro_batch = 1;
  int global_batch = 1;
  int micro_batches = 1;  // per step and pipeline: global / (dp x micro)
  std::vector<int64_t> pp_split;
  std::string precision = "fp32";
  std::string recompute = "none";

  // Megatron order: tp innermost, then dp, then pp.
  int pp_stage(int rank) const { return rank / (tp * dp); }
  int pipeline_of(int rank) const { return rank % (tp * dp); }
};

// The memory estimator's input for the run: its model, layout and precision recipe, with no
// reserve (a trace measures tracked tensors, not the CUDA context or NCCL) and no DDP bucket
// copies (the workloads reduce gradients in place).
StatusOr<memory::EstimateInput> workload_estimate_input(const WorkloadRunConfig& config);

// nullopt when the run's config is not a built-in workload's (a foreign job under `partrain
// trace`); an error only when the runs view cannot be read.
StatusOr<std::optional<WorkloadRunConfig>> read_workload_run_config(const profiler::SqliteDb& db);
// The same from the JSON text (exposed for tests).
std::optional<WorkloadRunConfig> parse_workload_run_config(const std::string& json_text);

}  // namespace partrain::analyzers
