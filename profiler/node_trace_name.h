// The names of one run's per-node trace files: node 0 writes the trace itself, node N writes
// `<stem>.node<N><extension>` beside it (run.db -> run.node1.db), so the files of a run sort
// together (docs/decisions.md "Trace files of several nodes"). The launcher names the files it
// writes by it; merge and analyze name the files a reader is missing by it.
#pragma once

#include <filesystem>

namespace partrain::profiler {

std::filesystem::path node_trace_path(const std::filesystem::path& trace, int node_rank);

// Node 0's file from node `node_rank`'s: run.node2.db -> run.db. A name that does not end in
// `.node<node_rank>` (renamed by hand) is taken as node 0's name itself.
std::filesystem::path node0_trace_path(const std::filesystem::path& node_file, int node_rank);

}  // namespace partrain::profiler
