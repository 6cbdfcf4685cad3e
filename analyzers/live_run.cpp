#include "analyzers/live_run.h"

#include <algorithm>

namespace partrain::analyzers {

int64_t total_bytes(const CategoryBytes& bytes) {
  int64_t total = 0;
  for (int64_t b : bytes) total += b;
  return total;
}

int64_t RankStatus::memory_total() const { return total_bytes(memory_bytes); }

std::optional<int> LiveAnalysis::straggler() const {
  return report ? report->stragglers.straggler : std::nullopt;
}

const std::vector<Finding>& LiveAnalysis::findings() const {
  static const std::vector<Finding> kNone;
  return report ? report->findings : kNone;
}

bool compute_recorded(const LiveRun& run) {
  return std::any_of(run.ranks.begin(), run.ranks.end(), [](const RankStatus& row) {
    return row.breakdown && row.breakdown->compute_ns > 0;
  });
}

RankStatus& rank_row(LiveRun& run, int rank) {
  auto it = std::lower_bound(run.ranks.begin(), run.ranks.end(), rank,
                             [](const RankStatus& r, int value) { return r.rank < value; });
  if (it == run.ranks.end() || it->rank != rank) {
    it = run.ranks.insert(it, RankStatus{});
    it->rank = rank;
  }
  return *it;
}

void add_memory_sample(LiveRun& run, int rank, int64_t ts_ns, size_t category, int64_t bytes) {
  RankStatus& row = rank_row(run, rank);
  row.memory_bytes[category] = bytes;
  MemoryChart& chart = run.memory[rank];
  chart.peak[category] = std::max(chart.peak[category], bytes);
  chart.peak_total = std::max(chart.peak_total, row.memory_total());
  if (!chart.points.empty() && ts_ns - chart.points.back().ts_ns < 1000) {
    chart.points.back().bytes = row.memory_bytes;
  } else {
    chart.points.push_back({ts_ns, row.memory_bytes});
  }
  if (chart.points.size() <= LiveRun::kMaxMemoryPoints) return;
  std::deque<MemoryPoint> thinned;
  for (size_t i = 0; i + 1 < chart.points.size(); i += 2) {
    const MemoryPoint& a = chart.points[i];
    const MemoryPoint& b = chart.points[i + 1];
    thinned.push_back(total_bytes(a.bytes) >= total_bytes(b.bytes) ? a : b);
  }
  chart.points.swap(thinned);
}

}  // namespace partrain::analyzers
