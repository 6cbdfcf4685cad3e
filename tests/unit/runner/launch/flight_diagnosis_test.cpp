// The launcher's diagnosis of flight-recorder dumps, fed made-up recorders: all matched, an op
// mismatch and a size mismatch naming the minority rank and the seq, missing ranks (a hung rank,
// a rank with nothing on the communicator), a wrapped ring, ranks without a dump, transfers
// paired per channel, and the text.
#include "runner/launch/flight_diagnosis.h"

#include <gtest/gtest.h>

namespace partrain::launch {
namespace {

using profiler::CollectiveEvent;
using profiler::CollectiveState;
using profiler::DumpTrigger;
using profiler::FlightDump;

constexpr const char* kDp = "world/split1/color0";

CollectiveEvent op(const std::string& comm, uint64_t seq, std::string_view name, uint64_t bytes,
                   CollectiveState state = CollectiveState::kCompleted,
                   std::vector<int> group = {0, 1, 2, 3}) {
  CollectiveEvent e;
  e.comm_id = comm;
  e.seq = seq;
  e.op = name;
  e.dtype = "float";
  e.count = bytes / 4;
  e.bytes = bytes;
  e.group_ranks = std::move(group);
  e.state = state;
  return e;
}

// Ranks 0-3 that all did `done` completed all-reduces of 4 KiB on the dp communicator.
std::vector<FlightDump> healthy_run(uint64_t done) {
  std::vector<FlightDump> dumps(4);
  for (int rank = 0; rank < 4; ++rank) {
    dumps[static_cast<size_t>(rank)].rank = rank;
    dumps[static_cast<size_t>(rank)].trigger = DumpTrigger::kSignal;
    for (uint64_t seq = 0; seq < done; ++seq) {
      dumps[static_cast<size_t>(rank)].entries.push_back(op(kDp, seq, "all_reduce", 4096));
    }
    dumps[static_cast<size_t>(rank)].total_recorded = done;
  }
  return dumps;
}

// Dumps of ranks stopped by a signal call for a diagnosis only when one of them had waited in a
// collective for 5 s or more (Ctrl-C on a stuck job), not for an ordinary stop mid-collective;
// a watchdog's dump always does.
TEST(FlightDiagnosis, ASignalStopCallsForADiagnosisWhenARankWasStuck) {
  std::vector<FlightDump> dumps = healthy_run(3);
  EXPECT_FALSE(diagnosis_called_for(dumps));
  CollectiveEvent waiting = op(kDp, 3, "all_reduce", 4096, CollectiveState::kStarted);
  waiting.enqueue_ns = 1'000'000'000;
  dumps[0].entries.push_back(waiting);
  dumps[0].dumped_ns = waiting.enqueue_ns + 200'000'000;  // 0.2 s in: a stop mid-collective
  EXPECT_FALSE(diagnosis_called_for(dumps));
  dumps[0].dumped_ns = waiting.enqueue_ns + 6'000'000'000;  // 6 s in: stuck
  EXPECT_TRUE(diagnosis_called_for(dumps));
  std::vector<FlightDump> watchdog = healthy_run(3);
  watchdog[2].trigger = DumpTrigger::kWatchdog;
  EXPECT_TRUE(diagnosis_called_for(watchdog));
}

// gloo aborts the rank that reads a size mismatch (SIGABRT) at once; the others are stopped
// mid-collective, well under 5 s in: the mismatch in the dumps calls for the diagnosis alone.
TEST(FlightDiagnosis, ASizeMismatchCallsForADiagnosisHoweverYoung) {
  std::vector<FlightDump> dumps = healthy_run(3);
  for (FlightDump& d : dumps) {
    d.trigger = DumpTrigger::kSignal;
    const uint64_t bytes = d.rank == 1 ? 4000 : 4;
    CollectiveEvent waiting = op(kDp, 3, "all_reduce", bytes, CollectiveState::kStarted);
    waiting.enqueue_ns = 1'000'000'000;
    d.entries.push_back(waiting);
    d.total_recorded = d.entries.size();
    d.dumped_ns = waiting.enqueue_ns + 100'000'000;
  }
  EXPECT_TRUE(diagnosis_called_for(dumps));
  const FlightDiagnosis diagnosis = diagnose_flight_dumps(dumps);
  ASSERT_TRUE(diagnosis.culprit);
  EXPECT_EQ(*diagnosis.culprit, 1);
  // The same stop with every rank in the same all_reduce is an ordinary stop.
  for (FlightDump& d : dumps) {
    d.entries.back().bytes = 4;
    d.entries.back().count = 1;
  }
  EXPECT_FALSE(diagnosis_called_for(dumps));
}

// torchrun restarted the job after rank 1 hung in attempt 0 (rank 0's watchdog fired at seq 8),
// and attempt 1 failed early: each attempt's dumps are read apart, so attempt 0's hang is named
// from attempt 0's dumps (rank 1's last was seq 7), not from rank 1's empty attempt-1 dump.
TEST(FlightDiagnosis, EachTorchrunAttemptIsDiagnosedFromItsOwnDumps) {
  const std::vector<int> pair = {0, 1};
  std::vector<FlightDump> dumps;
  for (int attempt : {1, 0}) {
    for (int rank : {1, 0}) {
      FlightDump d;
      d.rank = rank;
      d.attempt = attempt;
      d.trigger = DumpTrigger::kSignal;
      const std::string comm = attempt == 0 ? "default_pg:0" : "default_pg:0@restart1";
      const uint64_t done = attempt == 0 ? 8 : (rank == 0 ? 1 : 0);
      for (uint64_t seq = 0; seq < done; ++seq) {
        d.entries.push_back(op(comm, seq, "all_reduce", 4096, CollectiveState::kCompleted, pair));
      }
      if (attempt == 0 && rank == 0) {
        d.trigger = DumpTrigger::kWatchdog;
        d.entries.push_back(op(comm, 8, "all_reduce", 4096, CollectiveState::kStarted, pair));
      }
      d.total_recorded = d.entries.size();
      dumps.push_back(std::move(d));
    }
  }
  const std::vector<std::vector<FlightDump>> attempts = dumps_by_attempt(dumps);
  ASSERT_EQ(attempts.size(), 2u);
  ASSERT_EQ(attempts[0].size(), 2u);
  EXPECT_EQ(attempts[0][0].attempt, 0);
  EXPECT_EQ(attempts[0][0].rank, 0);
  EXPECT_EQ(attempts[0][1].rank, 1);
  EXPECT_EQ(attempts[1][0].attempt, 1);
  EXPECT_TRUE(diagnosis_called_for(attempts[0]));
  EXPECT_FALSE(diagnosis_called_for(attempts[1]));
  const FlightDiagnosis d = diagnose_flight_dumps(attempts[0]);
  EXPECT_EQ(d.culprit, 1);
  ASSERT_FALSE(d.findings.empty());
  EXPECT_EQ(d.findings[0].kind, FindingKind::kMissingRanks);
  EXPECT_EQ(d.findings[0].comm_id, "default_pg:0");
  EXPECT_EQ(d.findings[0].seq, 8u);
  EXPECT_EQ(d.findings[0].missing_last_seq, (std::vector<int64_t>{7}));
}

TEST(FlightDiagnosis, EverythingMatched) {
  FlightDiagnosis d = diagnose_flight_dumps(healthy_run(5));
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].kind, FindingKind::kMatched);
  EXPECT_FALSE(d.findings[0].unfinished);
  EXPECT_EQ(d.findings[0].matched, 5u);
  EXPECT_EQ(d.findings[0].seq, 4u);
  EXPECT_TRUE(d.findings[0].culprits.empty());
  EXPECT_FALSE(d.culprit.has_value());
  EXPECT_EQ(diagnosis_headline(d), "");
  EXPECT_NE(format_flight_diagnosis(d).find(
                "partrain: diagnosis: dp 0: 5 collective(s) matched on ranks 0-3, "
                "all completed"),
            std::string::npos)
      << format_flight_diagnosis(d);
}

