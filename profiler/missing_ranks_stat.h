// The import_missing_ranks stat: the ranks of the world an import had no trace file of. Written
// by an import, and worked out again by merge from the ranks its inputs hold together.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace partrain::profiler {

inline constexpr std::string_view kMissingRanksStat = "import_missing_ranks";

// "ranks 2,3 of the world of 4 had no trace file: ..." of `missing_ranks` as ranks_phrase or
// absent_ranks writes them ("ranks 2,3").
std::string missing_ranks_description(std::string_view missing_ranks, int64_t world_size);

}  // namespace partrain::profiler
