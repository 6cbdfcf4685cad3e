// The names of one run's per-node trace files: node 0 writes the trace itself, node N writes
// `<stem>.node<N><extension>` beside it (run.db -> run.node1.db), so the files of a run sort
// together (docs/decisions.md "Trace files of several nodes"). The launcher names the files it
// writes by it; merge and analyze name the files a reader is missing by it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace partrain::profiler {

std::filesystem::path node_trace_path(const std::filesystem::path& trace, int node_rank);

// Node 0's file from node `node_rank`'s: run.node2.db -> run.db. A name that does not end in
// `.node<node_rank>` (renamed by hand) is taken as node 0's name itself.
std::filesystem::path node0_trace_path(const std::filesystem::path& node_file, int node_rank);

// A message names at most this many of a run's other node files and counts the rest.
inline constexpr int kNamedNodeFiles = 8;

// The node files of a run of `nodes` nodes but node `node`'s, for a message: "run.db,
// run.node2.db", or the first kNamedNodeFiles and "... and N more". The work follows what is
// named, never `nodes`: a trace's header may claim 2e9 ranks.
std::string other_node_files_text(const std::filesystem::path& node0, int64_t nodes, int64_t node);

// What a `partrain merge` of every node file takes: each name when few ("run.db run.node1.db"),
// else node 0's and a shell pattern of the others ("run.db run.node*.db").
std::string node_files_merge_arguments(const std::filesystem::path& node0, int64_t nodes);

// Whether every node file of the run but node `node`'s is beside node 0's; stops at the first
// one absent.
bool other_node_files_present(const std::filesystem::path& node0, int64_t nodes, int64_t node);

}  // namespace partrain::profiler
