// One training step of a rank, as run_workload repeats it: the faults --inject places at its
// start, forward and backward over the step's micro-batches (through the pipeline executor under
// pp > 1), the gradients' reduction, the clipped AdamW update, and the step's loss over the
// global batch, reduced over the world.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "profiler/rank_tracer.h"
#include "runner/comm/comm.h"
#include "runner/comm/host_value_collectives.h"
#include "runner/device/device.h"
#include "runner/ops/adamw.h"
#include "runner/workload/batch_source.h"
#include "runner/workload/expert_load.h"
#include "runner/workload/training_rank.h"
#include "runner/workload/workload_config.h"

namespace partrain::runner {

class TrainingStep {
 public:
  // Every argument must outlive the object; `tracer` may be null (not traced).
  TrainingStep(const WorkloadConfig& config, Device& device, comm::Comm& world, TrainingRank& rank,
               const BatchSource& batches, comm::HostValueCollectives& world_values,
               profiler::RankTracer* tracer);

  // Runs step `step`; returns its mean loss over the global batch, the same on every rank.
  StatusOr<float> run(int step);

  // When the last step's last gradient was produced (monotonic ns): the end of its backward.
  int64_t backward_end_ns() const { return last_grad_ns_; }

  // A mixture of experts: the last step's routing in each MoE block this rank runs, in layer
  // order (global counts, the same on every rank of a block's data-parallel group); empty for a
  // dense model.
  const std::vector<ExpertLayerLoad>& expert_load() const { return expert_load_; }

 private:
  StatusOr<double> forward_backward(int step);
  Status update(int step);
  StatusOr<float> reduce_loss(int step, double loss);

  const WorkloadConfig& config_;
  Device& device_;
  comm::Comm& world_;
  TrainingRank& rank_;
  const BatchSource& batches_;
  comm::HostValueCollectives& world_values_;
  profiler::RankTracer* tracer_;
  ops::AdamWConfig adam_;
  MicroBatch batch_;  // allocated by the first step, refilled by the others
  int64_t last_grad_ns_ = 0;
  std::vector<ExpertLayerLoad> expert_load_;
};

}  // namespace partrain::runner
