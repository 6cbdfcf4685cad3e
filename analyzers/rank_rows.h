// Which rows of a per-rank table `partrain analyze` prints as text. A table of a few dozen ranks
// is read row by row; one of 1,024 ranks is 1,024 lines nobody reads, and its few ranks that
// differ are what matters. Past kRanksPrintedInFull rows the text keeps the ranks the findings
// name, the ranks farthest from the median in any column, and the rank nearest the median (what
// the others look like), in rank order, and says how many it left out. `--rank` prints every rank
// it selects; `--json` always holds every rank.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <vector>

namespace partrain::analyzers {

inline constexpr size_t kRanksPrintedInFull = 32;
// The most ranks printed for standing out, besides the ones the findings name.
inline constexpr size_t kOutlierRanksPrinted = 8;
// A rank within this share of the median in every column is like the others.
inline constexpr double kNearMedianShare = 0.05;

struct RankRowOptions {
  bool every_rank = false;  // the user chose the ranks (--rank): print each one
  std::set<int> named;      // ranks the findings name: always printed
};

// Row i is rank `ranks[i]` with figures `values[i]` (one per column, any units, all rows the same
// columns). Returns the indexes of the rows to print, ascending, and sets `left_out` to the note
// that ends the table ("" when every row is printed).
std::vector<size_t> rank_rows_to_print(const std::vector<int>& ranks,
                                       const std::vector<std::vector<double>>& values,
                                       const RankRowOptions& options, std::string& left_out);

}  // namespace partrain::analyzers
