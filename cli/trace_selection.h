// The --steps and --rank flags of the commands that read a trace (`export`, `analyze`): the
// same spelling and the same messages everywhere.
#pragma once

#include <string_view>
#include <vector>

#include "core/status.h"
#include "profiler/chrome_export.h"

namespace partrain::cli {

// "A:B", "A:", ":B" or "A": inclusive step numbers; kInvalidArgument otherwise.
StatusOr<profiler::StepRange> parse_step_range(std::string_view text);
// "0,2,5": world ranks; sorted, duplicates dropped; kInvalidArgument otherwise.
StatusOr<std::vector<int>> parse_rank_list(std::string_view text);

}  // namespace partrain::cli
