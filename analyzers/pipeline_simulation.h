// A small event simulation of the pipeline schedules (GPipe, 1F1B, interleaved 1F1B) fed with
// forward and backward times per stage: what the step would take, and each stage's bubble, if
// the only waiting were the schedule's own data dependencies (no transfer time, no noise). The
// pipeline_bubble analysis compares the measured bubble against it.
#pragma once

#include <vector>

#include "core/status.h"
#include "memory/training_layout.h"

namespace partrain::analyzers {

// One compute action of a pipeline rank: the forward or backward of micro-batch `micro_batch`
// through model chunk `chunk` (chunk c lives on rank c % pp; without interleaving chunk = rank).
struct PipelineAction {
  bool forward = true;
  int micro_batch = 0;
  int chunk = 0;
  bool operator==(const PipelineAction&) const = default;
};

// The order in which `stage` runs its actions (Megatron-LM's schedules: GPipe all forwards then
// all backwards; 1F1B with min(p - s - 1, m) warm-up forwards; interleaved with
// min(2 (p - s - 1) + (v - 1) p, m v) warm-up forwards).
std::vector<PipelineAction> pipeline_stage_actions(memory::PipelineSchedule schedule, int pp,
                                                   int vpp, int micro_batches, int stage);

struct PipelineSimInput {
  memory::PipelineSchedule schedule = memory::PipelineSchedule::kOneFOneB;
  int pp = 1;
  int vpp = 1;  // > 1 only with kInterleaved
  int micro_batches = 1;
  // Per stage: the time of one action (one chunk's forward or backward of one micro-batch).
  std::vector<double> forward;
  std::vector<double> backward;
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
// times missing or negative).
StatusOr<PipelineSimulation> simulate_pipeline(const PipelineSimInput& input);

}  // namespace partrain::analyzers
