// A small event simulation of the pipeline schedules (GPipe, 1F1B, interleaved 1F1B, ZB-H1,
// DualPipeV; their orders are memory/pipeline_order.h's) fed with forward, backward and weight
// times per stage: what the step would take, and each stage's bubble, if
// the only waiting were the schedule's own data dependencies (no transfer time, no noise). The
// pipeline_bubble analysis compares the measured bubble against it.
#pragma once

#include <vector>

#include "core/status.h"
#include "memory/training_layout.h"

namespace partrain::analyzers {

// One compute action of a pipeline rank: the forward or backward of micro-batch `micro_batch`
// through model chunk `chunk` (memory::chunk_rank places it: c % pp, DualPipeV's V), or under the
// zero-bubble schedules the weight pass that its backward left (weight, not forward).
struct PipelineAction {
  bool forward = true;
  int micro_batch = 0;
  int chunk = 0;
  bool weight = false;
  bool operator==(const PipelineAction&) const = default;
};

// The order in which `stage` runs its actions (memory::pipeline_compute_order: Megatron-LM's
// GPipe, 1F1B and interleaved warm-ups, ZB-H1's deferred W, DeepSeek's DualPipeV steps); empty
// for a shape the schedule cannot run.
std::vector<PipelineAction> pipeline_stage_actions(memory::PipelineSchedule schedule, int pp,
                                                   int vpp, int micro_batches, int stage);

struct PipelineSimInput {
  memory::PipelineSchedule schedule = memory::PipelineSchedule::kOneFOneB;
  int pp = 1;
  int vpp = 1;  // > 1 only with kInterleaved
  int micro_batches = 1;
  // Per stage: the time of one action (one chunk's forward or backward of one micro-batch).
  std::vector<double> forward;
  std::vector<double> backward;  // the input gradient's, when the schedule splits the backward
  // Per stage, the weight pass of a split backward (zb-h1, dualpipev); empty: none or free.
  std::vector<double> weight;
  // Delay between an action's end and the start of the action on the next (previous) stage that
  // needs its output: the p2p transfer and the receiver waking up. 0: dependencies only.
  double transfer = 0;
  // Time a stage spends between two of its own actions even when the next one's input is
  // there (posting sends, bookkeeping). 0: back to back.
  double gap = 0;
};

struct SimulatedAction {
  int stage = 0;
  PipelineAction action;
  double start = 0;
  double end = 0;
};

struct PipelineSimulation {
  double step_time = 0;           // first action start (0) to last action end
  std::vector<double> busy;       // per stage: sum of its action times
  std::vector<double> bubble;     // per stage: step_time - busy
  std::vector<SimulatedAction> actions;  // in the order they were scheduled
  // bubble / step_time, and bubble / busy (the "of ideal time" ratio of Narayanan 2021).
  double bubble_of_step(int stage) const;
  double bubble_of_ideal(int stage) const;
};

// kInvalidArgument when the shape is impossible (pp < 1, interleaved with m not a multiple of pp,
// dualpipev with m < 2 pp, dualpipe (the estimator's only), times missing or negative); failed
// when the lists deadlock.
StatusOr<PipelineSimulation> simulate_pipeline(const PipelineSimInput& input);

}  // namespace partrain::analyzers
