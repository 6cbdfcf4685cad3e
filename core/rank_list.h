// Lists of world ranks as users type them (`--rank 0-3,6`, the dashboard's rank filter) and as
// partrain prints them ("0,2,5-7": the same spelling, so a printed list can be pasted back).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace partrain {

// The largest world partrain starts (a worker's WORLD_SIZE), reads from a rank list and imports:
// a file claiming more ranks (2e9) is damaged or edited, and is refused, not sized by.
inline constexpr int kMostRanks = 1 << 20;

// "0,2,5" or "0-3,6" (A-B: ranks A to B, inclusive): sorted, duplicates dropped. Anything else
// (spaces, empty items, A > B, more than a million ranks) is kInvalidArgument naming the
// spelling: "'<text>': write world ranks separated by commas, ...".
StatusOr<std::vector<int>> parse_rank_list(std::string_view text);

// Sorted, duplicates dropped, three or more consecutive ranks as A-B: {7, 0, 2, 5, 6} ->
// "0,2,5-7"; {0, 1} -> "0,1"; {} -> "".
std::string format_rank_list(std::vector<int> ranks);

// "rank 3", "ranks 0,2,5-7": a rank list as the subject of a sentence.
std::string ranks_phrase(const std::vector<int>& ranks);

// The ranks of a world of `world_size` that `held` lacks, as ranks_phrase writes them ("ranks
// 4-1999999999"), and how many. The work and the text follow the gaps between `held`'s ranks,
// never the world's size: a trace's header may claim any number of ranks.
struct AbsentRanks {
  int64_t count = 0;
  std::string phrase;  // "" when none
};
AbsentRanks absent_ranks(std::vector<int> held, int64_t world_size);

}  // namespace partrain
