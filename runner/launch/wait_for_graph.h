// Who waits on whom, across every communicator at once: a rank with an unfinished (or failed)
// operation waits on the members that provably never entered it (their records stop short of
// its seq), on members that left no records, or, when everyone entered, on a member whose
// process is stopped, stuck in the kernel or gone. Followed to its end, the relation leads to
// the rank at its root: a tensor-parallel peer waits in its all_reduce because its data-parallel
// partner never entered the data-parallel one, because that partner waits on a pipeline recv
// whose sender hung in compute. The roots are classed by what their process and records say,
// the gravest first. Pure: records and process observations in, the relation out.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "profiler/collective_event.h"
#include "runner/launch/flight_index.h"
#include "runner/launch/rank_process.h"

namespace partrain::launch {

enum class WaitReason : uint8_t {
  kNeverEntered,  // the awaited rank's records stop short of the op's seq
  kNoRecords,     // the awaited rank left no records; every member that did had entered
  kHeldInside,    // everyone entered; the awaited rank's process is stopped, stuck or gone
};

struct WaitEdge {
  int waiter = 0;   // world ranks
  int awaited = 0;
  profiler::CollectiveEvent op;  // the waiter's operation left unfinished (or failed)
  WaitReason reason = WaitReason::kNeverEntered;
  int64_t awaited_last_seq = -1;  // kNeverEntered: its last seq there (channel: its last of the
                                  // matching kind), -1 for none
  int64_t waited_ns = 0;          // how long the waiter had waited when it dumped; 0: unknown
};

// What the rank at a root of the relation is, gravest first.
enum class RootKind : uint8_t {
  kEnded,            // its process ended by itself before the launcher stopped the run
  kStopped,          // its process was stopped (SIGSTOP, a debugger)
  kUninterruptible,  // its process was stuck in the kernel (state D)
  kHung,             // alive, it had entered no collective for about as long as the others waited
  kNoRecords,        // nothing is known of it (no dump: another node, or killed first)
  kBusy,             // alive and recently active: stopped by the launcher in the middle of work
};
std::string_view root_kind_name(RootKind kind);

struct WaitRoot {
  int rank = 0;
  RootKind kind = RootKind::kHung;
  std::vector<size_t> edges_in;  // WaitForGraph::edges that wait on it directly
  std::vector<int> through;      // ranks that wait on it through others
  int64_t idle_ns = -1;  // since its last operation, when it dumped; -1: not known
  std::optional<profiler::CollectiveEvent> last_op;  // its last operation, when recorded
  RankProcess process;  // what its launcher saw (condition kUnknown: nothing)
};

struct WaitForGraph {
  std::vector<WaitEdge> edges;  // by waiter, then by the waiter's records
  std::vector<WaitRoot> roots;  // gravest first, then the most waited on
  std::vector<int> deadlocked;  // ranks that wait on each other without a root: a cycle
  // The root every other root is less grave than, when there is one: the culprit.
  std::optional<size_t> culprit;
};

// Whether the launcher saw `rank`'s process unable to take part: stopped, stuck in the kernel,
// or ended before the run was stopped. Not a rank that dumped on its own watchdog or failed
// collective: it was waiting, and what its process did next (exit 124 the moment its watchdog
// fired, first of the waiting ranks when the machine is loaded) followed from that.
bool process_is_held(const FlightIndex& index, const std::map<int, RankProcess>& processes,
                     int rank);

// `processes`: by world rank, what the launcher saw; ranks not in it are unknown.
WaitForGraph build_wait_for_graph(const FlightIndex& index,
                                  const std::map<int, RankProcess>& processes);

}  // namespace partrain::launch
