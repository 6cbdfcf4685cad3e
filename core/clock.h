// Clocks: the host's monotonic clock in nanoseconds, the base of every stored timestamp.
#pragma once

#include <cstdint>

namespace partrain {

// CLOCK_MONOTONIC in ns: immune to wall-clock steps; shifted per host onto the run-wide timeline.
int64_t monotonic_ns();
// CLOCK_REALTIME in ns, for human-readable start times only.
int64_t wall_ns();

}  // namespace partrain
