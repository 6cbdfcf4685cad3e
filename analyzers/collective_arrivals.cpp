#include "analyzers/collective_arrivals.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "analyzers/collective_groups.h"

namespace partrain::analyzers {

std::vector<int> MatchedGroup::ranks() const {
  std::vector<int> out;
  for (const Member& m : members) out.push_back(m.rank);
  return out;
}

double MatchedGroup::transfer_s() const {
  int64_t last_start = members.front().start_ns, shortest = members.front().end_ns - last_start;
  double end_sum = 0;
  for (const Member& m : members) {
    last_start = std::max(last_start, m.start_ns);
    shortest = std::min(shortest, m.end_ns - m.start_ns);
    end_sum += static_cast<double>(m.end_ns);
  }
  const double transfer =
      end_sum / static_cast<double>(members.size()) - static_cast<double>(last_start);
  return (members.size() > 1 && transfer > 0 ? transfer : static_cast<double>(shortest)) * 1e-9;
}

StatusOr<std::vector<MatchedGroup>> matched_groups(const profiler::TraceReader& reader,
                                                   const AnalysisWindow& window) {
  std::vector<MatchedGroup> groups;
  GroupVisitor visitor;
  visitor.on_group = [&](const CollectiveGroup& collective) {
    const CollectiveRow& first = collective.rows.front();
    MatchedGroup group{
        std::string(first.op), first.group_size, static_cast<double>(first.bytes), true, {}};
    for (const CollectiveRow& row : collective.rows) {
      if (row.bytes != first.bytes || !row.completed) return;  // not one agreed, finished op
      // The whole record inside its rank's window (the stream's in_window asks only the start).
      const auto span = window.spans.find(row.rank);
      group.in_window = group.in_window && span != window.spans.end() &&
                        row.ts_ns >= span->second.start_ns && row.end_ns <= span->second.end_ns;
      group.members.push_back({row.rank, row.ts_ns, row.end_ns});
    }
    std::sort(group.members.begin(), group.members.end(),
              [](const auto& a, const auto& b) { return a.rank < b.rank; });
    groups.push_back(std::move(group));
  };
  RETURN_IF_ERROR(for_each_collective_group(reader, window, visitor));
  return groups;
}

std::vector<ArrivalSample> arrival_samples(const std::vector<MatchedGroup>& groups,
                                           const WorkloadRunConfig& run) {
  // Each rank's collectives in start order: (start, group index).
  std::map<int, std::vector<std::pair<int64_t, size_t>>> by_rank;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const MatchedGroup::Member& m : groups[g].members) {
      by_rank[m.rank].emplace_back(m.start_ns, g);
    }
  }
  for (auto& [rank, list] : by_rank) std::sort(list.begin(), list.end());
  std::vector<ArrivalSample> out;
  for (size_t g = 0; g < groups.size(); ++g) {
    const MatchedGroup& group = groups[g];
    const auto op = costed_op_from_trace(group.op);
    if (!group.in_window || !op || *op == CostedOp::kSendRecv || group.group_size < 2 ||
        static_cast<int>(group.members.size()) != group.group_size) {
      continue;
    }
    const int stage = run.pp_stage(group.members.front().rank);
    const std::vector<int> ranks = group.ranks();
    bool one_stage = true, synced = true;
    double start_sum = 0, last_start = 0, since_sum = 0;
    for (const MatchedGroup::Member& m : group.members) {
      one_stage = one_stage && run.pp_stage(m.rank) == stage;
      start_sum += static_cast<double>(m.start_ns);
      last_start = std::max(last_start, static_cast<double>(m.start_ns));
      // The member's latest earlier collective with all of this group's ranks.
      const auto& list = by_rank[m.rank];
      auto it = std::lower_bound(list.begin(), list.end(), std::make_pair(m.start_ns, g));
      std::optional<int64_t> synced_at;
      while (it != list.begin() && !synced_at) {
        --it;
        const MatchedGroup& before = groups[it->second];
        const std::vector<int> before_ranks = before.ranks();
        if (std::includes(before_ranks.begin(), before_ranks.end(), ranks.begin(), ranks.end())) {
          for (const MatchedGroup::Member& b : before.members) {
            if (b.rank == m.rank) synced_at = b.end_ns;
          }
        }
      }
      synced = synced && synced_at && *synced_at <= m.start_ns;
      if (synced) since_sum += static_cast<double>(m.start_ns - *synced_at);
    }
    if (!one_stage || !synced) continue;
    const auto n = static_cast<double>(group.members.size());
    out.push_back({*op, group.bytes, group.group_size, (last_start - start_sum / n) * 1e-9,
                   since_sum / n * 1e-9});
  }
  return out;
}

}  // namespace partrain::analyzers
