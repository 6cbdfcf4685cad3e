// Binding a rank of a CPU workload to cores of its own (`launch --cpu-bind core`, as Open MPI's
// --bind-to core). With as many ranks as cores and no binding, the scheduler can leave a rank's
// runnable collective thread on the runqueue of a core another rank's main thread has just taken
// while the other core idles, until its next balance (docs/collectives.md: tp 2 of the built-in
// GPT on 2 cores, median step 320 ms unbound, 266 ms bound).
#pragma once

#include <vector>

#include "core/status.h"

namespace partrain::runner {

// The CPUs the calling thread may run on (sched_getaffinity; a process's threads share them
// unless one was bound apart), in increasing order.
std::vector<int> allowed_cpus();

// The `per_rank` CPUs of local rank `local_rank` of a node's `local_ranks`, consecutive in
// `allowed`; kInvalidArgument naming the counts when they do not fit.
StatusOr<std::vector<int>> rank_cpus(const std::vector<int>& allowed, int local_rank,
                                     int local_ranks, int per_rank);

// Binds every thread of this process to `cpus`; the threads it starts later inherit it.
Status bind_process(const std::vector<int>& cpus);

}  // namespace partrain::runner
