// One node's trace file of a multi-node run, read alone: its run's world has ranks the file holds
// nothing of, because they are in the other nodes' files. What analyze and top say then: which
// node's file it is, which files are missing and the `partrain merge` that joins them, in place
// of findings that take the other nodes' ranks for crashed ones (missing_collective).
#pragma once

#include <filesystem>
#include <optional>
#include <vector>

#include "analyzers/finding.h"
#include "core/status.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

struct NodeFile {
  std::filesystem::path path;  // as SQLite opened it
  int node = 0;
  int nodes = 0;
  int world_size = 0;
  std::vector<int> ranks;  // the world ranks the file holds
  // Every other node's file, as the launcher names them, is there: false for a `partrain trace`
  // per host or per rank, each writing its own -o, or a file copied alone.
  bool others_beside = true;
  std::string run_id;
};

// nullopt unless the trace is one node's file of several (not a merge of them).
StatusOr<std::optional<NodeFile>> find_node_file(const profiler::TraceReader& reader);

// "node_file": the file, the files missing and the merge command.
Finding node_file_finding(const NodeFile& file);

// For analyze and top: when the trace is one node's file, drops the findings about ranks it does
// not hold (they are in the other files, not missing) and adds the node_file finding. An imported
// trace's ranks without a file lose those findings too (import_missing_ranks names them).
Status add_node_file_finding(const profiler::TraceReader& reader,
                             std::vector<Finding>& findings);

}  // namespace partrain::analyzers
