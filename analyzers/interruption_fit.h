// How long the interruptions of ranks that share cores are, from their waits for the last
// arrival (analyzers/arrival_wait.h). One stretch of work between syncs cannot tell a random walk
// from interruptions: every law fits one mean wait. Waits after stretches of different lengths
// can: a dp trace's gradient all-reduce after a step's work and its loss all-reduce after the
// optimizer's, a tp trace's all-reduces after half a block. Interruptions much longer than the
// stretches make the wait grow in proportion to the work; much shorter, with its square root.
#pragma once

#include <optional>
#include <vector>

#include "analyzers/arrival_wait.h"

namespace partrain::analyzers {

// One collective of ranks that share cores: its members' mean wait for the last arrival after
// `since_sync_s` seconds of equal work, and its kind (the collectives of one op, message size and
// group size: the waits the fit compares as one mean).
struct SharedCoreWait {
  int kind = 0;
  int ranks = 0;
  double since_sync_s = 0;
  double wait_s = 0;
};

// The jitter and interruption length (ArrivalDrift's first two fields, rate_spread 0) whose
// predicted waits add up to the measured ones and whose kinds' mean waits fit them best, in
// relative error: the interruptions' length from a scan over their rate, the random walk
// (interruption_s 0) unless interruptions of some length fit strictly better (one kind, or
// stretches all alike, keep the walk). nullopt when nobody waited.
std::optional<ArrivalDrift> fit_interruptions(const std::vector<SharedCoreWait>& waits);

}  // namespace partrain::analyzers
