// The --inject faults that act at the start of a training step, before its compute: slow makes
// this rank a straggler, crash, exit, hang and stop end or stop it (process_fault.h), oom caps
// its tracked memory so the step's first new buffer fails.
#pragma once

#include <cstdint>
#include <vector>

#include "profiler/rank_tracer.h"
#include "runner/device/tracked_allocator.h"
#include "runner/fault/fault_spec.h"

namespace partrain::runner::fault {

// Fires the faults of `faults` due on `rank` at `step`, in that order: slow (a sleep, traced as
// an injected_delay slice), crash, exit, hang (none of which returns), stop (returns once the
// process is continued), then oom (the cap on `allocator` at what is in use: "out of memory
// allocating ... of <category>").
void inject_step_start_faults(const std::vector<FaultSpec>& faults, int rank, int64_t step,
                              TrackedAllocator& allocator, profiler::RankTracer* tracer);

}  // namespace partrain::runner::fault