// --inject hang:rank=2: the others started seq 5, rank 2's last is seq 4; their watchdogs fired.
TEST(FlightDiagnosis, HungRankIsMissing) {
  std::vector<FlightDump> dumps = healthy_run(5);
  for (int rank : {0, 1, 3}) {
    dumps[static_cast<size_t>(rank)].entries.push_back(
        op(kDp, 5, "all_reduce", 4096, CollectiveState::kStarted));
    dumps[static_cast<size_t>(rank)].trigger = DumpTrigger::kWatchdog;
  }
  FlightDiagnosis d = diagnose_flight_dumps(dumps);
  ASSERT_EQ(d.findings.size(), 1u);
  const CollectiveFinding& f = d.findings[0];
  EXPECT_EQ(f.kind, FindingKind::kMissingRanks);
  EXPECT_EQ(f.seq, 5u);
  EXPECT_EQ(f.matched, 5u);
  EXPECT_EQ(f.missing, (std::vector<int>{2}));
  EXPECT_EQ(f.missing_last_seq, (std::vector<int64_t>{4}));
  EXPECT_EQ(f.culprits, (std::vector<int>{2}));
  EXPECT_EQ(d.culprit, 2);
  EXPECT_EQ(d.watchdog_ranks, (std::vector<int>{0, 1, 3}));
  const std::string text = format_flight_diagnosis(d);
  EXPECT_EQ(text,
            "partrain: flight recorder: dumps of ranks 0-3; the collective watchdog fired on "
            "ranks 0,1,3\n"
            "partrain: diagnosis: dp 0 seq 5: missing ranks: rank 2 never issued "
            "all_reduce of 4.00 KiB float (started on ranks 0,1,3; rank 2's last was seq 4 on "
            "this communicator)\n"
            "partrain: waits: rank 0 waits on rank 2 in all_reduce of 4.00 KiB float on "
            "dp 0 seq 5 (rank 2 never entered it)\n"
            "partrain: waits: rank 1 waits on rank 2 in all_reduce of 4.00 KiB float on "
            "dp 0 seq 5 (rank 2 never entered it)\n"
            "partrain: waits: rank 3 waits on rank 2 in all_reduce of 4.00 KiB float on "
            "dp 0 seq 5 (rank 2 never entered it)\n"
            "partrain: culprit: rank 2 (missing_ranks at dp 0 seq 5): hung outside "
            "any collective: it had entered none when it dumped (its last: all_reduce of "
            "4.00 KiB float on dp 0 seq 4, completed); it never entered all_reduce "
            "of 4.00 KiB float on dp 0 seq 5, where ranks 0,1,3 wait\n");
}

