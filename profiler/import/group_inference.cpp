#include "profiler/import/group_inference.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <set>

#include "profiler/import/torch_collectives.h"

namespace partrain::profiler {
namespace {

bool same_kind(const IssuedCollective& a, const IssuedCollective& b) {
  if (a.op != b.op || a.count != b.count) return false;
  if (!a.dtype.empty() && !b.dtype.empty() && a.dtype != b.dtype) return false;
  return !is_rooted_op(a.op) || a.root == b.root;
}

bool holds(const ProcessGroupConfig& group, int rank) {
  return std::find(group.ranks.begin(), group.ranks.end(), rank) != group.ranks.end();
}

class Replay {
 public:
  Replay(const std::vector<ProcessGroupConfig>& groups,
         const std::map<int, std::vector<IssuedCollective>>& issued)
      : groups_(groups), issued_(issued), fired_(groups.size(), 0) {
    for (const auto& [rank, ops] : issued) {
      out_[rank].resize(ops.size());
      cursor_[rank] = 0;
      std::vector<int> mine;
      for (size_t g = 0; g < groups.size(); ++g) {
        if (holds(groups[g], rank)) mine.push_back(static_cast<int>(g));
      }
      for (size_t i = 0; i < ops.size(); ++i) {
        GroupAssignment& a = out_[rank][i];
        for (int g : mine) {
          if (ops[i].group_size == 0 ||
              ops[i].group_size == static_cast<int>(groups[g].ranks.size())) {
            a.candidates.push_back(g);
          }
        }
        if (a.candidates.empty() && !mine.empty()) a.reason = UnmatchedReason::kNoGroupOfItsSize;
      }
    }
    for (const ProcessGroupConfig& group : groups) {
      std::vector<int> traced;
      for (int r : group.ranks) {
        if (issued.contains(r)) traced.push_back(r);
      }
      members_.push_back(std::move(traced));
    }
  }

  std::map<int, std::vector<GroupAssignment>> run() {
    skip_groupless();
    while (true) {
      const std::vector<int> ready = ready_groups();
      if (ready.empty()) break;
      decide(overlapping(ready.front(), ready));
      skip_groupless();
    }
    for (auto& [rank, cursor] : cursor_) {
      for (; cursor < out_[rank].size(); ++cursor) {
        if (out_[rank][cursor].reason == UnmatchedReason::kMatched) {
          out_[rank][cursor].reason = UnmatchedReason::kOutOfStep;
        }
      }
    }
    return std::move(out_);
  }

 private:
  // `first` and the ready groups linked to it through shared ranks, each group's new neighbours
  // in `ready`'s (ascending) order. Found through each rank's ready groups, so a round costs the
  // ready groups' members, not their number squared (pg_config may list thousands of groups).
  std::vector<int> overlapping(int first, const std::vector<int>& ready) const {
    std::map<int, std::vector<int>> ready_of_rank;
    for (int g : ready) {
      for (int r : members_[g]) ready_of_rank[r].push_back(g);
    }
    std::vector<bool> in_component(groups_.size(), false);
    std::set<int> ranks_seen;
    std::vector<int> component{first};
    in_component[first] = true;
    for (size_t k = 0; k < component.size(); ++k) {
      const size_t known = component.size();
      for (int r : members_[component[k]]) {
        if (!ranks_seen.insert(r).second) continue;
        for (int g : ready_of_rank[r]) {
          if (!in_component[g]) {
            in_component[g] = true;
            component.push_back(g);
          }
        }
      }
      std::sort(component.begin() + static_cast<std::ptrdiff_t>(known), component.end());
    }
    return component;
  }

