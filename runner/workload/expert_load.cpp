#include "runner/workload/expert_load.h"

namespace partrain::runner {

void accumulate_load(ExpertLayerLoad& total, const ExpertLayerLoad& part, int parts_before) {
  total.layer = part.layer;
  total.tokens_per_expert.resize(part.tokens_per_expert.size(), 0);
  for (size_t e = 0; e < part.tokens_per_expert.size(); ++e) {
    total.tokens_per_expert[e] += part.tokens_per_expert[e];
  }
  total.dropped_tokens += part.dropped_tokens;
  total.aux_loss = (total.aux_loss * parts_before + part.aux_loss) / (parts_before + 1);
}

}  // namespace partrain::runner
