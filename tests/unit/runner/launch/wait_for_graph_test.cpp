// The diagnosis across communicators, fed made-up records of a 2 x 2 mesh (tensor-parallel pairs
// {0, 1} and {2, 3}, data-parallel pairs {0, 2} and {1, 3}) and of a pipeline: the rank at the
// root of who-waits-on-whom is the culprit, whatever communicator its peers wait in, and what
// the launcher saw of its process (stopped, stuck in the kernel, ended) says what it is.
#include "runner/launch/wait_for_graph.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "runner/launch/flight_diagnosis.h"
#include "runner/launch/wait_for_text.h"

namespace partrain::launch {
namespace {

using profiler::CollectiveEvent;
using profiler::CollectiveState;
using profiler::DumpTrigger;
using profiler::FlightDump;

constexpr const char* kTp0 = "world/split0/color0";  // ranks 0, 1
constexpr const char* kTp1 = "world/split0/color1";  // ranks 2, 3
constexpr const char* kDp0 = "world/split1/color0";  // ranks 0, 2
constexpr const char* kDp1 = "world/split1/color1";  // ranks 1, 3
constexpr int64_t kSecond = 1'000'000'000;

struct Mesh {
  std::vector<FlightDump> dumps = std::vector<FlightDump>(4);
  Mesh() {
    for (int rank = 0; rank < 4; ++rank) {
      dumps[static_cast<size_t>(rank)].rank = rank;
      dumps[static_cast<size_t>(rank)].trigger = DumpTrigger::kSignal;
      dumps[static_cast<size_t>(rank)].dumped_ns = 10 * kSecond;
    }
  }
  // An operation of `rank` at `t` seconds: completed 1 ms later, or left in `state`.
  void add(int rank, const char* comm, std::vector<int> group, uint64_t seq, double t,
           CollectiveState state = CollectiveState::kCompleted,
           std::string_view name = "all_reduce", int peer = -1) {
    CollectiveEvent e;
    e.comm_id = comm;
    e.seq = seq;
    e.op = name;
    e.dtype = "float";
    e.bytes = 4096;
    e.count = 1024;
    e.group_ranks = std::move(group);
    e.peer = peer;
    e.enqueue_ns = e.start_ns = static_cast<int64_t>(t * kSecond);
    e.state = state;
    if (state == CollectiveState::kCompleted) e.end_ns = e.start_ns + 1'000'000;
    FlightDump& dump = dumps[static_cast<size_t>(rank)];
    dump.entries.push_back(e);
    dump.total_recorded = dump.entries.size();
  }
  void watchdog(int rank) { dumps[static_cast<size_t>(rank)].trigger = DumpTrigger::kWatchdog; }
};

// Step 0 done everywhere: one tp all_reduce per pair, one dp all_reduce per pair, at ~1 s.
Mesh healthy_step() {
  Mesh m;
  for (int rank : {0, 1}) m.add(rank, kTp0, {0, 1}, 0, 1.0);
  for (int rank : {2, 3}) m.add(rank, kTp1, {2, 3}, 0, 1.0);
  for (int rank : {0, 2}) m.add(rank, kDp0, {0, 2}, 0, 1.1);
  for (int rank : {1, 3}) m.add(rank, kDp1, {1, 3}, 0, 1.1);
  return m;
}

// Rank 0 enters nothing of step 1: rank 1 waits in the tp all_reduce, rank 2 in the dp one
// (after its tp pair's step-1 all_reduce with rank 3), rank 3 in the other dp pair.
Mesh rank0_stuck_before_step1() {
  Mesh m = healthy_step();
  m.add(1, kTp0, {0, 1}, 1, 7.5, CollectiveState::kStarted);
  m.add(2, kTp1, {2, 3}, 1, 1.5);
  m.add(3, kTp1, {2, 3}, 1, 1.5);
  m.add(2, kDp0, {0, 2}, 1, 7.6, CollectiveState::kStarted);
  m.add(3, kDp1, {1, 3}, 1, 7.6, CollectiveState::kStarted);
  return m;
}

// What the launcher saw of `n` ranks' processes: nothing unusual, until a test says otherwise.
std::vector<RankProcess> processes_of(int n) {
  std::vector<RankProcess> processes(static_cast<size_t>(n));
  for (int rank = 0; rank < n; ++rank) processes[static_cast<size_t>(rank)].rank = rank;
  return processes;
}

// The reproduction: rank 0 hangs at step 1. Its tp peer waits in the tp all_reduce, its
// dp partner in the dp one, and rank 3 waits in the other dp pair on rank 1, which waits itself.
// Each communicator alone blames a different rank (0 twice, 1 once); the relation has one root.
TEST(WaitForGraph, ATensorParallelWaitLeadsThroughToTheHungDataParallelPartner) {
  Mesh m = rank0_stuck_before_step1();
  for (int rank : {1, 2, 3}) m.watchdog(rank);
  FlightDiagnosis d = diagnose_flight_dumps(m.dumps);
  ASSERT_EQ(d.culprit, 0) << format_flight_diagnosis(d);
  ASSERT_EQ(d.waits.roots.size(), 1u);
  const WaitRoot& root = d.waits.roots[0];
  EXPECT_EQ(root.kind, RootKind::kHung);
  EXPECT_EQ(root.edges_in.size(), 2u);  // ranks 1 (tp) and 2 (dp)
  EXPECT_EQ(root.through, (std::vector<int>{3}));
  EXPECT_EQ(root.idle_ns, 10 * kSecond - (1100 * 1'000'000 + 1'000'000));
  const std::string text = format_flight_diagnosis(d);
  EXPECT_NE(text.find("partrain: waits: rank 3 waits on rank 1 in all_reduce of 4.00 KiB float "
                      "on dp 1 seq 1 (rank 1 never entered it)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rank 1 never issued all_reduce of 4.00 KiB float (started on rank 3; "
                      "rank 1's last was seq 0 on this communicator); rank 1 waits itself, on "
                      "rank 0 in all_reduce of 4.00 KiB float on tp 0 seq 1"),
            std::string::npos)
      << text;
  EXPECT_EQ(diagnosis_statement(d),
            "rank 0 (missing_ranks at tp 0 seq 1): hung outside any collective: it "
            "had entered none for 8.9 s when it dumped (its last: all_reduce of 4.00 KiB float on "
            "dp 0 seq 0, completed); it never entered all_reduce of 4.00 KiB float "
            "on tp 0 seq 1, where rank 1 waits; it never entered all_reduce of "
            "4.00 KiB float on dp 0 seq 1, where rank 2 waits; rank 3 waits on it "
            "through others");
}

// Rank 2 recorded nothing while rank 0 waits for it in the first all_reduce: the statement says
// it never reached its first collective, not that it hung (a slow start reads the same in the
// records), and what its process was doing.
TEST(WaitForGraph, ARankWithNoRecordNeverReachedItsFirstCollective) {
  Mesh m;
  m.add(0, kDp0, {0, 2}, 0, 1.0, CollectiveState::kStarted);
  m.watchdog(0);
  std::vector<RankProcess> processes = processes_of(4);
  processes[2].at_failure = {ProcessCondition::kRunning, 'R', ""};
  FlightDiagnosis d = diagnose_flight_dumps(m.dumps, processes);
  ASSERT_EQ(d.culprit, 2) << format_flight_diagnosis(d);
  EXPECT_EQ(d.waits.roots[0].kind, RootKind::kHung);
  const std::string statement = diagnosis_statement(d);
  EXPECT_NE(statement.find("rank 2 (missing_ranks at dp 0 seq 0): it had recorded no operation: "
                           "it never reached its first collective (hung, or still starting; its "
                           "process was running (state R) when the run failed)"),
            std::string::npos)
      << statement;
  // Sleeping (a Python time.sleep) is said as such, not as "running (state S)".
  processes[2].at_failure = {ProcessCondition::kRunning, 'S', ""};
  const std::string sleeping = diagnosis_statement(diagnose_flight_dumps(m.dumps, processes));
  EXPECT_NE(sleeping.find("its process was alive, sleeping (state S: waiting on a timer, a lock "
                          "or a read, not held by the kernel) when the run failed"),
            std::string::npos)
      << sleeping;
}

// The same hang as a SIGSTOP: the launcher saw rank 0 stopped, then resumed it to take SIGTERM;
// what it recorded after the resume (it went on into the tp all_reduce) is not evidence.
TEST(WaitForGraph, AStoppedRankIsNamedAsStoppedAndItsRecordsAfterTheResumeAreSetAside) {
  Mesh m = rank0_stuck_before_step1();
  m.add(0, kTp0, {0, 1}, 1, 9.5, CollectiveState::kFailed);  // after the resume at 9.4 s
  std::vector<RankProcess> processes = processes_of(4);
  processes[0].at_failure = {ProcessCondition::kStopped, 'T', ""};
  processes[0].resumed_ns = 9.4 * kSecond;
  processes[1].ended_before_stop = true;  // its watchdog fired first
  processes[1].exit = ExitStatus{false, 124};
  for (int rank : {1, 2, 3}) m.watchdog(rank);
  FlightDiagnosis d = diagnose_flight_dumps(m.dumps, processes);
  ASSERT_EQ(d.culprit, 0) << format_flight_diagnosis(d);
  EXPECT_EQ(d.waits.roots[0].kind, RootKind::kStopped);
  const std::string statement = diagnosis_statement(d);
  EXPECT_EQ(statement.substr(0, statement.find(';')),
            "rank 0 (stopped at tp 0 seq 1): its process was stopped (state T: "
            "SIGSTOP or SIGTSTP) when the run failed")
      << statement;
  EXPECT_NE(statement.find("it never entered all_reduce of 4.00 KiB float on tp 0 "
                           "seq 1, where rank 1 waits"),
            std::string::npos)
      << statement;
  // Without the resume time, its late tp all_reduce would read as entered.
  processes[0].resumed_ns = 0;
  EXPECT_EQ(format_flight_diagnosis(diagnose_flight_dumps(m.dumps, processes))
                .find("never entered all_reduce of 4.00 KiB float on tp 0 seq 1"),
            std::string::npos);
}

// A pipeline: stage 1 (rank 1) waits on a recv from stage 0 (rank 0), whose process is stuck in
// the kernel; rank 2, stage 1's dp partner, waits for rank 1 in the dp all_reduce.
TEST(WaitForGraph, APipelineRecvLeadsToASenderStuckInTheKernel) {
  Mesh m;
  const char* pp = "world/split2/color0";
  m.add(0, pp, {0, 1}, 0, 1.0, CollectiveState::kCompleted, "send", 1);
  m.add(1, pp, {0, 1}, 0, 1.0, CollectiveState::kCompleted, "recv", 0);
  m.add(1, pp, {0, 1}, 1, 7.0, CollectiveState::kStarted, "recv", 0);
  m.add(2, "world/split1/color1", {1, 2}, 0, 7.2, CollectiveState::kStarted);
  m.dumps.pop_back();  // rank 3 took no part
  std::vector<RankProcess> processes = processes_of(3);
  processes[0].at_failure = {ProcessCondition::kUninterruptible, 'D', "nfs_wait_bit_killable"};
  FlightDiagnosis d = diagnose_flight_dumps(m.dumps, processes);
  ASSERT_EQ(d.culprit, 0) << format_flight_diagnosis(d);
  EXPECT_EQ(d.waits.roots[0].kind, RootKind::kUninterruptible);
  EXPECT_EQ(d.waits.roots[0].through, (std::vector<int>{2}));
  EXPECT_NE(diagnosis_statement(d).find(
                "(uninterruptible at send 0->1 on pp 0 seq 1): its process was "
                "stuck in the kernel (state D, waiting in nfs_wait_bit_killable"),
            std::string::npos)
      << diagnosis_statement(d);
  EXPECT_NE(diagnosis_statement(d).find("it never posted the send matching rank 1's recv of "
                                        "4.00 KiB float from rank 0 on pp 0 seq 1"),
            std::string::npos)
      << diagnosis_statement(d);
}

// Rank 0 receives from any source (dist.recv without src) on the 3-rank world: rank 1 sent it
// one tensor and then hung in compute, and rank 2 waits on rank 1 in an all_reduce of their own.
// The recv waits on both possible senders, and the relation leads to rank 1. An any-source recv
// used to wait on nobody: rank 0's wait was left out of the diagnosis.
TEST(WaitForGraph, ARecvFromAnySourceWaitsOnEveryPossibleSender) {
  Mesh m;
  const char* world = "default_pg:0";
  m.add(1, world, {0, 1, 2}, 0, 1.0, CollectiveState::kCompleted, "send", 0);
  m.add(0, world, {0, 1, 2}, 0, 1.0, CollectiveState::kCompleted, "recv", 1);
  m.add(0, world, {0, 1, 2}, 0, 7.0, CollectiveState::kStarted, "recv", -1);
  m.add(2, "world/split1/color1", {1, 2}, 0, 7.2, CollectiveState::kStarted);
  m.dumps.pop_back();  // three ranks
  FlightDiagnosis d = diagnose_flight_dumps(m.dumps, processes_of(3));
  ASSERT_EQ(d.culprit, 1) << format_flight_diagnosis(d);
  std::vector<std::pair<int, int64_t>> from_rank0;  // awaited, its last send to rank 0
  for (const WaitEdge& edge : d.waits.edges) {
    if (edge.waiter != 0) continue;
    EXPECT_EQ(edge.reason, WaitReason::kNeverEntered);
    from_rank0.emplace_back(edge.awaited, edge.awaited_last_seq);
  }
  EXPECT_EQ(from_rank0, (std::vector<std::pair<int, int64_t>>{{1, 0}, {2, -1}}));
  const std::string waits = fmt::format("{}", fmt::join(describe_waits(d.waits), "\n"));
  EXPECT_NE(waits.find("rank 0 waits on rank 2 in recv of 4.00 KiB float from any rank on "),
            std::string::npos)
      << waits;
  EXPECT_EQ(waits.find("rank -1"), std::string::npos) << waits;
  EXPECT_NE(diagnosis_statement(d).find("it never posted the send matching rank 0's recv of "
                                        "4.00 KiB float from any rank on "),
            std::string::npos)
      << diagnosis_statement(d);
}

// Everyone entered the dp all_reduce, and it did not finish: rank 2's process is stopped inside
// it. Without the launcher's view it is the transport; with it, rank 2.
TEST(WaitForGraph, EveryoneEnteredButAStoppedMemberHoldsIt) {
  Mesh m = healthy_step();
  for (int rank : {0, 2}) m.add(rank, kDp0, {0, 2}, 1, 7.0, CollectiveState::kStarted);
  m.watchdog(0);
  FlightDiagnosis blind = diagnose_flight_dumps(m.dumps);
  EXPECT_FALSE(blind.culprit.has_value());
  EXPECT_NE(diagnosis_headline(blind).find("the transport failed or stalled"), std::string::npos);
  std::vector<RankProcess> processes = processes_of(4);
  processes[2].at_failure = {ProcessCondition::kStopped, 'T', ""};
  FlightDiagnosis d = diagnose_flight_dumps(m.dumps, processes);
  ASSERT_EQ(d.culprit, 2) << format_flight_diagnosis(d);
  EXPECT_NE(diagnosis_headline(d).find("held by the process of rank 2"), std::string::npos)
      << diagnosis_headline(d);
  EXPECT_NE(diagnosis_statement(d).find("it entered all_reduce of 4.00 KiB float on "
                                        "dp 0 seq 1 but never finished it; rank 0 "
                                        "waits there"),
            std::string::npos)
      << diagnosis_statement(d);
}

// Everyone entered, nothing completed in time, and the first watchdog to fire ended its rank
// with 124 before the launcher stopped the rest (which rank's fires first is a race, a loaded
// machine's torch job showed it): that exit followed from the wait and holds nobody.
TEST(WaitForGraph, TheRankWhoseWatchdogEndedItFirstHoldsNobody) {
  Mesh m = healthy_step();
  for (int rank : {0, 2}) m.add(rank, kDp0, {0, 2}, 1, 7.0, CollectiveState::kStarted);
  m.watchdog(2);
  std::vector<RankProcess> processes = processes_of(4);
  processes[2].ended_before_stop = true;
  processes[2].exit = ExitStatus{false, 124};
  FlightDiagnosis d = diagnose_flight_dumps(m.dumps, processes);
  EXPECT_FALSE(d.culprit.has_value()) << format_flight_diagnosis(d);
  EXPECT_TRUE(d.waits.edges.empty()) << format_flight_diagnosis(d);
  EXPECT_NE(diagnosis_headline(d).find("issued by ranks 0,2 but not completed (started on ranks "
                                       "0,2): the transport failed or stalled"),
            std::string::npos)
      << diagnosis_headline(d);
}

// A crash: rank 3 left no dump, ended by SIGABRT before the run was stopped. Rank 2 was still
// computing when the launcher stopped it (its last operation just before its dump), so it is a
// root too, a lesser one: the ended rank is the culprit.
TEST(WaitForGraph, AnEndedRankOutranksARankStoppedInTheMiddleOfItsWork) {
  Mesh m = healthy_step();
  m.add(1, kDp1, {1, 3}, 1, 2.0, CollectiveState::kFailed);
  m.add(0, kDp0, {0, 2}, 1, 9.99, CollectiveState::kStarted);  // rank 2 had not got there
  m.add(2, kTp1, {2, 3}, 1, 9.995);
  m.dumps.pop_back();
  m.dumps[1].trigger = DumpTrigger::kCollectiveError;
  std::vector<RankProcess> processes = processes_of(4);
  processes[3].ended_before_stop = true;
  processes[3].exit = ExitStatus{true, 6};
  FlightDiagnosis d = diagnose_flight_dumps(m.dumps, processes);
  ASSERT_EQ(d.culprit, 3) << format_flight_diagnosis(d);
  ASSERT_EQ(d.waits.roots.size(), 2u);
  EXPECT_EQ(d.waits.roots[0].kind, RootKind::kEnded);
  EXPECT_EQ(d.waits.roots[1].rank, 2);
  EXPECT_EQ(d.waits.roots[1].kind, RootKind::kBusy);
  EXPECT_NE(diagnosis_statement(d).find("its process was killed by signal 6 (SIGABRT) before "
                                        "the run was stopped; rank 1 waits on it in all_reduce"),
            std::string::npos)
      << diagnosis_statement(d);
}

// Two ranks idle alike, each waited on: nobody is singled out, and the text says where the
// waits lead.
TEST(WaitForGraph, TwoRootsOfOneKindNameNoCulprit) {
  Mesh m = healthy_step();
  m.add(1, kTp0, {0, 1}, 1, 7.0, CollectiveState::kStarted);
  m.add(2, kTp1, {2, 3}, 1, 7.0, CollectiveState::kStarted);
  FlightDiagnosis d = diagnose_flight_dumps(m.dumps);
  EXPECT_FALSE(d.culprit.has_value());
  ASSERT_EQ(d.waits.roots.size(), 2u);
  EXPECT_NE(format_flight_diagnosis(d).find("partrain: diagnosis: the waits lead to ranks 0,3, "
                                            "none alone at the root"),
            std::string::npos)
      << format_flight_diagnosis(d);
}

// Rank 0 waits in tp seq 1 for rank 1, which waits in dp seq 1 for rank 3, which waits in tp
// seq 1 for rank 2, which waits in dp seq 1 for rank 0: a cycle, no root.
TEST(WaitForGraph, WaitsInACycleAreADeadlockWithoutACulprit) {
  Mesh m = healthy_step();
  m.add(0, kTp0, {0, 1}, 1, 7.0, CollectiveState::kStarted);
  m.add(1, kDp1, {1, 3}, 1, 7.0, CollectiveState::kStarted);
  m.add(3, kTp1, {2, 3}, 1, 7.0, CollectiveState::kStarted);
  m.add(2, kDp0, {0, 2}, 1, 7.0, CollectiveState::kStarted);
  FlightDiagnosis d = diagnose_flight_dumps(m.dumps);
  EXPECT_FALSE(d.culprit.has_value());
  EXPECT_EQ(d.waits.deadlocked, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_NE(format_flight_diagnosis(d).find("ranks 0-3 wait on each other, none of them at the "
                                            "root"),
            std::string::npos);
  // The trace's statement (the collective_diagnosis stat analyze and top read) is the cycle, with
  // every wait, not the first communicator's "rank 1 never issued", which blames one side.
  const std::string statement = diagnosis_statement(d);
  EXPECT_EQ(statement.rfind("ranks 0-3 wait on each other, none of them at the root: the ranks "
                            "issue their collectives in different orders (rank 0 waits on rank 1",
                            0),
            0u)
      << statement;
  EXPECT_NE(statement.find("; rank 2 waits on rank 0"), std::string::npos) << statement;
  EXPECT_EQ(statement.find("never issued"), std::string::npos) << statement;
}

// A desync is its own cause: the minority of the mismatch, even if its watchdog ended it first.
TEST(WaitForGraph, AMismatchOutranksTheWaits) {
  Mesh m = healthy_step();
  for (int rank = 0; rank < 4; ++rank) {
    m.add(rank, "world", {0, 1, 2, 3}, 0, 7.0, CollectiveState::kStarted,
          rank == 1 ? "all_gather" : "all_reduce");
    m.watchdog(rank);
  }
  std::vector<RankProcess> processes = processes_of(4);
  processes[1].ended_before_stop = true;
  processes[1].exit = ExitStatus{false, 124};
  FlightDiagnosis d = diagnose_flight_dumps(m.dumps, processes);
  ASSERT_EQ(d.culprit, 1);
  EXPECT_EQ(diagnosis_statement(d).substr(0, 35), "rank 1 (op_mismatch at world seq 0)");
}

}  // namespace
}  // namespace partrain::launch
