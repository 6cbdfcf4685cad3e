// What the commands that read a trace (`export`, `analyze`, `top`) share: which trace when none
// is named, and the --steps and --rank flags, with the same spelling and messages everywhere.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "profiler/chrome_export.h"

namespace partrain::cli {

// The most recently modified *.db in ./partrain-runs (where `partrain launch` writes). Without
// one, kInvalidArgument suggesting `example`, a command that names a trace or records a run.
StatusOr<std::filesystem::path> most_recent_trace(std::string_view example);

// "A:B", "A:", ":B" or "A": inclusive step numbers; kInvalidArgument otherwise.
StatusOr<profiler::StepRange> parse_step_range(std::string_view text);
// "0,2,5" or "0-3,6" (A-B: ranks A to B, inclusive): world ranks; sorted, duplicates dropped;
// kInvalidArgument otherwise.
StatusOr<std::vector<int>> parse_rank_list(std::string_view text);

}  // namespace partrain::cli
