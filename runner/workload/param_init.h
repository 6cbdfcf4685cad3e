// Deterministic parameter initialisation in global coordinates: element i of parameter p gets
// the same value whichever rank holds it and however the model is sharded, so every parallel
// layout starts from the single-rank model (the equivalence tests depend on it).
#pragma once

#include <cstdint>

namespace partrain::runner {

// A standard normal value for (seed, parameter id, global element index): counter-based
// (splitmix64 into Box-Muller), no state to carry between ranks.
float init_normal(uint64_t seed, uint64_t param_id, uint64_t index);

}  // namespace partrain::runner
