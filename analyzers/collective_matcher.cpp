#include "analyzers/collective_matcher.h"

#include <algorithm>

#include "analyzers/bandwidth.h"

namespace partrain::analyzers {
namespace {

// The median member's time (the mean of the middle two for an even count).
int64_t median_time(const std::vector<CollectiveRow>& members) {
  std::vector<int64_t> times;
  for (const CollectiveRow& member : members) times.push_back(member.time_ns);
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  return n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
}

MatchedCollective summarize(std::string_view comm_id, int64_t seq,
                            const std::vector<CollectiveRow>& members) {
  const CollectiveRow& first = members.front();
  MatchedCollective m{std::string(comm_id), seq, std::string(first.op), first.bytes,
                      first.group_size};
  m.label = first.label;
  for (const CollectiveRow& member : members) m.end_ns = std::max(m.end_ns, member.end_ns);
  const GroupArrival arrival = arrival_of(std::span<const CollectiveRow>(members));
  m.skew_ns = arrival.skew_ns();
  m.last_rank = arrival.last_rank;
  m.time_ns = median_time(members);
  if (m.bytes > 0 && m.time_ns > 0) {
    m.busbw_gbps = collective_bandwidth(m.op, static_cast<double>(m.bytes),
                                        static_cast<double>(m.time_ns) / 1e9, m.group_size)
                       .busbw_gbps;
  }
  return m;
}

}  // namespace

std::optional<MatchedGroup> CollectiveMatcher::add(std::string_view comm_id, int64_t seq,
                                                   const CollectiveRow& row) {
  // p2p ops are numbered per (communicator, peer): the pair is part of the key.
  int low = -1, high = -1;
  if (is_p2p(row.op) && row.peer) {
    low = std::min(row.rank, *row.peer);
    high = std::max(row.rank, *row.peer);
  }
  const Key key{comm_id, seq, low, high};
  auto [it, inserted] = pending_.try_emplace(key);
  Pending& group = it->second;
  if (inserted) order_.push_back(key);
  group.members.push_back(row);
  std::optional<MatchedGroup> matched;
  if (static_cast<int>(group.members.size()) >= std::max(group.members.front().group_size, 2)) {
    matched = MatchedGroup{summarize(comm_id, seq, group.members), std::move(group.members)};
    pending_.erase(it);
  }
  bound();
  return matched;
}

void CollectiveMatcher::bound() {
  while (pending_.size() > kMaxPendingGroups && !order_.empty()) {
    pending_.erase(order_.front());
    order_.pop_front();
  }
  if (order_.size() > 4 * kMaxPendingGroups) {
    std::deque<Key> live;
    for (const Key& key : order_) {
      if (pending_.count(key)) live.push_back(key);
    }
    order_.swap(live);
  }
}

}  // namespace partrain::analyzers
