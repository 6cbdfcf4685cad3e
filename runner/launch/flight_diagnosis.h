// The launcher's reading of its ranks' flight-recorder dumps, in the manner of PyTorch's
// flight-recorder analyzer (tools/flight_recorder): each communicator's collectives are matched
// across its member ranks by sequence number, and the first one that does not match is named with
// its kind (op mismatch, size mismatch, missing ranks) and the rank to blame. A pure function of
// the dumps, so tests feed it made-up recorders. Transfers are matched the same way per channel
// (communicator, sender, receiver): the n-th send with the n-th recv.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "profiler/collective_event.h"
#include "runner/comm/flight_dump.h"

namespace partrain::launch {

enum class FindingKind {
  kMatched,       // every member issued the same op and size; `unfinished` says if it is still open
  kOpMismatch,    // members issued different ops at one seq
  kSizeMismatch,  // the same op with different sizes (bytes, count or dtype)
  kMissingRanks,  // some members never reached this seq
};
std::string_view finding_kind_name(FindingKind kind);

struct CollectiveFinding {
  FindingKind kind = FindingKind::kMatched;
  std::string comm_id;
  // A transfer channel's sender and receiver (world ranks); -1 for a collective.
  int sender = -1;
  int receiver = -1;
  uint64_t seq = 0;          // the seq judged: the first that is not a completed match, or
                             // (kMatched, nothing open) the last one matched
  uint64_t matched = 0;      // collectives of this communicator completed and matched before seq
                             // (for a clean communicator: all of them, seq being the last)
  std::vector<int> members;  // world ranks
  // What each member that reached `seq` issued (world rank, its entry), by rank.
  std::vector<std::pair<int, profiler::CollectiveEvent>> issued;
  std::vector<int> missing;               // members whose dump shows they never reached `seq`
  std::vector<int64_t> missing_last_seq;  // per missing rank: its last seq here, -1 for none
  std::vector<int> undumped;              // members without a dump: nothing is known of them
  std::vector<int> culprits;              // the minority of a mismatch, or the missing ranks
  bool unfinished = false;  // kMatched: some member has it enqueued, started or failed
};

struct FlightDiagnosis {
  std::vector<int> dumped_ranks;
  std::vector<int> watchdog_ranks;  // ranks whose watchdog fired
  std::vector<int> error_ranks;     // ranks that dumped because a collective failed
  // One finding per communicator of more than one rank: the first problem, else its matches;
  // and one per transfer channel with a problem (channels that matched are not listed).
  // Problems first, then by communicator id.
  std::vector<CollectiveFinding> findings;
  std::optional<int> culprit;  // the one rank every problem blames, when there is one
};

FlightDiagnosis diagnose_flight_dumps(const std::vector<comm::FlightDump>& dumps);

// "partrain: "-prefixed lines for stderr, e.g.
//   partrain: diagnosis: world/split1/color0 seq 14: missing ranks: rank 2 never issued
//   all_reduce (ranks 0, 1, 3 started it; rank 2's last on this communicator was seq 13)
std::string format_flight_diagnosis(const FlightDiagnosis& diagnosis);

// The first problem in one line ("world seq 9: op mismatch: rank 1 issued ..."), or "" when
// every communicator matched: the trace's `collective_diagnosis` stat.
std::string diagnosis_headline(const FlightDiagnosis& diagnosis);

// "0-3", "0, 2, 5-7": world ranks, sorted.
std::string format_rank_list(std::vector<int> ranks);

}  // namespace partrain::launch