// --inject desync:rank=1: an all_gather where the others all-reduce, at world seq 3.
TEST(FlightDiagnosis, OpMismatchNamesTheMinorityRankAndSeq) {
  std::vector<FlightDump> dumps = healthy_run(2);
  for (FlightDump& dump : dumps) {
    for (uint64_t seq = 0; seq < 3; ++seq)
      dump.entries.push_back(op("world", seq, "all_reduce", 4));
    const bool odd = dump.rank == 1;
    dump.entries.push_back(
        op("world", 3, odd ? "all_gather" : "all_reduce", odd ? 16 : 4, CollectiveState::kStarted));
    dump.trigger = DumpTrigger::kWatchdog;
  }
  FlightDiagnosis d = diagnose_flight_dumps(dumps);
  ASSERT_EQ(d.findings.size(), 2u);
  const CollectiveFinding& f = d.findings[0];  // problems come first
  EXPECT_EQ(f.kind, FindingKind::kOpMismatch);
  EXPECT_EQ(f.comm_id, "world");
  EXPECT_EQ(f.seq, 3u);
  EXPECT_EQ(f.culprits, (std::vector<int>{1}));
  EXPECT_EQ(d.findings[1].kind, FindingKind::kMatched);  // the dp communicator was fine
  EXPECT_EQ(d.culprit, 1);
  EXPECT_EQ(diagnosis_headline(d),
            "world seq 3: op mismatch: ranks 0,2,3 issued all_reduce of 4 B float; rank 1 "
            "issued all_gather of 16 B float");
  EXPECT_NE(
      format_flight_diagnosis(d).find("partrain: culprit: rank 1 (op_mismatch at world seq 3)"),
      std::string::npos);
}

TEST(FlightDiagnosis, SizeMismatchNamesTheMinorityRank) {
  std::vector<FlightDump> dumps = healthy_run(3);
  for (FlightDump& dump : dumps) {
    dump.entries.push_back(
        op(kDp, 3, "all_reduce", dump.rank == 3 ? 8192 : 4096, CollectiveState::kFailed));
    dump.trigger = DumpTrigger::kCollectiveError;
  }
  FlightDiagnosis d = diagnose_flight_dumps(dumps);
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].kind, FindingKind::kSizeMismatch);
  EXPECT_EQ(d.findings[0].seq, 3u);
  EXPECT_EQ(d.culprit, 3);
  EXPECT_EQ(d.error_ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(diagnosis_headline(d),
            "dp 0 seq 3: size mismatch: ranks 0-2 issued all_reduce of 4.00 KiB "
            "float; rank 3 issued all_reduce of 8.00 KiB float");
}

