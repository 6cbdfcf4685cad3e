// Which process group each collective of a backend that does not say (gloo in torch 2.15:
// `c10d::allreduce_` carries its tensors but neither its group nor a sequence number) belongs
// to, from what every rank issued and the groups distributedInfo.pg_config lists.
//
// The ranks' collectives are replayed as the program ran them: each rank waits at its next
// collective, and a group's collective happens once every member (with a trace) waits at one of
// the same kind (op, element count, dtype, root) that the group could hold; a hint (which
// group's worker thread ran the op, when the trace tells) rules out every other group for that
// op. Groups ready at once that share ranks are weighed together:
//  - a group holding all their ranks goes first when the others do not cover its ranks (a
//    collective of the whole world, with a subgroup's members standing at the same op);
//  - when they hold the same ranks, or the others cover the largest one's ranks (tensor-parallel
//    pairs beside the world group, every rank at one op), the trace cannot say which ran it:
//    those collectives are left unmatched and the replay goes on (whichever it was, the same
//    ranks took part);
//  - otherwise the ranks involved are left unmatched from there on.
#pragma once

#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "profiler/import/kineto_json.h"

namespace partrain::profiler {

// One collective (p2p ops aside) a rank issued, in its issue order: what must be equal on every
// member for two ranks' ops to be one collective.
struct IssuedCollective {
  std::string_view op;
  uint64_t count = 0;
  std::string_view dtype;  // empty when not known
  int root = -1;           // rooted ops: the root's rank within the group, as c10d takes it
  int hinted_group = -1;   // the group the op must be in, when other evidence says; -1: none
  int group_size = 0;      // the group's size when the op's buffers say (all_gather); 0: not known
};

enum class UnmatchedReason {
  kMatched,
  kNoGroup,           // no listed group holds this rank
  kNoGroupOfItsSize,  // the op's buffers give a group size no listed group of this rank has
  kSameMembers,       // groups with the same ranks were both ready: which one ran it is unknown
  kAmbiguous,         // groups that share ranks were ready at once
  kOutOfStep,         // the members' collectives stop lining up (or follow an ambiguous one)
};

struct GroupAssignment {
  int group = -1;    // index into the groups; -1: unmatched
  uint64_t seq = 0;  // the collective's number within its group (0, 1, ...)
  UnmatchedReason reason = UnmatchedReason::kMatched;
  std::vector<int> candidates;  // unmatched: the groups it could have been
};

// `issued`: each traced rank's collectives in issue order. Returns, per rank, one assignment per
// issued collective.
std::map<int, std::vector<GroupAssignment>> infer_process_groups(
    const std::vector<ProcessGroupConfig>& groups,
    const std::map<int, std::vector<IssuedCollective>>& issued);

}  // namespace partrain::profiler
