// Time intervals [start, end) merged into their union: waits that overlap count once (stragglers),
// spans nested in one another are one (the importer's collective ops).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace partrain {

// Sorts `intervals` and merges, in place, those that overlap or touch: no two left overlap.
inline void merge_intervals(std::vector<std::pair<int64_t, int64_t>>& intervals) {
  std::sort(intervals.begin(), intervals.end());
  size_t merged = 0;
  for (const auto& interval : intervals) {
    if (merged > 0 && interval.first <= intervals[merged - 1].second) {
      intervals[merged - 1].second = std::max(intervals[merged - 1].second, interval.second);
    } else {
      intervals[merged++] = interval;
    }
  }
  intervals.resize(merged);
}

}  // namespace partrain