  void decide(const std::vector<int>& component) {
    if (component.size() == 1) {
      fire(component.front());
      return;
    }
    std::set<int> all;
    for (int g : component) all.insert(members_[g].begin(), members_[g].end());
    std::vector<int> covering, others;
    for (int g : component) {
      (members_[g].size() == all.size() ? covering : others).push_back(g);
    }
    if (covering.empty()) {
      give_up_on(component);
      return;
    }
    std::set<int> covered_by_others;
    for (int g : others) covered_by_others.insert(members_[g].begin(), members_[g].end());
    if (covering.size() == 1 && covered_by_others.size() < all.size()) {
      fire(covering.front());
      return;
    }
    consume_unmatched(covering.front(),
                      others.empty() ? UnmatchedReason::kSameMembers : UnmatchedReason::kAmbiguous,
                      component);
  }

  const IssuedCollective* at_cursor(int rank) const {
    const auto& ops = issued_.at(rank);
    const size_t cursor = cursor_.at(rank);
    return cursor < ops.size() ? &ops[cursor] : nullptr;
  }

  // A collective no group of this rank can hold never blocks the others.
  void skip_groupless() {
    for (auto& [rank, cursor] : cursor_) {
      while (cursor < out_[rank].size() && out_[rank][cursor].candidates.empty()) {
        if (out_[rank][cursor].reason == UnmatchedReason::kMatched) {
          out_[rank][cursor].reason = UnmatchedReason::kNoGroup;
        }
        ++cursor;
      }
    }
  }

  std::vector<int> ready_groups() const {
    std::vector<int> ready;
    for (size_t g = 0; g < groups_.size(); ++g) {
      const std::vector<int>& members = members_[g];
      if (members.empty()) continue;
      const IssuedCollective* first = at_cursor(members.front());
      bool all = first != nullptr;
      for (size_t k = 0; all && k < members.size(); ++k) {
        const IssuedCollective* op = at_cursor(members[k]);
        all = op != nullptr && same_kind(*first, *op) &&
              (op->hinted_group < 0 || op->hinted_group == static_cast<int>(g)) &&
              (op->group_size == 0 || op->group_size == static_cast<int>(groups_[g].ranks.size()));
      }
      if (all) ready.push_back(static_cast<int>(g));
    }
    return ready;
  }

  void fire(int group) {
    const uint64_t seq = fired_[group]++;
    for (int rank : members_[group]) {
      GroupAssignment& a = out_[rank][cursor_[rank]++];
      a.group = group;
      a.seq = seq;
      a.candidates.clear();
    }
  }

  void consume_unmatched(int group, UnmatchedReason reason, const std::vector<int>& candidates) {
    for (int rank : members_[group]) {
      GroupAssignment& a = out_[rank][cursor_[rank]++];
      a.reason = reason;
      a.candidates = candidates;
    }
  }

  // The ranks of these groups: which of them took part is unknown, so nothing after it can be
  // numbered on them.
  void give_up_on(const std::vector<int>& groups) {
    for (int g : groups) {
      for (int rank : members_[g]) {
        size_t& cursor = cursor_[rank];
        if (cursor < out_[rank].size()) {
          out_[rank][cursor].reason = UnmatchedReason::kAmbiguous;
          out_[rank][cursor].candidates = groups;
        }
        for (; cursor < out_[rank].size(); ++cursor) {
          if (out_[rank][cursor].reason == UnmatchedReason::kMatched) {
            out_[rank][cursor].reason = UnmatchedReason::kOutOfStep;
          }
        }
      }
    }
  }

  const std::vector<ProcessGroupConfig>& groups_;
  const std::map<int, std::vector<IssuedCollective>>& issued_;
  std::vector<std::vector<int>> members_;  // traced members of each group
  std::vector<uint64_t> fired_;
  std::map<int, size_t> cursor_;
  std::map<int, std::vector<GroupAssignment>> out_;
};

}  // namespace

std::map<int, std::vector<GroupAssignment>> infer_process_groups(
    const std::vector<ProcessGroupConfig>& groups,
    const std::map<int, std::vector<IssuedCollective>>& issued) {
  return Replay(groups, issued).run();
}

}  // namespace partrain::profiler