// all_to_all_single with split sizes: each rank's buffer is its own, and sizes that differ are no
// mismatch (a mixture of experts' dispatch is uneven by nature).
TEST(FlightDiagnosis, UnevenAllToAllIsNoSizeMismatch) {
  std::vector<FlightDump> dumps = healthy_run(3);
  for (FlightDump& dump : dumps) {
    dump.entries.push_back(op(kDp, 3, "all_to_all", 1024 * static_cast<uint64_t>(dump.rank + 1)));
    dump.total_recorded = 4;
  }
  FlightDiagnosis d = diagnose_flight_dumps(dumps);
  for (const auto& finding : d.findings) {
    EXPECT_NE(finding.kind, FindingKind::kSizeMismatch) << diagnosis_headline(d);
  }
  EXPECT_FALSE(d.culprit.has_value()) << diagnosis_headline(d);
}

// Two ranks against two: the group holding the lowest rank is the reference.
TEST(FlightDiagnosis, TiesBlameTheGroupWithoutTheLowestRank) {
  std::vector<FlightDump> dumps = healthy_run(0);
  for (FlightDump& dump : dumps) {
    dump.entries.push_back(
        op(kDp, 0, dump.rank >= 2 ? "broadcast" : "all_reduce", 4, CollectiveState::kStarted));
  }
  FlightDiagnosis d = diagnose_flight_dumps(dumps);
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].culprits, (std::vector<int>{2, 3}));
  EXPECT_FALSE(d.culprit.has_value());  // two ranks blamed: no single culprit
}

// Two ranks (a 2-stage pipeline's world): no majority, but the world has carried an all_reduce at
// each of its three seqs before, so rank 0's all_gather is the one that deviates.
TEST(FlightDiagnosis, TwoRanksAtOddsBlameTheOneThatLeftTheCommunicatorsHabit) {
  std::vector<FlightDump> dumps(2);
  for (int rank = 0; rank < 2; ++rank) {
    FlightDump& dump = dumps[static_cast<size_t>(rank)];
    dump.rank = rank;
    dump.trigger = DumpTrigger::kWatchdog;
    for (uint64_t seq = 0; seq < 3; ++seq) {
      dump.entries.push_back(
          op("world", seq, "all_reduce", 4, CollectiveState::kCompleted, {0, 1}));
    }
    dump.entries.push_back(op("world", 3, rank == 0 ? "all_gather" : "all_reduce",
                              rank == 0 ? 8 : 4, CollectiveState::kStarted, {0, 1}));
  }
  FlightDiagnosis d = diagnose_flight_dumps(dumps);
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].kind, FindingKind::kOpMismatch);
  EXPECT_EQ(d.culprit, 0);
  // Without that history, the tie goes against the group without the lowest rank.
  for (FlightDump& dump : dumps) dump.entries.erase(dump.entries.begin(), dump.entries.begin() + 3);
  EXPECT_EQ(diagnose_flight_dumps(dumps).culprit, 1);
}

TEST(FlightDiagnosis, AllEnteredButUnfinishedIsNotBlamedOnARank) {
  std::vector<FlightDump> dumps = healthy_run(2);
  for (FlightDump& dump : dumps) {
    dump.entries.push_back(op(kDp, 2, "all_reduce", 4096, CollectiveState::kStarted));
  }
  FlightDiagnosis d = diagnose_flight_dumps(dumps);
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].kind, FindingKind::kMatched);
  EXPECT_TRUE(d.findings[0].unfinished);
  EXPECT_FALSE(d.culprit.has_value());
  EXPECT_NE(diagnosis_headline(d).find("issued by ranks 0-3 but not completed (started on ranks "
                                       "0-3): the transport failed or stalled"),
            std::string::npos)
      << diagnosis_headline(d);
}

TEST(FlightDiagnosis, RankWithNothingOnTheCommunicatorIsMissingFromSeqZero) {
  std::vector<FlightDump> dumps = healthy_run(0);
  for (int rank : {0, 1, 2}) {
    dumps[static_cast<size_t>(rank)].entries.push_back(
        op(kDp, 0, "all_reduce", 4, CollectiveState::kStarted));
  }
  FlightDiagnosis d = diagnose_flight_dumps(dumps);
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].kind, FindingKind::kMissingRanks);
  EXPECT_EQ(d.findings[0].missing_last_seq, (std::vector<int64_t>{-1}));
  EXPECT_EQ(d.culprit, 3);
  EXPECT_NE(diagnosis_headline(d).find("rank 3 issued none on this communicator"),
            std::string::npos)
      << diagnosis_headline(d);
}

