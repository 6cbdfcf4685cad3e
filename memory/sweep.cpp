#include "memory/sweep.h"

#include "memory/flops.h"
#include "memory/memory_report.h"

namespace partrain::memory {

StatusOr<SweepReport> sweep_memory(const EstimateInput& base, const std::vector<int>& dp_sizes) {
  ASSIGN_OR_RETURN(MemoryEstimate reference, estimate_memory(base));
  SweepReport report;
  report.params = reference.total_params;
  report.seq = reference.layout.seq;
  report.default_reserve = !base.reserve_bytes;
  report.pp = base.layout.pp;
  report.micro_batches = reference.layout.micro_batches;
  report.pipeline_advice = pipeline_bubble_advice(base, reference);
  const auto seq = static_cast<double>(reference.layout.seq);
  const auto batch = static_cast<double>(reference.layout.global_batch);
  report.flops_per_token = training_flops_per_token(base.model, seq, Recompute::kNone);
  report.flops_per_token_recompute = training_flops_per_token(base.model, seq, Recompute::kFull);
  report.flops_per_iteration = training_flops(base.model, batch, seq, Recompute::kNone);
  report.flops_per_iteration_recompute = training_flops(base.model, batch, seq, Recompute::kFull);
  report.global_batch = base.layout.global_batch;
  for (int dp : dp_sizes) {
    const int64_t per_step = static_cast<int64_t>(dp) * base.layout.micro_batch;
    if (report.global_batch && *report.global_batch % per_step != 0) {
      report.dp_left_out.push_back(dp);
      continue;
    }
    for (int zero = 0; zero <= 3; ++zero) {
      for (Recompute recompute : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
        if (recompute == Recompute::kSelective && base.model.architecture == Architecture::kMlp) {
          continue;
        }
        EstimateInput input = base;
        input.layout.dp = dp;
        input.layout.zero = zero;
        input.layout.recompute = recompute;
        input.layout.global_batch =
            report.global_batch.value_or(per_step * reference.layout.micro_batches);
        StatusOr<MemoryEstimate> estimate = estimate_memory(input);
        if (!estimate.is_ok()) continue;
        report.rows.push_back({dp, zero, recompute, estimate->heaviest_stage(), estimate->fits()});
      }
    }
  }
  return report;
}

}  // namespace partrain::memory
