#include "runner/launch/wait_for_graph.h"

#include <algorithm>
#include <set>

#include "profiler/p2p_seq.h"

namespace partrain::launch {
namespace {

using profiler::CollectiveEvent;
using profiler::CollectiveState;
using profiler::FlightDump;

bool waiting(const CollectiveEvent& e) { return e.state != CollectiveState::kCompleted; }

const RecordsBySeq kUnusedChannel;  // the records of a channel no rank has used

bool same_op_and_size(const CollectiveEvent& a, const CollectiveEvent& b) {
  return a.op == b.op && a.bytes == b.bytes && a.count == b.count && a.dtype == b.dtype;
}

class EdgeBuilder {
 public:
  EdgeBuilder(const FlightIndex& index, const std::map<int, RankProcess>& processes,
              std::vector<WaitEdge>& edges)
      : index_(index), processes_(processes), edges_(edges) {}

  void add_for(const FlightDump& dump, const CollectiveEvent& e) {
    const int64_t waited = e.enqueue_ns > 0 ? dump.dumped_ns - e.enqueue_ns : 0;
    if (is_p2p(e.op)) {
      transfer(dump.rank, e, waited);
    } else {
      collective(dump.rank, e, waited);
    }
  }

 private:
  void add(int waiter, int awaited, const CollectiveEvent& e, WaitReason reason,
           int64_t last, int64_t waited) {
    edges_.push_back(WaitEdge{waiter, awaited, e, reason, last, waited});
  }

  void collective(int waiter, const CollectiveEvent& e, int64_t waited) {
    auto found = index_.comms.find(e.comm_id);
    if (found == index_.comms.end() || found->second.members.size() < 2) return;
    const CommRecord& record = found->second;
    std::vector<std::pair<int, int64_t>> missing;
    std::vector<int> unknown, inside;
    for (int member : record.members) {
      if (member == waiter) continue;
      auto dumped = record.dumped.find(member);
      if (dumped == record.dumped.end()) {
        unknown.push_back(member);
        continue;
      }
      const RecordsBySeq& by_seq = dumped->second.by_seq;
      if (auto at = by_seq.find(e.seq); at != by_seq.end()) {
        // A different op at this seq is a mismatch, judged on its own; no one waits on it.
        if (!same_op_and_size(*at->second, e)) return;
        inside.push_back(member);
      } else if (never_reached(by_seq, dumped->second.wrapped, e.seq)) {
        missing.emplace_back(member, last_seq(by_seq));
      }
    }
    if (!missing.empty()) {
      for (const auto& [member, last] : missing) {
        add(waiter, member, e, WaitReason::kNeverEntered, last, waited);
      }
    } else if (!unknown.empty()) {
      for (int member : unknown) add(waiter, member, e, WaitReason::kNoRecords, -1, waited);
    } else {
      for (int member : inside) {
        if (process_is_held(index_, processes_, member)) {
          add(waiter, member, e, WaitReason::kHeldInside, -1, waited);
        }
      }
    }
  }

  void transfer(int waiter, const CollectiveEvent& e, int64_t waited) {
    const int peer = transfer_peer(e);
    if (peer < 0) {
      if (e.op == "recv") any_source_recv(waiter, e, waited);
      return;
    }
    const bool send = e.op == "send";
    auto channel = index_.channels.find(ChannelKey{e.comm_id, send ? waiter : peer,
                                                   send ? peer : waiter, profiler::p2p_tag(e.seq)});
    auto peer_dump = index_.by_rank.find(peer);
    if (peer_dump == index_.by_rank.end()) {
      add(waiter, peer, e, WaitReason::kNoRecords, -1, waited);
      return;
    }
    const RecordsBySeq& other = channel == index_.channels.end()
                                    ? kUnusedChannel
                                    : (send ? channel->second.recvs : channel->second.sends);
    if (auto at = other.find(e.seq); at != other.end()) {
      if (at->second->bytes != e.bytes) return;  // a size mismatch, judged on its own
      if (process_is_held(index_, processes_, peer)) {
        add(waiter, peer, e, WaitReason::kHeldInside, -1, waited);
      }
      return;
    }
    if (never_reached(other, ring_wrapped(*peer_dump->second), e.seq)) {
      add(waiter, peer, e, WaitReason::kNeverEntered, last_seq(other), waited);
    }
  }