// Rank 0's ring evicted seqs 0-2: only seqs every rank still holds are judged, and an evicted seq
// is not "missing".
TEST(FlightDiagnosis, WrappedRingsAreJudgedOnTheCommonWindow) {
  std::vector<FlightDump> dumps = healthy_run(6);
  dumps[0].entries.erase(dumps[0].entries.begin(), dumps[0].entries.begin() + 3);
  dumps[0].total_recorded = 6;
  FlightDiagnosis d = diagnose_flight_dumps(dumps);
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].kind, FindingKind::kMatched);
  EXPECT_EQ(d.findings[0].matched, 3u);  // seqs 3-5
}

TEST(FlightDiagnosis, RanksWithoutADumpAreUnknownNotMissing) {
  std::vector<FlightDump> dumps = healthy_run(2);
  dumps.pop_back();  // rank 3: on another node, or SIGKILLed
  for (FlightDump& dump : dumps) {
    dump.entries.push_back(op(kDp, 2, "all_reduce", 4096, CollectiveState::kStarted));
  }
  FlightDiagnosis d = diagnose_flight_dumps(dumps);
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].undumped, (std::vector<int>{3}));
  EXPECT_TRUE(d.findings[0].missing.empty());
  // Rank 3 may well be the one that never issued seq 2: the transport is not blamed.
  EXPECT_EQ(diagnosis_headline(d),
            "dp 0 seq 2: all_reduce of 4.00 KiB float issued by ranks 0-2 but not "
            "completed (started on ranks 0-2)");
  EXPECT_NE(format_flight_diagnosis(d).find("partrain: diagnosis: nothing is known of rank 3"),
            std::string::npos);
  // Under `partrain trace` of a program that starts its ranks itself, a rank still running when
  // the others timed out made no dump because nothing asked it: neither on another node nor
  // killed, as the text had it.
  EXPECT_NE(format_flight_diagnosis(d).find("or started by the traced program rather than by "
                                            "partrain, which then cannot ask it for one"),
            std::string::npos)
      << format_flight_diagnosis(d);
}

TEST(FlightDiagnosis, OneRankCommunicatorsAreLeftOut) {
  std::vector<FlightDump> dumps = healthy_run(1);
  dumps[0].entries.push_back(
      op("world/split0/color0", 0, "all_reduce", 4, CollectiveState::kStarted, {0}));
  FlightDiagnosis d = diagnose_flight_dumps(dumps);
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].comm_id, kDp);
}

constexpr const char* kPp = "world/split2/color0/split0/color0";

// A transfer on the pipeline channel between world ranks 2 and 3 (comm ranks 0 and 1).
CollectiveEvent transfer(std::string_view name, uint64_t seq, int peer, uint64_t bytes,
                         CollectiveState state = CollectiveState::kCompleted) {
  CollectiveEvent e = op(kPp, seq, name, bytes, state, {2, 3});
  e.peer = peer;
  return e;
}

// --inject hang:rank=3 on a pipeline: rank 2's send seq 2 to rank 3 waits for a recv rank 3
// never posts; matched channels are not listed.
TEST(FlightDiagnosis, TransfersPairSendsWithRecvsPerChannel) {
  std::vector<FlightDump> dumps(2);
  dumps[0].rank = 2;
  dumps[0].trigger = DumpTrigger::kWatchdog;
  dumps[1].rank = 3;
  dumps[1].trigger = DumpTrigger::kSignal;
  for (uint64_t seq = 0; seq < 2; ++seq) {
    dumps[0].entries.push_back(transfer("send", seq, 1, 8192));
    dumps[1].entries.push_back(transfer("recv", seq, 0, 8192));
    dumps[1].entries.push_back(transfer("send", seq, 0, 8192));  // gradients back: matched
    dumps[0].entries.push_back(transfer("recv", seq, 1, 8192));
  }
  dumps[0].entries.push_back(transfer("send", 2, 1, 8192, CollectiveState::kStarted));
  for (FlightDump& dump : dumps) dump.total_recorded = dump.entries.size();
  FlightDiagnosis d = diagnose_flight_dumps(dumps);
  ASSERT_EQ(d.findings.size(), 1u) << format_flight_diagnosis(d);
  const CollectiveFinding& f = d.findings[0];
  EXPECT_EQ(f.kind, FindingKind::kMissingRanks);
  EXPECT_EQ(f.sender, 2);
  EXPECT_EQ(f.receiver, 3);
  EXPECT_EQ(f.seq, 2u);
  EXPECT_EQ(f.matched, 2u);
  EXPECT_EQ(d.culprit, 3);
  EXPECT_EQ(diagnosis_headline(d),
            "send 2->3 on pp 0 activations seq 2: missing ranks: rank 3 never "
            "posted the matching recv (send of 8.00 KiB float started on rank 2; rank 3's last "
            "recv on this channel was seq 1)");
  EXPECT_NE(format_flight_diagnosis(d).find("partrain: culprit: rank 3 (missing_ranks at send "
                                            "2->3 on pp 0 activations seq 2)"),
            std::string::npos)
      << format_flight_diagnosis(d);
}

