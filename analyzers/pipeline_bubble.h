// The pipeline bubble of a pipeline-parallel run, per stage: measured from the forward/backward
// phase slices, against Narayanan 2021's formula and against a simulation of the schedule fed
// with the measured forward and backward times (DESIGN.md "Analyses"; definitions in
// docs/analysis-pipeline-memory.md).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "analyzers/analysis_window.h"
#include "analyzers/finding.h"
#include "core/status.h"
#include "memory/training_layout.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

// Means over the stage's ranks and the window's steps; times in ns.
struct StageBubble {
  int stage = 0;
  int samples = 0;           // (rank, step) pairs measured
  double step_ns = 0;        // steps.dur_ns
  double flush_ns = 0;       // the pipeline's span: first forward to last backward, all stages
  double busy_ns = 0;        // |union of this stage's forward and backward slices|
  double bubble_ns = 0;      // flush - busy
  double forward_ns = 0;     // mean forward action (one chunk, one micro-batch)
  double backward_ns = 0;    // mean backward action (the input gradient's, when split)
  double weight_ns = 0;      // mean weight action (zb-h1, dualpipev); 0 otherwise
  double bubble_of_flush = 0;  // mean of bubble / flush
  double bubble_of_ideal = 0;  // mean of bubble / busy
  double simulated_bubble_of_flush = 0;
  double simulated_bubble_of_ideal = 0;
};

struct PipelineBubbleReport {
  bool applicable = false;
  std::string reason;  // why not, when not applicable
  memory::PipelineSchedule schedule = memory::PipelineSchedule::kOneFOneB;
  int pp = 1, vpp = 1, micro_batches = 1;
  int64_t layers = 0;  // the model's, which bound the virtual stages (each holds one or more)
  // Narayanan 2021 sec. 2.2: bubble / ideal = (p-1)/m, (p-1)/(v m) interleaved; as a share of
  // the flush, x / (1 + x) = (p-1)/(m+p-1) for 1F1B. The zero-bubble schedules:
  // memory::split_bubble_fraction with the measured mean F, B and W.
  double theory_bubble_of_ideal = 0;
  double theory_bubble_of_flush = 0;
  // Median measured delay from an action's end to the dependent action's start on the adjacent
  // stage, when that dependency held the stage up (p2p transfer + wake-up); fed to the
  // simulation with gap_ns. Both 0 under interleaving (the slices do not name their chunk).
  double transfer_ns = 0;
  // Median measured time between two actions of one stage whose input was already there.
  double gap_ns = 0;
  double simulated_flush_ns = 0;  // the simulation's flush with the measured times
  std::vector<StageBubble> stages;
  double mean_bubble_of_flush() const;
  double mean_simulated_bubble_of_flush() const;
};

StatusOr<PipelineBubbleReport> analyze_pipeline_bubble(const profiler::TraceReader& reader,
                                                       const AnalysisWindow& window);
// "pipeline_bubble" when the bubble costs more than 5% of the step.
std::vector<Finding> pipeline_bubble_findings(const PipelineBubbleReport& report);
std::string format_pipeline_bubble(const PipelineBubbleReport& report);
nlohmann::json pipeline_bubble_json(const PipelineBubbleReport& report);

}  // namespace partrain::analyzers
