#include "analyzers/rank_rows.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace partrain::analyzers {
namespace {

double median_of(std::vector<double> column) {
  std::nth_element(column.begin(), column.begin() + column.size() / 2, column.end());
  return column[column.size() / 2];
}

// How far each row is from the median, the largest over the columns, as a share of the median.
// A column whose median is about zero (a memcpy nobody does, a lateness most ranks never have) is
// scaled by 1% of its largest figure, so one rank's 5 ms late stands out and rounding does not.
std::vector<double> distances_from_median(const std::vector<std::vector<double>>& values) {
  std::vector<double> distance(values.size(), 0.0);
  const size_t columns = values.front().size();
  for (size_t c = 0; c < columns; ++c) {
    std::vector<double> column;
    double largest = 0;
    for (const std::vector<double>& row : values) {
      column.push_back(row[c]);
      largest = std::max(largest, std::abs(row[c]));
    }
    const double median = median_of(column);
    const double scale = std::max(std::abs(median), 0.01 * largest);
    if (scale <= 0) continue;  // every row 0
    for (size_t i = 0; i < values.size(); ++i) {
      distance[i] = std::max(distance[i], std::abs(values[i][c] - median) / scale);
    }
  }
  return distance;
}

}  // namespace

std::vector<size_t> rank_rows_to_print(const std::vector<int>& ranks,
                                       const std::vector<std::vector<double>>& values,
                                       const RankRowOptions& options, std::string& left_out) {
  left_out.clear();
  std::vector<size_t> rows(ranks.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  if (options.every_rank || ranks.size() <= kRanksPrintedInFull) return rows;

  const std::vector<double> distance = distances_from_median(values);
  std::vector<size_t> by_distance = rows;
  std::stable_sort(by_distance.begin(), by_distance.end(),
                   [&](size_t a, size_t b) { return distance[a] > distance[b]; });
  std::set<size_t> printed;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (options.named.contains(ranks[i])) printed.insert(i);
  }
  size_t outliers = 0;
  for (size_t i : by_distance) {
    if (distance[i] <= kNearMedianShare || outliers == kOutlierRanksPrinted) break;
    if (printed.insert(i).second) ++outliers;
  }
  const size_t typical =
      static_cast<size_t>(std::min_element(distance.begin(), distance.end()) - distance.begin());
  printed.insert(typical);

  size_t far_left_out = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (!printed.contains(i) && distance[i] > kNearMedianShare) ++far_left_out;
  }
  const size_t count = ranks.size() - printed.size();
  left_out = fmt::format(
      "  ... {} of {} ranks not printed: {}; rank {} is the one nearest the median (`--rank` "
      "prints the ranks it selects, `--json` every rank)\n",
      count, ranks.size(),
      far_left_out == 0
          ? fmt::format("each within {:.0f}% of the median in every column", 100 * kNearMedianShare)
          : fmt::format("{} of them more than {:.0f}% from the median in a column", far_left_out,
                        100 * kNearMedianShare),
      ranks[typical]);
  return {printed.begin(), printed.end()};
}

}  // namespace partrain::analyzers
