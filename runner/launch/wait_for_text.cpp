#include "runner/launch/wait_for_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "core/byte_size.h"
#include "core/duration.h"
#include "core/rank_list.h"
#include "profiler/p2p_seq.h"
#include "profiler/trace_reader/communicator_name.h"
#include "runner/launch/flight_diagnosis.h"

namespace partrain::launch {
namespace {

using profiler::CollectiveEvent;

// "all_reduce of 4.00 KiB float"
std::string op_and_size(const CollectiveEvent& e) {
  return fmt::format("{} of {} {}", e.op, format_bytes(e.bytes), e.dtype);
}

// The transfer's sender and receiver (world ranks) as seen from the rank that issued `e`.
std::pair<int, int> direction(const CollectiveEvent& e, int issuer) {
  const int peer = transfer_peer(e);
  return e.op == "send" ? std::pair{issuer, peer} : std::pair{peer, issuer};
}

// "rank 1", or "any rank" for a recv from any source whose sender is not known yet.
std::string peer_text(const CollectiveEvent& e) {
  const int peer = transfer_peer(e);
  return peer < 0 ? "any rank" : fmt::format("rank {}", peer);
}

// "dp 0 seq 5", "send 0->1 on pp 0 seq 4", "recv from any rank by 1 on pp 0 seq 0":
// communicators by the names users know (profiler::communicator_name).
std::string where(const WaitEdge& edge) {
  const std::string group = profiler::communicator_name(edge.op.comm_id);
  if (!is_p2p(edge.op.op)) return fmt::format("{} seq {}", group, edge.op.seq);
  const auto [sender, receiver] = direction(edge.op, edge.waiter);
  if (sender < 0) {
    return fmt::format("recv from any rank by {} on {} seq {}", receiver, group, edge.op.seq);
  }
  return fmt::format("send {}->{} on {} seq {}", sender, receiver, group, edge.op.seq);
}

// "all_reduce of 4.00 KiB float on dp 0 seq 5", "send of 8.00 KiB float to rank 1 on pp 0 seq
// 4", "recv of 8.00 KiB float from any rank on pp 0 seq 0".
std::string op_where(const WaitEdge& edge) {
  if (!is_p2p(edge.op.op)) return fmt::format("{} on {}", op_and_size(edge.op), where(edge));
  return fmt::format("{} {} {} on {} {}", op_and_size(edge.op),
                     edge.op.op == "send" ? "to" : "from", peer_text(edge.op),
                     profiler::communicator_name(edge.op.comm_id),
                     profiler::p2p_seq_text(edge.op.seq));
}

// Sorted as the findings are: collectives before transfers, then by communicator and seq.
auto edge_key(const WaitEdge& e) {
  const auto [sender, receiver] =
      is_p2p(e.op.op) ? direction(e.op, e.waiter) : std::pair{-1, -1};
  return std::tuple(is_p2p(e.op.op), e.op.comm_id, sender, receiver, e.op.seq, e.waiter);
}

std::vector<const WaitEdge*> edges_into(const WaitForGraph& graph, const WaitRoot& root) {
  std::vector<const WaitEdge*> edges;
  for (size_t i : root.edges_in) edges.push_back(&graph.edges[i]);
  std::sort(edges.begin(), edges.end(),
            [](const WaitEdge* a, const WaitEdge* b) { return edge_key(*a) < edge_key(*b); });
  return edges;
}

std::string why(const WaitEdge& edge) {
  switch (edge.reason) {
    case WaitReason::kNeverEntered:
      return fmt::format("rank {} never entered it", edge.awaited);
    case WaitReason::kNoRecords:
      return fmt::format("nothing is known of rank {}", edge.awaited);
    case WaitReason::kHeldInside:
      return fmt::format("rank {} entered it, but its process is held", edge.awaited);
  }
  return "";
}

std::string what_it_is(const WaitRoot& root) {
  switch (root.kind) {
    case RootKind::kEnded:
      return fmt::format("its process {}{} before the run was stopped",
                         root.process.exit && root.process.exit->signaled ? "was " : "",
                         describe_rank_process(root.process));
    case RootKind::kStopped:
    case RootKind::kUninterruptible:
      return fmt::format("its process was {} when the run failed",
                         describe_rank_process(root.process));
    case RootKind::kHung:
      if (!root.last_op) {
        // No record says whether it hung or was still starting (loading data, compiling) when
        // the others' timeout ran out; what its process was doing then is what is known.
        if (root.process.at_failure.condition == ProcessCondition::kUnknown) {
          return "it had recorded no operation: it never reached its first collective (hung, "
                 "or still starting)";
        }
        return fmt::format(
            "it had recorded no operation: it never reached its first collective (hung, or "
            "still starting; its process was {} when the run failed)",
            describe_rank_process(root.process));
      }
      return fmt::format(
          "hung outside any collective: it had entered none{} when it dumped (its last: {} on {} "
          "seq {}, {})",
          root.idle_ns >= 0 ? " for " + format_duration(Nanoseconds(root.idle_ns)) : "",
          op_and_size(*root.last_op), profiler::communicator_name(root.last_op->comm_id),
          root.last_op->seq,
          profiler::collective_state_name(root.last_op->state));
    case RootKind::kNoRecords:
      return "it left no flight-recorder dump (on another node, killed before it could write "
             "one, or started by the traced program rather than by partrain, which then cannot "
             "ask it for one)";
    case RootKind::kBusy:
      return fmt::format(
          "it was still working when the run was stopped (its last operation {} before its "
          "dump)",
          format_duration(Nanoseconds(std::max<int64_t>(root.idle_ns, 0))));
  }
  return "";
}

// What the waiters on one operation of the root say: grouped by the operation they wait in.
std::string evidence(const std::vector<const WaitEdge*>& edges) {
  struct Group {
    const WaitEdge* first = nullptr;
    std::vector<int> waiters;
  };
  std::vector<Group> groups;
  std::map<std::tuple<std::string, uint64_t, std::string, int>, size_t> at;
  for (const WaitEdge* e : edges) {
    // A transfer's two ends are one channel: each waiter is its own group.
    const int channel_end = is_p2p(e->op.op) ? e->waiter : -1;
    auto key = std::tuple(e->op.comm_id, e->op.seq, std::string(e->op.op), channel_end);
    auto [it, added] = at.emplace(key, groups.size());
    if (added) groups.push_back({e, {}});
    groups[it->second].waiters.push_back(e->waiter);
  }
  std::string text;
  for (const Group& g : groups) {
    const WaitEdge& e = *g.first;
    std::string part;
    const bool transfer = is_p2p(e.op.op);
    const std::string_view counterpart = e.op.op == "send" ? "recv" : "send";
    const std::string waiters = ranks_phrase(g.waiters);
    const std::string_view wait = g.waiters.size() == 1 ? "waits" : "wait";
    switch (e.reason) {
      case WaitReason::kNeverEntered:
        part = transfer ? fmt::format("it never posted the {} matching rank {}'s {}, where "
                                      "rank {} waits",
                                      counterpart, e.waiter, op_where(e), e.waiter)
                        : fmt::format("it never entered {}, where {} {}", op_where(e), waiters,
                                      wait);
        break;
      case WaitReason::kNoRecords:
        part = fmt::format("{} {} on it in {}", waiters, wait, op_where(e));
        break;
      case WaitReason::kHeldInside:
        part = fmt::format("it entered {} but never finished it; {} {} there", op_where(e),
                           waiters, wait);
        break;
    }
    text += (text.empty() ? "" : "; ") + part;
  }
  return text;
}

}  // namespace

std::vector<std::string> describe_waits(const WaitForGraph& graph) {
  std::vector<std::string> lines;
  std::set<std::pair<int, int>> said;
  for (const WaitEdge& e : graph.edges) {
    if (!said.emplace(e.waiter, e.awaited).second) continue;
    lines.push_back(fmt::format("rank {} waits on rank {} in {} ({})", e.waiter, e.awaited,
                                op_where(e), why(e)));
  }
  return lines;
}

std::string describe_own_wait(const WaitForGraph& graph, int rank) {
  for (const WaitEdge& e : graph.edges) {
    if (e.waiter == rank) {
      return fmt::format("rank {} waits itself, on rank {} in {}", rank, e.awaited, op_where(e));
    }
  }
  return "";
}

std::string root_kind_and_where(const WaitForGraph& graph, const WaitRoot& root) {
  const std::vector<const WaitEdge*> edges = edges_into(graph, root);
  std::string_view kind = root_kind_name(root.kind);
  if (root.kind == RootKind::kHung || root.kind == RootKind::kBusy) kind = "missing_ranks";
  if (edges.empty()) return std::string(kind);
  return fmt::format("{} at {}", kind, where(*edges.front()));
}

std::string describe_root(const WaitForGraph& graph, const WaitRoot& root) {
  std::string text = what_it_is(root);
  const std::vector<const WaitEdge*> edges = edges_into(graph, root);
  if (!edges.empty()) text += "; " + evidence(edges);
  if (!root.through.empty()) {
    text += fmt::format("; {} {} on it through others", ranks_phrase(root.through),
                        root.through.size() == 1 ? "waits" : "wait");
  }
  return text;
}

}  // namespace partrain::launch