  // A recv from any source (dist.recv without src: no sender yet) waits on every other member
  // of its group, as whichever sends first completes it: on one that left no records; on one
  // whose send to the waiter (same communicator and tag) is unfinished only when its process is
  // held; on every other, which never posted such a send.
  void any_source_recv(int waiter, const CollectiveEvent& e, int64_t waited) {
    for (int member : e.group_ranks) {
      if (member == waiter) continue;
      if (!index_.by_rank.contains(member)) {
        add(waiter, member, e, WaitReason::kNoRecords, -1, waited);
        continue;
      }
      auto channel =
          index_.channels.find(ChannelKey{e.comm_id, member, waiter, profiler::p2p_tag(e.seq)});
      const RecordsBySeq& sends =
          channel == index_.channels.end() ? kUnusedChannel : channel->second.sends;
      const bool sending = std::any_of(sends.begin(), sends.end(),
                                       [](const auto& send) { return waiting(*send.second); });
      if (!sending) {
        add(waiter, member, e, WaitReason::kNeverEntered, last_seq(sends), waited);
      } else if (process_is_held(index_, processes_, member)) {
        add(waiter, member, e, WaitReason::kHeldInside, -1, waited);
      }
    }
  }

  const FlightIndex& index_;
  const std::map<int, RankProcess>& processes_;
  std::vector<WaitEdge>& edges_;
};

// The latest moment a rank's records show it doing anything, and that operation.
const CollectiveEvent* last_activity(const FlightDump& dump, int64_t& at_ns) {
  const CollectiveEvent* latest = nullptr;
  at_ns = 0;
  for (const CollectiveEvent& e : dump.entries) {
    const int64_t t = std::max({e.enqueue_ns, e.start_ns, e.end_ns});
    if (latest == nullptr || t >= at_ns) {
      latest = &e;
      at_ns = t;
    }
  }
  return latest;
}

WaitRoot classify(int rank, const FlightIndex& index, const std::map<int, RankProcess>& processes,
                  const std::vector<WaitEdge>& edges, std::vector<size_t> edges_in) {
  WaitRoot root;
  root.rank = rank;
  root.edges_in = std::move(edges_in);
  auto process = processes.find(rank);
  auto dump = index.by_rank.find(rank);
  if (dump != index.by_rank.end()) {
    int64_t at_ns = 0;
    if (const CollectiveEvent* last = last_activity(*dump->second, at_ns)) {
      root.last_op = *last;
      if (at_ns > 0) root.idle_ns = dump->second->dumped_ns - at_ns;
    }
  }
  if (process != processes.end()) {
    const RankProcess& p = process->second;
    root.process = p;
    if (p.ended_before_stop && p.exit) {
      root.kind = RootKind::kEnded;
      return root;
    }
    if (p.at_failure.condition == ProcessCondition::kStopped) {
      root.kind = RootKind::kStopped;
      return root;
    }
    if (p.at_failure.condition == ProcessCondition::kUninterruptible) {
      root.kind = RootKind::kUninterruptible;
      return root;
    }
  }
  if (dump == index.by_rank.end()) {
    root.kind = RootKind::kNoRecords;
    return root;
  }
  // Idle about as long as the others waited on it: hung outside any collective. Recently
  // active: it was working when the launcher stopped the run, a consequence, not a cause.
  int64_t longest_wait = 0;
  for (size_t i : root.edges_in) longest_wait = std::max(longest_wait, edges[i].waited_ns);
  const bool idle = root.idle_ns < 0 || longest_wait <= 0 || 2 * root.idle_ns >= longest_wait;
  root.kind = idle ? RootKind::kHung : RootKind::kBusy;
  return root;
}

// The ranks that reach `target` through the edges, `target` and its direct waiters excepted.
std::vector<int> waiting_through(int target, const std::vector<WaitEdge>& edges) {
  std::set<int> direct, reached{target};
  std::vector<int> frontier{target};
  for (const WaitEdge& e : edges) {
    if (e.awaited == target) direct.insert(e.waiter);
  }
  while (!frontier.empty()) {
    const int rank = frontier.back();
    frontier.pop_back();
    for (const WaitEdge& e : edges) {
      if (e.awaited == rank && reached.insert(e.waiter).second) frontier.push_back(e.waiter);
    }
  }
  std::vector<int> through;
  for (int rank : reached) {
    if (rank != target && !direct.contains(rank)) through.push_back(rank);
  }
  return through;
}

}  // namespace

bool process_is_held(const FlightIndex& index, const std::map<int, RankProcess>& processes,
                     int rank) {
  auto found = processes.find(rank);
  if (found == processes.end()) return false;
  if (auto dump = index.by_rank.find(rank); dump != index.by_rank.end()) {
    const profiler::DumpTrigger trigger = dump->second->trigger;
    if (trigger == profiler::DumpTrigger::kWatchdog ||
        trigger == profiler::DumpTrigger::kCollectiveError) {
      return false;
    }
  }
  const ProcessCondition c = found->second.at_failure.condition;
  return c == ProcessCondition::kStopped || c == ProcessCondition::kUninterruptible ||
         found->second.ended_before_stop;
}

std::string_view root_kind_name(RootKind kind) {
  switch (kind) {
    case RootKind::kEnded: return "ended";
    case RootKind::kStopped: return "stopped";
    case RootKind::kUninterruptible: return "uninterruptible";
    case RootKind::kHung: return "hung";
    case RootKind::kNoRecords: return "no_records";
    case RootKind::kBusy: return "busy";
  }
  return "unknown";
}

WaitForGraph build_wait_for_graph(const FlightIndex& index,
                                  const std::map<int, RankProcess>& processes) {
  WaitForGraph graph;
  EdgeBuilder builder(index, processes, graph.edges);
  for (const auto& [rank, dump] : index.by_rank) {
    for (const CollectiveEvent& e : dump->entries) {
      if (waiting(e)) builder.add_for(*dump, e);
    }
  }
  std::set<int> waiters;
  std::map<int, std::vector<size_t>> edges_in;
  for (size_t i = 0; i < graph.edges.size(); ++i) {
    waiters.insert(graph.edges[i].waiter);
    edges_in[graph.edges[i].awaited].push_back(i);
  }
  // A rank whose process failed, stopped or got stuck is a root even when nobody was seen
  // waiting on it yet (the others may have been computing when the run was stopped).
  std::set<int> candidates;
  for (const auto& [rank, in] : edges_in) candidates.insert(rank);
  for (const auto& entry : processes) {
    if (process_is_held(index, processes, entry.first)) candidates.insert(entry.first);
  }
  for (int rank : candidates) {
    if (waiters.contains(rank)) continue;  // waits itself: not a root
    WaitRoot root = classify(rank, index, processes, graph.edges, edges_in[rank]);
    root.through = waiting_through(rank, graph.edges);
    graph.roots.push_back(std::move(root));
  }
  std::sort(graph.roots.begin(), graph.roots.end(), [](const WaitRoot& a, const WaitRoot& b) {
    const size_t wa = a.edges_in.size() + a.through.size();
    const size_t wb = b.edges_in.size() + b.through.size();
    if (a.kind != b.kind) return a.kind < b.kind;
    if (wa != wb) return wa > wb;
    return a.rank < b.rank;
  });
  if (graph.roots.empty() && !graph.edges.empty()) {
    graph.deadlocked.assign(waiters.begin(), waiters.end());
  }
  if (!graph.roots.empty() &&
      (graph.roots.size() == 1 || graph.roots[0].kind < graph.roots[1].kind)) {
    graph.culprit = 0;
  }
  return graph;
}

}  // namespace partrain::launch
