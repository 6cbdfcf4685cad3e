// `partrain memory --sweep`: a model's parameter count and FLOPs, and the per-GPU memory of
// its heaviest stage over data-parallel sizes x ZeRO stages x recompute modes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "memory/memory_estimate.h"

namespace partrain::memory {

struct SweepRow {
  int dp = 1;
  int zero = 0;
  Recompute recompute = Recompute::kNone;
  StageMemory heaviest;
  bool fits = true;
};

struct SweepReport {
  double params = 0;
  int64_t seq = 0;                       // the tokens per sample the estimates use
  double flops_per_token = 0;            // no recompute
  double flops_per_token_recompute = 0;  // full recompute
  double flops_per_iteration = 0;        // the base layout's global batch
  double flops_per_iteration_recompute = 0;
  std::vector<SweepRow> rows;            // layouts that do not resolve are left out
  bool default_reserve = true;           // no --reserve: CUDA context, NCCL and fragmentation
  int pp = 1;
  int64_t micro_batches = 1;                   // per step and pipeline, kept in every row
  // --global-batch given: every row keeps it, and the dp sizes it does not divide into whole
  // micro-batches are left out (as `memory --dp` refuses them).
  std::optional<int64_t> global_batch;
  std::vector<int> dp_left_out;
  std::optional<std::string> pipeline_advice;  // fewer micro-batches than stages (the warning)
};

// Keeps the base layout's global batch when one was given (dp sizes it does not divide are left
// out), else its micro-batch count per step (global batch = dp x micro x m) as dp grows.
// A model without attention (the deep MLP) has no selective recompute: those rows, the same as
// no recompute's, are left out.
StatusOr<SweepReport> sweep_memory(const EstimateInput& base, const std::vector<int>& dp_sizes);

}  // namespace partrain::memory
