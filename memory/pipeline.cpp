#include "memory/pipeline.h"

#include <algorithm>

namespace partrain::memory {

double in_flight_micro_batches(PipelineSchedule schedule, int pp, int vpp, int64_t micro_batches,
                               int stage) {
  const auto m = static_cast<double>(micro_batches);
  switch (schedule) {
    case PipelineSchedule::kGpipe:  // Huang 2019: all forwards before any backward
      return m;
    case PipelineSchedule::kOneFOneB:  // Narayanan 2021 sec. 2.2.1: warm-up p - stage - 1, +1
      return std::min(static_cast<double>(pp - stage), m);
    case PipelineSchedule::kInterleaved: {
      // Megatron-LM's interleaved warm-up; Korthikanti 2022 sec. 4.2.3 for the first stage.
      const double chunks = static_cast<double>((pp - stage - 1) * 2 + (vpp - 1) * pp + 1);
      return std::min(chunks, m * vpp) / vpp;
    }
    case PipelineSchedule::kZbH1:  // Qi 2023 sec. 3.1: 1F1B's first-stage peak on every stage
      return std::min(static_cast<double>(pp), m);
    case PipelineSchedule::kDualPipeV:  // DualPipe README: PP + 1 stages of 2p, two per rank
    case PipelineSchedule::kDualPipe:   // PP + 1 stages of p, two per rank (one per direction)
      return (2.0 * (schedule == PipelineSchedule::kDualPipeV ? pp : pp / 2.0) + 1) / 2;
  }
  return m;
}

// Narayanan 2021 sec. 2.2.1 and 2.2.2.
double bubble_fraction(int pp, int64_t micro_batches, int vpp) {
  return static_cast<double>(pp - 1) / (static_cast<double>(vpp) * static_cast<double>(micro_batches));
}

double bubble_fraction(PipelineSchedule schedule, int pp, int64_t micro_batches, int vpp) {
  switch (schedule) {
    case PipelineSchedule::kGpipe:
    case PipelineSchedule::kOneFOneB:
      return bubble_fraction(pp, micro_batches, 1);
    case PipelineSchedule::kInterleaved:
      return bubble_fraction(pp, micro_batches, vpp);
    case PipelineSchedule::kZbH1:
    case PipelineSchedule::kDualPipeV:
    case PipelineSchedule::kDualPipe:
      return split_bubble_fraction(schedule, pp, micro_batches, 1, 1, 1);
  }
  return bubble_fraction(pp, micro_batches, vpp);
}

double split_bubble_fraction(PipelineSchedule schedule, int pp, int64_t micro_batches, double F,
                             double B, double W) {
  const auto m = static_cast<double>(micro_batches);
  const double ideal = m * (F + B + W);  // one chunk's work per micro-batch
  if (ideal <= 0) return 0;
  switch (schedule) {
    case PipelineSchedule::kZbH1:  // Qi 2023 sec. 3.1
      return (pp - 1) * std::max(F + B - W, 0.0) / ideal;
    case PipelineSchedule::kDualPipeV:  // DualPipe README over PP = 2p stages, two per rank
      return (pp - 1) * std::max(F + 2 * B - W, 0.0) / (2 * ideal);
    case PipelineSchedule::kDualPipe:  // DualPipe README over PP = p stages
      return std::max(pp / 2.0 - 1, 0.0) * std::max(F + 2 * B - W, 0.0) / ideal;
    case PipelineSchedule::kGpipe:
    case PipelineSchedule::kOneFOneB:
    case PipelineSchedule::kInterleaved:
      return 0;
  }
  return 0;
}

int parameter_copies(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::kDualPipe ? 2 : 1;
}

}  // namespace partrain::memory
