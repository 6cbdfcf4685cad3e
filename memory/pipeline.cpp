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
  }
  return m;
}

// Narayanan 2021 sec. 2.2.1 and 2.2.2.
double bubble_fraction(int pp, int64_t micro_batches, int vpp) {
  return static_cast<double>(pp - 1) / (static_cast<double>(vpp) * static_cast<double>(micro_batches));
}

}  // namespace partrain::memory
