// A trace's collectives matched across ranks by (comm_id, seq), with each member's host start
// and end: what calibration reads from them. A collective's transfer runs from its last
// member's arrival to its members' end; the wait before the last arrival is the
// schedule's, and among ranks that did equal work since they last synchronised, their drift
// (analyzers/arrival_wait.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzers/analysis_window.h"
#include "analyzers/collective_cost.h"
#include "analyzers/workload_run_config.h"
#include "core/status.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

// One completed (comm_id, seq) whose members agree on the size: each recorded member's host
// start and end.
struct MatchedGroup {
  struct Member {
    int rank = 0;
    int64_t start_ns = 0, end_ns = 0;
  };
  std::string op;
  int group_size = 0;
  double bytes = 0;
  bool in_window = true;        // every member's record lies within its rank's window
  std::vector<Member> members;  // by rank
  std::vector<int> ranks() const;
  // From the last member's arrival to the members' mean end: what the collective costs each
  // member once all are in (the link, and any member held up while it runs or returns late,
  // which recurs on the members' path). The waiting before the last arrival is the schedule's
  // (a pipeline stage's for its neighbour, the drift of equal-work ranks: see arrival_samples).
  // With one member recorded, or clocks of several hosts that put the end before the last
  // start, the shortest member's duration.
  double transfer_s() const;
};

// Every completed, size-agreeing collective of the trace (those outside the window too: a
// collective's previous synchronisation may lie before it), by communicator and seq.
StatusOr<std::vector<MatchedGroup>> matched_groups(const profiler::TraceReader& reader,
                                                   const AnalysisWindow& window);

// One collective of ranks that did equal work since they last synchronised (the tensor- and
// data-parallel groups within a pipeline stage of a built-in run): how long its members waited
// on average for the last arrival, and the seconds since their last common collective (the
// members' mean).
struct ArrivalSample {
  CostedOp op = CostedOp::kAllReduce;
  double bytes = 0;
  int ranks = 0;
  double wait_s = 0;
  double since_sync_s = 0;
  // The ranks ran on devices of their own (cores they were bound to, GPUs): they drift by their
  // rates, in proportion to the work; else by a random walk (analyzers/arrival_wait.h).
  bool own_devices = false;
};

// The arrivals of a built-in run's collectives among ranks of one pipeline stage (tensor- and
// data-parallel groups, the world of a run without pipeline stages), whose members did the same
// work since they last synchronised: the members' mean wait for the last arrival, and the time
// since the latest collective each member ran with all of them (a superset of the group), on
// average over the members. Collectives across stages (p2p, the tied embeddings' all-reduce) wait
// for the schedule, which the bubble models.
std::vector<ArrivalSample> arrival_samples(const std::vector<MatchedGroup>& groups,
                                           const WorkloadRunConfig& run);

}  // namespace partrain::analyzers