// A tagged transfer's seq carries its tag (T * 2^32 + n, profiler/p2p_seq.h): each tag is a
// channel of its own. Rank 2 sent tag 5 then tag 9, rank 3 received tag 9 then tag 5, all
// completed: no finding (matched per position, they had been two size mismatches). Then rank 2
// sends with tag 1 while rank 3 waits in a recv of tag 2: each is missing its counterpart, and
// the diagnosis says the two differ only by tag.
uint64_t tagged(uint32_t tag, uint64_t n) { return (uint64_t{tag} << 32) | n; }

TEST(FlightDiagnosis, TransfersArePairedPerTagAndATagMismatchIsSaid) {
  std::vector<FlightDump> dumps(2);
  dumps[0].rank = 2;
  dumps[0].trigger = DumpTrigger::kWatchdog;
  dumps[1].rank = 3;
  dumps[1].trigger = DumpTrigger::kWatchdog;
  dumps[0].entries.push_back(transfer("send", tagged(5, 0), 1, 28));
  dumps[0].entries.push_back(transfer("send", tagged(9, 0), 1, 12));
  dumps[1].entries.push_back(transfer("recv", tagged(9, 0), 0, 12));
  dumps[1].entries.push_back(transfer("recv", tagged(5, 0), 0, 28));
  EXPECT_TRUE(diagnose_flight_dumps(dumps).findings.empty())
      << format_flight_diagnosis(diagnose_flight_dumps(dumps));

  dumps[0].entries.push_back(transfer("send", tagged(1, 0), 1, 8, CollectiveState::kStarted));
  dumps[1].entries.push_back(transfer("recv", tagged(2, 0), 0, 8, CollectiveState::kStarted));
  FlightDiagnosis d = diagnose_flight_dumps(dumps);
  ASSERT_EQ(d.findings.size(), 2u) << format_flight_diagnosis(d);
  const std::string text = format_flight_diagnosis(d);
  EXPECT_NE(text.find("send 2->3 on pp 0 activations seq 0 (tag 1): missing ranks: rank 3 never "
                      "posted the matching recv (send of 8 B float started on rank 2; rank 3 "
                      "posted no recv on this channel; rank 3 has a recv pending between the "
                      "two with tag 2, this send has tag 1: they differ only by tag)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("send 2->3 on pp 0 activations seq 0 (tag 2): missing ranks: rank 2 never "
                      "posted the matching send"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rank 2 has a send pending between the two with tag 1, this recv has "
                      "tag 2: they differ only by tag"),
            std::string::npos)
      << text;
}

TEST(FlightDiagnosis, TransferSizeMismatchAndUnknownPeers) {
  std::vector<FlightDump> dumps(2);
  dumps[0].rank = 2;
  dumps[1].rank = 3;
  dumps[0].entries.push_back(transfer("send", 0, 1, 8192, CollectiveState::kFailed));
  dumps[1].entries.push_back(transfer("recv", 0, 0, 4096, CollectiveState::kFailed));
  FlightDiagnosis d = diagnose_flight_dumps(dumps);
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].kind, FindingKind::kSizeMismatch);
  EXPECT_FALSE(d.culprit.has_value());  // two sides, no majority
  EXPECT_EQ(diagnosis_headline(d),
            "send 2->3 on pp 0 activations seq 0: size mismatch: rank 2 sends "
            "8.00 KiB float, rank 3 receives 4.00 KiB float");
  // Without the receiver's dump, a pending send blames nobody.
  dumps.pop_back();
  dumps[0].entries[0].state = CollectiveState::kStarted;
  EXPECT_TRUE(diagnose_flight_dumps(dumps).findings.empty());
}

}  // namespace
}  // namespace partrain::launch
