#include "runner/launch/flight_index.h"

#include <algorithm>

#include "profiler/p2p_seq.h"

namespace partrain::launch {

using profiler::CollectiveEvent;
using profiler::FlightDump;

bool ring_wrapped(const FlightDump& dump) { return dump.total_recorded > dump.entries.size(); }

bool never_reached(const RecordsBySeq& by_seq, bool wrapped, uint64_t seq) {
  return by_seq.empty() ? !wrapped : by_seq.rbegin()->first < seq;
}

int64_t last_seq(const RecordsBySeq& by_seq) {
  return by_seq.empty() ? -1 : static_cast<int64_t>(by_seq.rbegin()->first);
}

int transfer_peer(const CollectiveEvent& e) {
  if (e.peer < 0 || static_cast<size_t>(e.peer) >= e.group_ranks.size()) return -1;
  return e.group_ranks[static_cast<size_t>(e.peer)];
}

FlightIndex index_flight_dumps(const std::vector<FlightDump>& dumps) {
  FlightIndex index;
  for (const FlightDump& dump : dumps) {
    index.by_rank[dump.rank] = &dump;
    for (const CollectiveEvent& e : dump.entries) {
      if (is_p2p(e.op)) {
        const int peer = transfer_peer(e);
        if (peer < 0) continue;
        if (e.op == "send") {
          index.channels[ChannelKey{e.comm_id, dump.rank, peer, profiler::p2p_tag(e.seq)}]
              .sends[e.seq] = &e;
        } else {
          index.channels[ChannelKey{e.comm_id, peer, dump.rank, profiler::p2p_tag(e.seq)}]
              .recvs[e.seq] = &e;
        }
        continue;
      }
      CommRecord& record = index.comms[e.comm_id];
      if (record.members.empty()) record.members = e.group_ranks;
    }
  }
  for (auto& [id, record] : index.comms) {
    for (const FlightDump& dump : dumps) {
      if (std::find(record.members.begin(), record.members.end(), dump.rank) ==
          record.members.end()) {
        continue;
      }
      MemberRecord& member = record.dumped[dump.rank];
      member.wrapped = ring_wrapped(dump);
      for (const CollectiveEvent& e : dump.entries) {
        if (e.comm_id == id && !is_p2p(e.op)) member.by_seq[e.seq] = &e;
      }
    }
  }
  return index;
}

}  // namespace partrain::launch
