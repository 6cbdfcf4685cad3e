// Where a run's trace file goes, decided in one place for `partrain launch` (its launcher, and
// with --tui the dashboard that follows the file) and `partrain trace`: the file named with
// --trace, else ./partrain-runs/<run-id>.db (<run-id>.2.db, .3, ... when a --run-id given again
// finds it there, as the log directory does). Node N of a launch writes <stem>.node<N><ext>
// beside node 0's name (docs/decisions.md "Trace files of several nodes"). A --trace file already
// there is refused, never overwritten: it holds an earlier run.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace partrain::launch {

// Where runs are traced by default, and where `analyze`, `top` and `export` look for the latest.
inline constexpr std::string_view kRunsDirectory = "partrain-runs";

struct TracePathRequest {
  std::optional<std::string> file;  // --trace FILE (node 0's name); unset: the default
  std::string run_id;               // names the default file
  int node_rank = 0;
  // Default names found taken by another run of the run id since they were decided: skipped.
  std::vector<std::filesystem::path> taken = {};
};

// The node's trace file. kInvalidArgument (exit 2) when the file exists (naming it, and how to
// choose another), when --trace names nothing, or when the run id cannot name a file.
StatusOr<std::filesystem::path> decide_trace_path(const TracePathRequest& request);

// --trace's value, checked before anything runs: kInvalidArgument when it names nothing (SQLite
// would trace into a temporary database and keep nothing). `flag`: the spelling to name.
Status check_trace_file(const std::optional<std::string>& file, std::string_view flag);

}  // namespace partrain::launch
