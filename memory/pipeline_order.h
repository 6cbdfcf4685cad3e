// Where a pipeline's model chunks live and the order in which each pipeline rank runs its
// forwards, backwards and weight-gradient passes in one step, for every schedule: the one
// definition that the runner executes (runner/workload/pipeline_schedule.h) and the analyzers
// simulate (analyzers/pipeline_simulation.h). docs/pipeline.md draws them.
#pragma once

#include <vector>

#include "core/status.h"
#include "memory/training_layout.h"

namespace partrain::memory {

// F, B and W. Under the zero-bubble schedules (splits_backward) B computes the input gradient
// only and W the weight gradients it left (Qi 2023); elsewhere B is the whole backward and there
// is no W.
enum class PipelinePass { kForward, kBackward, kWeight };

struct PipelineCompute {
  PipelinePass pass = PipelinePass::kForward;
  int micro_batch = 0;
  int chunk = 0;
  bool operator==(const PipelineCompute&) const = default;
};

// The model's chunks of consecutive layers, in model order: pp x vpp (vpp = 1 but under
// interleaved), 2 pp under DualPipeV, pp under DualPipe (whose ranks each hold two of them).
int pipeline_chunks(PipelineSchedule schedule, int pp, int vpp);
// The rank that runs chunk c: c mod pp (Megatron's interleaving); DualPipeV's V: c for c < pp,
// 2 pp - 1 - c after (rank r holds stages r and 2 pp - 1 - r); DualPipe: c in its forward
// direction (rank pp - 1 - c runs it in the other).
int chunk_rank(PipelineSchedule schedule, int pp, int chunk);
// The chunks rank r holds, ascending: DualPipe's r and pp - 1 - r.
std::vector<int> rank_chunks(PipelineSchedule schedule, int pp, int vpp, int rank);

// Forwards a rank runs before its first backward: gpipe m; 1f1b and zb-h1 min(pp - r - 1, m);
// interleaved min((pp - r - 1) x 2 + (vpp - 1) x pp, m x vpp) (Megatron-LM schedules.py);
// dualpipev (pp - r - 1) x 2 + 2 (r + 1) (DeepSeek's dualpipev.py, steps 1 and 2).
int warmup_forwards(PipelineSchedule schedule, int pp, int vpp, int micro_batches, int rank);

// The passes of rank `rank` for one step, in order. Each (micro_batch, own chunk) runs F and B
// once, and W once under the zero-bubble schedules. kInvalidArgument for DualPipe (modelled by
// the estimator only: the runner runs its V-shaped half, dualpipev) and for shapes the schedule
// cannot run (pp < 1, m < 1; dualpipev m < 2 pp, pp < 2).
StatusOr<std::vector<PipelineCompute>> pipeline_compute_order(PipelineSchedule schedule, int pp,
                                                              int vpp, int micro_batches, int rank);

// Most micro-batch chunk activations a rank holds at once, counted on the order above: a
// forward's activations live until its backward, or its W under the zero-bubble schedules.
int peak_chunk_activations(PipelineSchedule schedule, int pp, int vpp, int micro_batches, int rank);

}  // namespace partrain::memory
