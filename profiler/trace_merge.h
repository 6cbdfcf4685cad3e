// Joining the per-node trace files of one run into one trace (`partrain merge`, and the launcher
// once all nodes are done): strings re-interned, track and slice ids shifted, rank, memory, step
// and stat rows copied, one run row by the rules of docs/trace-format.md "Merging node files".
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "core/status.h"
#include "profiler/trace_event.h"

namespace partrain::profiler {

struct TraceMergeOptions {
  bool overwrite = false;  // replace an existing output (else it is refused, kInvalidArgument)
};

struct TraceMergeSummary {
  std::string run_id;
  int files = 0;
  int64_t ranks = 0;
  int64_t slices = 0;
  int64_t collectives = 0;
  int64_t lost_strings = 0;  // strings the inputs' rows named but their string tables had lost
  RunStatus status = RunStatus::kRunning;
};

// Merges `inputs` (one or more trace files of the same run, each opened with open_trace) into a
// new trace at `output`, written beside it under a temporary name and renamed when complete.
// Errors: kUnreadable (exit 3) for an input open_trace refuses; kInvalidArgument (exit 2) for
// files of different runs, a file given twice, a rank found in two inputs, an output that exists
// (without overwrite) or is an input; kFailed when SQLite cannot write the output. An input
// whose string table lost rows is merged with "(lost string N)" in their place, with a warning
// and the stat `merge_lost_strings`. One input is copied, with a warning (naming the other
// nodes' files when it is one node's of several). Inputs are
// only read (open_trace may still mark a run whose writer died as incomplete). The launcher's
// node files are node_trace_path(trace, node) (profiler/node_trace_name.h) for node 0..N-1.
StatusOr<TraceMergeSummary> merge_traces(std::span<const std::filesystem::path> inputs,
                                         const std::filesystem::path& output,
                                         const TraceMergeOptions& options = {});

}  // namespace partrain::profiler
