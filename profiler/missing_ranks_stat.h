// The import_missing_ranks stat: the ranks of the world an import had no trace file of. Written
// by an import, and worked out again by merge from the ranks its inputs hold together.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace partrain::profiler {

inline constexpr std::string_view kMissingRanksStat = "import_missing_ranks";

// "ranks 2,3 of the world of 4 had no trace file: ...".
std::string missing_ranks_description(const std::vector<int>& missing, int64_t world_size);

}  // namespace partrain::profiler
