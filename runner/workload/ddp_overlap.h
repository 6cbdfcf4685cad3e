// DDP's overlap of communication with backward, as the flight recorder saw it: per step, the
// dp group's bucket all-reduces and how many of them started before the step's backward ended
// (RunSummary's ddp_bucket_all_reduces and ddp_buckets_started_in_backward).
#pragma once

#include <cstdint>

#include "runner/comm/comm.h"
#include "profiler/flight/flight_recorder.h"
#include "runner/workload/run_summary.h"

namespace partrain::runner {

class DdpOverlap {
 public:
  // `recorder` (null: nothing is counted) records the collectives of every group; `dp` is the
  // rank's data-parallel group. Entries recorded before this call are not counted.
  DdpOverlap(const profiler::FlightRecorder* recorder, const comm::Comm& dp);

  // Counts the entries recorded since the last call into `summary`: the step began at
  // `step_start_ns` and its backward ended at `backward_end_ns` (monotonic ns). Called once each
  // step is timed, since the recorder's ring keeps only its last 2000 entries.
  void count_step(int64_t step_start_ns, int64_t backward_end_ns, RunSummary& summary);

 private:
  const profiler::FlightRecorder* recorder_;
  const comm::Comm& dp_;
  uint64_t recorded_before_;
};

}  // namespace partrain::runner
