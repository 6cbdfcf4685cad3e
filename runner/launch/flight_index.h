// The ranks' records of collectives and transfers, indexed for matching across ranks: per
// communicator, each member's collectives by seq; per transfer channel (communicator, sender,
// receiver), the sender's sends and the receiver's recvs by seq. What the diagnosis's two
// readings share: the per-communicator judgement (flight_diagnosis.h) and the wait-for relation
// across communicators (wait_for_graph.h). Records point into the dumps, which must outlive them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/collective_event.h"
#include "profiler/flight/flight_dump.h"
#include "profiler/p2p_seq.h"

namespace partrain::launch {

using profiler::is_p2p;  // profiler/p2p_seq.h

using RecordsBySeq = std::map<uint64_t, const profiler::CollectiveEvent*>;

// One member's collectives on one communicator, by seq.
struct MemberRecord {
  bool wrapped = false;  // its ring evicted entries: seqs below its oldest are unknown
  RecordsBySeq by_seq;
};

struct CommRecord {
  std::vector<int> members;            // world ranks
  std::map<int, MemberRecord> dumped;  // members with records, by world rank
};

// One direction of transfers between two ranks on one communicator, of one tag: the n-th send of
// `sender` to `receiver` pairs with the n-th recv of `receiver` from `sender` (seq counts per
// direction and tag; a tag rides in the seq, profiler/p2p_seq.h).
struct ChannelKey {
  std::string comm_id;
  int sender = 0;  // world ranks
  int receiver = 0;
  uint32_t tag = 0;
  auto operator<=>(const ChannelKey&) const = default;
};

struct ChannelRecord {
  RecordsBySeq sends;  // from the sender's records
  RecordsBySeq recvs;  // from the receiver's records
};

struct FlightIndex {
  std::map<std::string, CommRecord> comms;  // collectives, by communicator id
  std::map<ChannelKey, ChannelRecord> channels;
  std::map<int, const profiler::FlightDump*> by_rank;
};

FlightIndex index_flight_dumps(const std::vector<profiler::FlightDump>& dumps);

// Whether a ring evicted entries (its oldest seqs are unknown).
bool ring_wrapped(const profiler::FlightDump& dump);
// Whether a member provably never reached `seq`: its last seq is lower (or it has none and its
// ring never wrapped).
bool never_reached(const RecordsBySeq& by_seq, bool wrapped, uint64_t seq);
// The last seq recorded, -1 for none.
int64_t last_seq(const RecordsBySeq& by_seq);
// The world rank at the other end of a transfer, -1 when its group does not say.
int transfer_peer(const profiler::CollectiveEvent& e);

}  // namespace partrain::launch
