// Pipeline parallelism for the estimator: how many micro-batches' activations a pipeline rank
// holds at its peak under GPipe, 1F1B and interleaved 1F1B, and the bubble fraction
// (Narayanan 2021 sec. 2.2; Korthikanti 2022 sec. 4.2.3).
#pragma once

#include "memory/training_layout.h"

namespace partrain::memory {

// Micro-batches' worth of this rank's layers held at once: GPipe m; 1F1B min(p - stage, m)
// (the first stage holds p); interleaved as Megatron-LM's warm-up, (p - stage - 1) 2 + (v - 1) p + 1
// chunks of L/(pv) layers, capped at m v: the first stage holds p (1 + (p - 1)/(p v)).
double in_flight_micro_batches(PipelineSchedule schedule, int pp, int vpp, int64_t micro_batches,
                               int stage);

// Narayanan 2021 sec. 2.2: the bubble is (p - 1)/m of the ideal time, (p - 1)/(v m) interleaved.
double bubble_fraction(int pp, int64_t micro_batches, int vpp = 1);

}  // namespace partrain::memory
