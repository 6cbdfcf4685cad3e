// The launcher's reading of its ranks' records of collectives (flight-recorder dumps, in the
// manner of PyTorch's flight-recorder analyzer, tools/flight_recorder), in two parts:
// - per communicator, collectives are matched across its members by sequence number, and the
//   first one that does not match is named with its kind (op mismatch, size mismatch, missing
//   ranks); transfers are matched the same way per channel (communicator, sender, receiver): the
//   n-th send with the n-th recv;
// - across communicators, who waits on whom (wait_for_graph.h), with what the launcher saw of
//   each rank's process: the culprit is the rank at the root of that relation (or the minority
//   of a mismatch), named with the evidence: what it is (hung, stopped, stuck in the kernel,
//   ended), the operations it never entered and who waits on it.
// A pure function of the records, whatever their source, so tests feed it made-up recorders.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "profiler/collective_event.h"
#include "profiler/flight/flight_dump.h"
#include "runner/launch/rank_process.h"
#include "runner/launch/wait_for_graph.h"

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
  // kMatched and unfinished: members whose process was stopped, stuck in the kernel or ended
  // first (the launcher's view): what holds it, rather than the transport.
  std::vector<int> held;
  // kMissingRanks on a transfer channel: the tag of the counterpart the absent rank has pending
  // between the same two ranks on another tag (the send and the recv differ only by tag).
  std::optional<uint32_t> counterpart_tag;
};

struct FlightDiagnosis {
  std::vector<int> dumped_ranks;
  std::vector<int> watchdog_ranks;  // ranks whose watchdog fired
  std::vector<int> error_ranks;     // ranks that dumped because a collective failed
  // One finding per communicator of more than one rank: the first problem, else its matches;
  // and one per transfer channel with a problem (channels that matched are not listed).
  // Problems first, then by communicator id.
  std::vector<CollectiveFinding> findings;
  WaitForGraph waits;  // who waits on whom across communicators, and the roots
  // The rank to start from: the minority of a mismatch when one rank is, else the gravest root
  // of the wait-for relation when it is alone in its class.
  std::optional<int> culprit;
};

// Whether the dumps call for a diagnosis: a rank's watchdog fired or one of its collectives
// failed, the ranks issued different ops or sizes at one seq (a transport aborting a rank on the
// mismatch: SIGABRT), or a rank stopped by a signal (Ctrl-C on a stuck job) had waited in a
// collective for 5 s or more (ranks stopped by their launcher or failing in compute dump too, as
// evidence, but do not otherwise: the failure summary says what happened to them).
bool diagnosis_called_for(const std::vector<profiler::FlightDump>& dumps);

// The dumps of each torchrun attempt (FlightDump::attempt) apart, oldest attempt first, each by
// rank: an attempt is diagnosed from its own dumps, never with a restarted rank's later ones.
std::vector<std::vector<profiler::FlightDump>> dumps_by_attempt(
    std::vector<profiler::FlightDump> dumps);

// `processes`: what the launcher saw of its ranks' processes (none: nothing seen). The records of
// a rank the launcher resumed (SIGCONT) to take its stop signal are read as they stood when it
// was resumed: operations enqueued later are left out, and those that ended later are unfinished.
FlightDiagnosis diagnose_flight_dumps(const std::vector<profiler::FlightDump>& dumps,
                                      const std::vector<RankProcess>& processes = {});

// "partrain: "-prefixed lines for stderr, e.g.
//   partrain: diagnosis: world/split1/color0 seq 14: missing ranks: rank 2 never issued
//   all_reduce (ranks 0, 1, 3 started it; rank 2's last on this communicator was seq 13)
std::string format_flight_diagnosis(const FlightDiagnosis& diagnosis);

// The first problem in one line ("world seq 9: op mismatch: rank 1 issued ..."), or "" when
// every communicator matched.
std::string diagnosis_headline(const FlightDiagnosis& diagnosis);

// The culprit with its evidence in one line, as the `culprit:` line says it ("rank 0 (stopped
// at world/split1/color0 seq 3): its process was stopped (state T: SIGSTOP or SIGTSTP); it never
// entered all_reduce ... where rank 2 waits; ..."); without one, ranks that wait on each other
// as the cycle ("ranks 0,1 wait on each other, ... (rank 0 waits on rank 1 in ...; rank 1 waits
// on rank 0 in ...)"), not one side's missing op; else the headline: the trace's
// `collective_diagnosis` stat.
std::string diagnosis_statement(const FlightDiagnosis& diagnosis);

}  // namespace partrain::launch
