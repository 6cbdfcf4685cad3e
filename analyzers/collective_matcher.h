// Matching collectives across ranks as their records arrive (the dashboard reads a live trace
// by rowid, so a group's members come in any order and over several refreshes): members are
// held per (comm_id, seq) (p2p: per (comm_id, seq, pair)) until the group is whole. A whole
// group is summed up as `partrain analyze` sums its groups (arrival_of, collective_bandwidth).
// The texts of the rows it is given (comm_id, op) must outlive it: the reader's interned strings,
// which live as long as the reader (the follower holds both).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "analyzers/collective_groups.h"
#include "analyzers/live_run.h"

namespace partrain::analyzers {

struct MatchedGroup {
  MatchedCollective collective;
  std::vector<CollectiveRow> members;  // their texts valid while the reader that read them lives
};

class CollectiveMatcher {
 public:
  // Groups kept while their other members' records are on their way; a member that never comes
  // (a rank that died) must not grow this without bound.
  static constexpr size_t kMaxPendingGroups = 20'000;

  // One rank's record of (comm_id, seq); the group when this record completes it (group_size
  // members, at least 2).
  std::optional<MatchedGroup> add(std::string_view comm_id, int64_t seq, const CollectiveRow& row);

 private:
  using Key = std::tuple<std::string_view, int64_t, int, int>;  // comm_id, seq, p2p pair
  struct Pending {
    std::vector<CollectiveRow> members;
  };
  void bound();

  std::map<Key, Pending> pending_;
  std::deque<Key> order_;  // oldest first; keys of completed groups are dropped lazily
};

}  // namespace partrain::analyzers
