// What a training step's routing did in one mixture-of-experts layer: the tokens routed to each
// expert and the tokens dropped over the capacity, counted over the whole global batch (the
// counts of every data-parallel rank, all-reduced), and the load-balancing auxiliary loss. A
// plain record for the profiler and the summary to take from the training step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace partrain::runner {

struct ExpertLayerLoad {
  int layer = 0;                           // the block's global index
  std::vector<int64_t> tokens_per_expert;  // token choices routed to each expert, drops included
  int64_t dropped_tokens = 0;              // token choices over an expert's capacity (0: dropless)
  double aux_loss = 0;  // E x sum_i f_i P_i, the mean over the step's micro-batches (1: balanced)
};

// Adds `part` (the same layer's load over another micro-batch or step) into `total`, which holds
// `parts_before` of them: counts summed, the aux loss averaged.
void accumulate_load(ExpertLayerLoad& total, const ExpertLayerLoad& part, int parts_before);

}  // namespace partrain::runner
