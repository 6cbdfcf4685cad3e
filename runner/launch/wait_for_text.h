// The wait-for relation in words, for the launcher's diagnosis: one line per rank that waits on
// another, and the root with its evidence (what it is, what it never entered, who waits on it).
#pragma once

#include <string>
#include <vector>

#include "runner/launch/wait_for_graph.h"

namespace partrain::launch {

// "rank 3 waits on rank 1 in all_reduce of 237.25 KiB float on world/split1/color1 seq 1 (rank 1
// never entered it)", one per (waiter, awaited) pair, by waiter.
std::vector<std::string> describe_waits(const WaitForGraph& graph);

// What `rank` itself waits on, "" when nothing: "rank 1 waits itself, on rank 0 in all_reduce of
// 16.00 KiB float on world/split0/color0 seq 26".
std::string describe_own_wait(const WaitForGraph& graph, int rank);

// The root's kind and where it shows first, as the culprit line's parenthesis says it:
// "missing_ranks at world/split1/color0 seq 5", "stopped at send 0->1 on world/split2 seq 4",
// "ended" (nobody was seen waiting on it).
std::string root_kind_and_where(const WaitForGraph& graph, const WaitRoot& root);

// The evidence: "its process was stopped (state T: SIGSTOP or SIGTSTP) when the run failed; it
// never entered all_reduce of 4.00 KiB float on world/split1/color0 seq 5, where ranks 0, 1, 3
// wait; rank 2 waits on it through others".
std::string describe_root(const WaitForGraph& graph, const WaitRoot& root);

}  // namespace partrain::launch
