// How a run ended, as analyze reads it from the run row and the stats: who failed first.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "analyzers/analysis_report.h"
#include "analyzers/restart_attempts.h"
#include "profiler/trace_open.h"
#include "profiler/trace_writer.h"
#include "tests/support/schema6_steps.h"
#include "tests/support/scratch_dir.h"

namespace partrain::analyzers {
namespace {

constexpr const char* kPeerGone =
    "File \"/job/train.py\", line 13, in <module> | File \"/venv/lib/python3.11/site-packages/"
    "torch/distributed/distributed_c10d.py\", line 6614, in barrier | RuntimeError: [gloo/"
    "transport/tcp/pair.cc:561] Connection closed by peer [127.0.0.1]:36070";
// gloo's peer loss raised from the autograd engine (DDP's allreduce hook), not a torch.distributed
// call: the text of a real 3-rank gloo job whose rank 1 raised or was SIGKILLed.
constexpr const char* kClosedInBackward =
    "File \"/job/plant.py\", line 47, in <module> | File \"/venv/lib/python3.11/site-packages/"
    "torch/autograd/graph.py\", line 1113, in _engine_run_backward | RuntimeError: [/__w/pytorch/"
    "pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:561] Connection closed by peer "
    "[127.0.0.1]:699. This is typically caused by a remote worker crashing.";
constexpr const char* kResetInBackward =
    "File \"/job/plant.py\", line 47, in <module> | File \"/venv/lib/python3.11/site-packages/"
    "torch/autograd/graph.py\", line 1113, in _engine_run_backward | RuntimeError: [/__w/pytorch/"
    "pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:545] Read error [127.0.0.1]:20355: "
    "Connection reset by peer.";
constexpr const char* kOwnError =
    "File \"/job/train.py\", line 10, in <module> | RuntimeError: boom on rank 1";

// A failed run traced under torchrun: no launcher said which rank failed, only the ranks'
// exceptions are in the trace.
// `schema_6`: the file made one of schema version 6 (steps without their attempt) before it is
// read.
RunOutcome outcome_of(const testing::ScratchDir& dir, std::vector<profiler::StatEvent> stats,
                      std::vector<profiler::StepEvent> steps = {}, bool schema_6 = false) {
  const auto path = dir.path() / "run.db";
  {
    auto writer = profiler::TraceWriter::create(path);
    EXPECT_TRUE(writer.is_ok()) << writer.status().message();
    (*writer)->append(profiler::RunInfo{"run-1", "torchrun train.py", "{}", 2, 1, 0});
    for (profiler::StatEvent& stat : stats) (*writer)->append(std::move(stat));
    for (profiler::StepEvent& step : steps) (*writer)->append(std::move(step));
    EXPECT_TRUE((*writer)->set_run_status(profiler::RunStatus::kFailed).is_ok());
  }
  if (schema_6) testing::make_schema_6(path);
  auto trace = profiler::open_trace(path);
  EXPECT_TRUE(trace.is_ok()) << trace.status().message();
  auto outcome = read_run_outcome(trace->db);
  EXPECT_TRUE(outcome.is_ok()) << outcome.status().message();
  return *outcome;
}

// Rank 0's exception rose out of a barrier its peer's exit broke; rank 1 raised in its own code:
// rank 1 failed first, though it is not the lowest rank.
TEST(RunOutcome, WithoutALauncherTheRankWhoseOwnCodeRaisedFailedFirst) {
  testing::ScratchDir dir;
  const RunOutcome outcome = outcome_of(
      dir, {{"rank_uncaught_exception", 0, 1, profiler::StatSeverity::kError, kPeerGone},
            {"rank_uncaught_exception", 1, 1, profiler::StatSeverity::kError, kOwnError}});
  ASSERT_TRUE(outcome.failing_rank);
  EXPECT_EQ(*outcome.failing_rank, 1);
  EXPECT_EQ(outcome.failing_exception, kOwnError);
  const std::vector<Finding> findings = run_outcome_findings(outcome);
  ASSERT_FALSE(findings.empty());
  const auto failed = std::find_if(findings.begin(), findings.end(),
                                   [](const Finding& f) { return f.kind == "rank_failed"; });
  ASSERT_NE(failed, findings.end());
  EXPECT_EQ(failed->rank, 1);
  EXPECT_NE(failed->evidence.find("rank 1 raised an uncaught exception (" + std::string(kOwnError)),
            std::string::npos)
      << failed->evidence;
  EXPECT_EQ(failed->evidence.find("launcher stopped the others"), std::string::npos);
}

// Every exception rose out of a collective (a real desync): the lowest rank.
TEST(RunOutcome, WhenEveryExceptionRoseInACollectiveTheLowestRank) {
  testing::ScratchDir dir;
  const RunOutcome outcome = outcome_of(
      dir, {{"rank_uncaught_exception", 3, 1, profiler::StatSeverity::kError, kPeerGone},
            {"rank_uncaught_exception", 2, 1, profiler::StatSeverity::kError, kPeerGone}});
  ASSERT_TRUE(outcome.failing_rank);
  EXPECT_EQ(*outcome.failing_rank, 2);
}

// The outcome's rank_failed finding; an empty one when there is none.
Finding rank_failed_of(const std::vector<Finding>& findings) {
  const auto failed = std::find_if(findings.begin(), findings.end(),
                                   [](const Finding& f) { return f.kind == "rank_failed"; });
  EXPECT_NE(failed, findings.end());
  return failed == findings.end() ? Finding() : *failed;
}

profiler::StatEvent unclean(int rank) {
  return {"collector_unclean_disconnects", rank, 1, profiler::StatSeverity::kInfo,
          "connections of the rank that ended without a goodbye"};
}

// The peers' gloo errors rose out of backward (DDP's hook), not a torch.distributed call: they
// are still the peer's failure reaching them, and rank 1's own exception came first.
TEST(RunOutcome, AConnectionClosedByThePeerOutsideTorchDistributedIsThePeersFailure) {
  testing::ScratchDir dir;
  const RunOutcome outcome = outcome_of(
      dir, {{"rank_uncaught_exception", 0, 1, profiler::StatSeverity::kError, kClosedInBackward},
            {"rank_uncaught_exception", 1, 1, profiler::StatSeverity::kError, kOwnError},
            {"rank_uncaught_exception", 2, 1, profiler::StatSeverity::kError, kClosedInBackward},
            unclean(0),
            unclean(2)});
  ASSERT_TRUE(outcome.failing_rank);
  EXPECT_EQ(*outcome.failing_rank, 1);
  EXPECT_EQ(outcome.failing_exception, kOwnError);
  const Finding failed = rank_failed_of(run_outcome_findings(outcome));
  EXPECT_EQ(failed.rank, 1);
  EXPECT_NE(failed.evidence.find("rank 1 raised an uncaught exception"), std::string::npos)
      << failed.evidence;
}

// Rank 1 was SIGKILLed: it raised nothing, its connection ended unclean, and the others' errors
// say their peer went away. Rank 1 failed first, not rank 0, the lowest to raise.
TEST(RunOutcome, ARankThatVanishedWithoutAnExceptionFailedFirstWhenTheOthersLostAPeer) {
  testing::ScratchDir dir;
  const RunOutcome outcome = outcome_of(
      dir, {{"rank_uncaught_exception", 0, 1, profiler::StatSeverity::kError, kClosedInBackward},
            {"rank_uncaught_exception", 2, 1, profiler::StatSeverity::kError, kResetInBackward},
            unclean(0),
            unclean(1),
            unclean(2)});
  ASSERT_TRUE(outcome.failing_rank);
  EXPECT_EQ(*outcome.failing_rank, 1);
  EXPECT_FALSE(outcome.failing_exception);
  const Finding failed = rank_failed_of(run_outcome_findings(outcome));
  EXPECT_EQ(failed.rank, 1);
  EXPECT_NE(failed.evidence.find("rank 1 ended without an uncaught exception"), std::string::npos)
      << failed.evidence;
  // Not only the OOM killer: torchrun stops a rank that hung while the others timed out.
  EXPECT_NE(failed.evidence.find("the launcher stopping it after the others failed, which is how "
                                 "a rank ends that hung"),
            std::string::npos)
      << failed.evidence;
  EXPECT_NE(failed.evidence.find("rank 0's: " + std::string(kClosedInBackward)), std::string::npos)
      << failed.evidence;
}

// A rank that vanished does not outrank one whose own code raised: that one's exception may
// have had the launcher stop the rest.
TEST(RunOutcome, ARanksOwnExceptionOutranksARankThatVanished) {
  testing::ScratchDir dir;
  EXPECT_EQ(
      outcome_of(
          dir, {{"rank_uncaught_exception", 2, 1, profiler::StatSeverity::kError, kOwnError},
                {"rank_uncaught_exception", 1, 1, profiler::StatSeverity::kError, kResetInBackward},
                unclean(0),
                unclean(2)})
          .failing_rank,
      2);
}

// gloo's errors in a rank that waited on a peer: its recv timed out, its peer closed the
// connection (the texts of real 2-rank gloo jobs, /tmp/explore-desync runs of 2026-11-30).
constexpr const char* kTimedOut =
    "File \"/job/job.py\", line 62, in <module> | File \"/venv/lib/python3.11/site-packages/"
    "torch/distributed/distributed_c10d.py\", line 4181, in all_reduce | RuntimeError: [/__w/"
    "pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting "
    "10000ms for recv operation to complete";
constexpr const char* kClosedInAllReduce =
    "File \"/job/job.py\", line 62, in <module> | File \"/venv/lib/python3.11/site-packages/"
    "torch/distributed/distributed_c10d.py\", line 4181, in all_reduce | RuntimeError: [/__w/"
    "pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:561] Connection closed by peer "
    "[127.0.0.1]:36070";

constexpr int64_t kSecond = 1'000'000'000;

// One rank's collective on a 2-rank group, `at_s` seconds into the run (which starts at 1 s).
profiler::CollectiveRecord op_of(
    int rank, const std::string& comm, uint64_t seq, double at_s, double for_s,
    profiler::CollectiveState state = profiler::CollectiveState::kCompleted) {
  profiler::CollectiveRecord r;
  r.world_rank = rank;
  r.event.comm_id = comm;
  r.event.seq = seq;
  r.event.op = "all_reduce";
  r.event.dtype = "float";
  r.event.count = 4096;
  r.event.bytes = 16384;
  r.event.rank = rank;
  r.event.group_ranks = {0, 1};
  r.event.enqueue_ns = r.event.start_ns = kSecond + static_cast<int64_t>(at_s * 1e9);
  r.event.end_ns = r.event.start_ns + static_cast<int64_t>(for_s * 1e9);
  r.event.state = state;
  return r;
}

// A 2-rank job: both ranks did all_reduce seq 5 of default_pg:0 by 15 s; rank 0 then failed in
// seq 6 after waiting from 15.2 s, plus `ops`. `failing_rank` and `exits` (per rank: exit code,
// else -signal) as `partrain launch` writes them; nullopt and {} as under torchrun.
RunOutcome waiting_run(const testing::ScratchDir& dir, std::optional<int> failing_rank,
                       std::vector<int> exits, std::vector<profiler::StatEvent> stats,
                       std::vector<profiler::CollectiveRecord> ops = {}) {
  const auto path = dir.path() / "run.db";
  {
    auto writer = profiler::TraceWriter::create(path);
    EXPECT_TRUE(writer.is_ok()) << writer.status().message();
    (*writer)->append(
        profiler::RunInfo{"run-1", "partrain launch -n 2 -- python job.py", "{}", 2, 1, kSecond});
    (*writer)->append(op_of(0, "default_pg:0", 5, 14.9, 0.1));
    (*writer)->append(op_of(1, "default_pg:0", 5, 14.9, 0.1));
    (*writer)->append(op_of(0, "default_pg:0", 6, 15.2, 2.5, profiler::CollectiveState::kFailed));
    for (profiler::CollectiveRecord& op : ops) (*writer)->append(op);
    for (size_t rank = 0; rank < exits.size(); ++rank) {
      profiler::RankInfo info;
      info.rank = static_cast<int32_t>(rank);
      info.host = "vm";
      info.exited = true;
      info.exit_code = exits[rank] >= 0 ? exits[rank] : 0;
      info.exit_signal = exits[rank] < 0 ? -exits[rank] : 0;
      (*writer)->append(info);
    }
    for (profiler::StatEvent& stat : stats) (*writer)->append(std::move(stat));
    EXPECT_TRUE((*writer)->set_run_status(profiler::RunStatus::kFailed, failing_rank).is_ok());
  }
  auto trace = profiler::open_trace(path);
  EXPECT_TRUE(trace.is_ok()) << trace.status().message();
  auto outcome = read_run_outcome(trace->db);
  EXPECT_TRUE(outcome.is_ok()) << outcome.status().message();
  return *outcome;
}

profiler::StatEvent exception_of(int rank, const char* text) {
  return {"rank_uncaught_exception", rank, 1, profiler::StatSeverity::kError, text};
}

// Under partrain launch rank 1 slept in its own code past gloo's timeout: rank 0 failed first,
// timing out in all_reduce seq 6, and the launcher then stopped rank 1. The launcher's failing
// rank only waited: rank_failed names rank 1, which never entered the op, as torchrun's trace
// does, and does not say the collectives rank 1 missed followed from rank 0's failure.
TEST(RunOutcome, ALaunchedRankThatTimedOutWaitingIsNotWhereToStartTheRankItWaitedOnIs) {
  testing::ScratchDir dir;
  const RunOutcome outcome =
      waiting_run(dir, 0, {1, -15}, {exception_of(0, kTimedOut), unclean(1)});
  EXPECT_EQ(outcome.failing_rank, 0);
  const Finding failed = rank_failed_of(run_outcome_findings(outcome));
  EXPECT_EQ(failed.rank, 1);
  EXPECT_NE(failed.evidence.find("rank 0 exited with code 1 first, on a peer's failure reaching "
                                 "it (" +
                                 std::string(kTimedOut)),
            std::string::npos)
      << failed.evidence;
  EXPECT_NE(failed.evidence.find("but rank 1 never entered all_reduce seq 6 of default_pg:0 "
                                 "(rank 0 waited in it from 15.2 s and failed at 17.7 s; rank "
                                 "1's last collective ended at 15.0 s): it raised nothing and "
                                 "had no collective in flight, and was stopped by signal 15 "
                                 "(SIGTERM) after rank 0 failed"),
            std::string::npos)
      << failed.evidence;
  EXPECT_EQ(failed.advice.rfind("start from rank 1:", 0), 0u) << failed.advice;
  EXPECT_EQ(failed.advice.find("follow from it"), std::string::npos) << failed.advice;
}

// Rank 1 returned from its training loop with exit code 0 at step 2; rank 0 then failed in its
// all_reduce on gloo's "Connection closed by peer". Rank 1's exit is the cause, with its time.
TEST(RunOutcome, ARankThatExitedZeroBeforeTheOpItsPeerExpectedIsNamed) {
  testing::ScratchDir dir;
  const RunOutcome outcome = waiting_run(dir, 0, {1, 0}, {exception_of(0, kClosedInAllReduce)});
  const Finding failed = rank_failed_of(run_outcome_findings(outcome));
  EXPECT_EQ(failed.rank, 1);
  EXPECT_NE(failed.evidence.find("but rank 1 exited (code 0) without entering all_reduce seq 6 "
                                 "of default_pg:0, which rank 0 still expected (rank 0 waited in "
                                 "it from 15.2 s and failed at 17.7 s; rank 1's last collective "
                                 "ended at 15.0 s)"),
            std::string::npos)
      << failed.evidence;
  EXPECT_EQ(failed.advice.rfind("start from rank 1: why it ended before the others", 0), 0u)
      << failed.advice;

  // The same job under torchrun: no exits in the trace, rank 1 raised nothing and said goodbye.
  testing::ScratchDir torchrun;
  const RunOutcome traced =
      waiting_run(torchrun, std::nullopt, {}, {exception_of(0, kClosedInAllReduce)});
  const Finding named = rank_failed_of(run_outcome_findings(traced));
  EXPECT_EQ(named.rank, 1);
  EXPECT_NE(named.evidence.find("rank 0's uncaught exception says a peer's failure reached it"),
            std::string::npos)
      << named.evidence;
  EXPECT_NE(named.evidence.find("but rank 1 ended cleanly (no exception, a goodbye to the "
                                "collector) without entering all_reduce seq 6 of default_pg:0, "
                                "which rank 0 still expected"),
            std::string::npos)
      << named.evidence;
}

// Rank 1 returned with exit code 0 at step 2 without destroying its gloo group, and gloo's worker
// thread then aborted it in the interpreter's shutdown (SIGABRT), as torch 2.15 does under load
// (the flake of TorchBlame.ARankThatExitedZeroEarlyIsNamedUnderLaunchAndUnderTorchrun, 1 run in
// 25): its atexit had run, so it ended its program before the op rank 0 still expected, under
// torchrun (no exits, no goodbye) and under launch (rank 1's abort the first failure). Without
// the at-exit stat, nothing says its program ended: it vanished, as before.
TEST(RunOutcome, ARankStoppedInShutdownAfterItsProgramEndedEarlyIsSaidToHaveEnded) {
  using ::testing::HasSubstr;
  constexpr const char* kAtExit = "gloo group default_pg:0 never destroyed";
  const profiler::StatEvent at_exit = {"torch_gloo_groups_at_exit", 1, 1,
                                       profiler::StatSeverity::kInfo, kAtExit};
  // The kEnded text, then how its process ended in the interpreter's shutdown.
  auto ended_then = [&](const std::string& how) {
    return "but rank 1 ended its program (its atexit handlers ran) without entering all_reduce "
           "seq 6 of default_pg:0, which rank 0 still expected (rank 0 waited in it from 15.2 s "
           "and failed at 17.7 s; rank 1's last collective ended at 15.0 s); it then " +
           how + " in the interpreter's shutdown (" + kAtExit + ")";
  };

  testing::ScratchDir torchrun;
  const Finding named = rank_failed_of(run_outcome_findings(waiting_run(
      torchrun, std::nullopt, {}, {exception_of(0, kClosedInAllReduce), unclean(1), at_exit})));
  EXPECT_EQ(named.rank, 1);
  EXPECT_THAT(named.evidence, HasSubstr("rank 0's uncaught exception says a peer's failure "
                                        "reached it"));
  EXPECT_THAT(named.evidence, HasSubstr(ended_then("vanished without a goodbye to the collector")));
  EXPECT_EQ(named.advice.rfind("start from rank 1: why it ended before the others", 0), 0u)
      << named.advice;

  testing::ScratchDir launched;
  const Finding failed = rank_failed_of(run_outcome_findings(waiting_run(
      launched, 1, {1, -6}, {exception_of(0, kClosedInAllReduce), unclean(1), at_exit})));
  EXPECT_EQ(failed.rank, 1);
  EXPECT_THAT(failed.evidence, HasSubstr("the run failed: rank 1 aborted (signal 6, SIGABRT"));
  EXPECT_THAT(failed.evidence, HasSubstr("first, after its program had ended, and rank 0's "
                                         "uncaught exception says a peer's failure reached it ("));
  EXPECT_THAT(failed.evidence, HasSubstr(ended_then("was stopped by signal 6 (SIGABRT)")));

  testing::ScratchDir unsaid;
  const Finding vanished = rank_failed_of(run_outcome_findings(
      waiting_run(unsaid, std::nullopt, {}, {exception_of(0, kClosedInAllReduce), unclean(1)})));
  EXPECT_EQ(vanished.rank, 1);
  EXPECT_THAT(vanished.evidence, ::testing::Not(HasSubstr("ended its program")));
  EXPECT_THAT(vanished.evidence, HasSubstr("rank 1 ended without an uncaught exception and "
                                           "without closing its connection"));
}

// Rank 1 issued its group g2's all_reduce before default_pg's, rank 0 the other way round: each
// waits in an op the other never entered. rank_failed sends the reader to neither side alone.
TEST(RunOutcome, RanksThatWaitOnEachOtherAreADeadlockNotOneSidesFault) {
  const std::vector<profiler::CollectiveRecord> other_order = {
      op_of(1, "undefined:1", 0, 15.2, 3.6, profiler::CollectiveState::kFailed)};
  for (const std::optional<int> launcher : {std::optional<int>(0), std::optional<int>()}) {
    testing::ScratchDir dir;
    const RunOutcome outcome = waiting_run(
        dir, launcher, launcher ? std::vector<int>{1, -15} : std::vector<int>{},
        {exception_of(0, kTimedOut), exception_of(1, kTimedOut), unclean(1)}, other_order);
    const Finding failed = rank_failed_of(run_outcome_findings(outcome));
    EXPECT_NE(failed.evidence.find("ranks 0,1 wait on each other: rank 0 in all_reduce seq 6 of "
                                   "default_pg:0, which rank 1 never entered, and rank 1 in "
                                   "all_reduce seq 0 of undefined:1, which rank 0 never entered: "
                                   "the ranks issue their collectives in different orders"),
              std::string::npos)
        << failed.evidence;
    EXPECT_EQ(failed.advice.find("start from rank"), std::string::npos) << failed.advice;
    EXPECT_NE(failed.advice.find("neither rank alone is the cause"), std::string::npos)
        << failed.advice;
  }
}

// The launcher's diagnosis names no culprit (a cycle): rank_failed does not pick one side.
TEST(RunOutcome, ADiagnosisWithoutACulpritKeepsRankFailedFromNamingOneSide) {
  testing::ScratchDir dir;
  const RunOutcome outcome =
      waiting_run(dir, 1, {124, 124},
                  {{"collective_diagnosis", -1, 1, profiler::StatSeverity::kError,
                    "ranks 0,1 wait on each other, none of them at the root: the ranks issue their "
                    "collectives in different orders"}});
  const Finding failed = rank_failed_of(run_outcome_findings(outcome));
  EXPECT_EQ(failed.advice.find("start from rank 1"), std::string::npos) << failed.advice;
  EXPECT_NE(failed.advice.find("which names no single rank"), std::string::npos) << failed.advice;
}

// A launched rank that failed on a peer's failure, where the trace does not say on whom it
// waited (no collective of its unfinished): the advice does not claim the others' missing
// collectives followed from it. Its own failure keeps that advice.
TEST(RunOutcome, ARankThatOnlyWaitedIsNotSaidToCauseTheOthersMissingCollectives) {
  RunOutcome outcome;
  outcome.status = "failed";
  outcome.failing_rank = 0;
  outcome.failing_exit_code = 1;
  outcome.failing_exception = kTimedOut;
  Finding failed = rank_failed_of(run_outcome_findings(outcome));
  EXPECT_EQ(failed.advice.find("follow from it"), std::string::npos) << failed.advice;
  EXPECT_NE(failed.advice.find("start from the rank it waited on"), std::string::npos)
      << failed.advice;
  outcome.failing_exception = kOwnError;
  failed = rank_failed_of(run_outcome_findings(outcome));
  EXPECT_NE(failed.advice.find("follow from it"), std::string::npos) << failed.advice;
}

// gloo's enforce abort()s the rank that meets a mismatched size: SIGABRT is its own abort, not a
// signal from outside.
TEST(RunOutcome, ARankThatAbortedIsSaidToHaveAborted) {
  RunOutcome outcome;
  outcome.status = "failed";
  outcome.failing_rank = 1;
  outcome.failing_exit_signal = 6;
  const Finding failed = rank_failed_of(run_outcome_findings(outcome));
  EXPECT_NE(failed.evidence.find("rank 1 aborted (signal 6, SIGABRT: the process's own abort()"),
            std::string::npos)
      << failed.evidence;
  EXPECT_EQ(failed.evidence.find("killed"), std::string::npos) << failed.evidence;
}

// Rank 1's program ended (its atexit recorded the default group alive past its
// destroy_process_group()); gloo's worker thread then aborted it in the interpreter's shutdown.
// The finding says the work was done and how to keep the group from outliving the program; a
// rank that exited with a code, or aborted without the stat, is told as before.
TEST(RunOutcome, ARankThatAbortedAfterItsProgramEndedIsSaidToHaveFinished) {
  constexpr const char* kAtExit =
      "gloo group default_pg:0 outlived destroy_process_group(): something still held it";
  testing::ScratchDir dir;
  const RunOutcome outcome =
      waiting_run(dir, 1, {0, -6},
                  {{"torch_gloo_groups_at_exit", 1, 1, profiler::StatSeverity::kInfo, kAtExit},
                   {"torch_gloo_groups_at_exit", 0, 1, profiler::StatSeverity::kInfo, "rank 0's"}});
  EXPECT_EQ(outcome.failing_after_program_ended, kAtExit);
  const Finding failed = rank_failed_of(run_outcome_findings(outcome));
  EXPECT_EQ(failed.rank, 1);
  EXPECT_NE(failed.evidence.find("rank 1 aborted (signal 6, SIGABRT"), std::string::npos)
      << failed.evidence;
  EXPECT_NE(failed.evidence.find("first, after its program had ended (its atexit handlers had "
                                 "run): " +
                                 std::string(kAtExit)),
            std::string::npos)
      << failed.evidence;
  EXPECT_EQ(failed.advice.rfind("rank 1's program ran to its end", 0), 0u) << failed.advice;
  EXPECT_NE(failed.advice.find("import torch.distributed.nn"), std::string::npos) << failed.advice;

  RunOutcome raised = outcome;
  raised.failing_exception = kOwnError;
  const Finding after_raise = rank_failed_of(run_outcome_findings(raised));
  EXPECT_NE(after_raise.evidence.find("after its program had ended on an uncaught exception (" +
                                      std::string(kOwnError)),
            std::string::npos)
      << after_raise.evidence;
  EXPECT_EQ(after_raise.advice.rfind("start from rank 1's exception", 0), 0u) << after_raise.advice;

  RunOutcome exited = outcome;
  exited.failing_exit_signal = 0;
  exited.failing_exit_code = 1;
  EXPECT_EQ(rank_failed_of(run_outcome_findings(exited)).evidence.find("program had ended"),
            std::string::npos);
  RunOutcome unsaid = outcome;
  unsaid.failing_after_program_ended.reset();
  const Finding plain = rank_failed_of(run_outcome_findings(unsaid));
  EXPECT_EQ(plain.evidence.find("program had ended"), std::string::npos) << plain.evidence;
  EXPECT_EQ(plain.advice.rfind("start from rank 1:", 0), 0u) << plain.advice;
}

// The same abort under torchrun: no exits in the trace, no exception; rank 1 vanished (no goodbye
// to the collector) after its atexit recorded its group alive. It is the rank that failed, said
// so; a rank that vanished without the stat is no failing rank (nothing says it failed first).
TEST(RunOutcome, UnderTorchrunARankThatVanishedAfterItsProgramEndedFailedFirst) {
  constexpr const char* kAtExit = "gloo group default_pg:0 never destroyed";
  const profiler::StatEvent at_exit = {"torch_gloo_groups_at_exit", 1, 1,
                                       profiler::StatSeverity::kInfo, kAtExit};
  testing::ScratchDir dir;
  const RunOutcome outcome = outcome_of(dir, {at_exit, unclean(1), unclean(3)});
  EXPECT_EQ(outcome.failing_rank, 1);
  EXPECT_TRUE(outcome.failing_rank_from_exceptions);
  const Finding failed = rank_failed_of(run_outcome_findings(outcome));
  EXPECT_EQ(failed.rank, 1);
  EXPECT_NE(failed.evidence.find("no rank raised an uncaught exception, and rank 1 ended without "
                                 "closing its connection to the collector (killed or aborted) "
                                 "after its program had ended (its atexit handlers had run): " +
                                 std::string(kAtExit)),
            std::string::npos)
      << failed.evidence;
  EXPECT_EQ(failed.advice.rfind("rank 1's program ran to its end", 0), 0u) << failed.advice;

  testing::ScratchDir clean;  // its atexit ran and it said goodbye: it did not fail
  EXPECT_FALSE(outcome_of(clean, {at_exit, unclean(3)}).failing_rank);
}

// In a trace older than schema version 7, job_restarted says what its steps table holds after a
// restart: one row per rank and step number, the later attempt's where both recorded it (the
// writer's INSERT OR REPLACE then), not that the attempts' steps sit side by side under shared
// numbers. A newer trace keeps each attempt's steps; one without steps says it has none.
TEST(RunOutcome, ARestartedJobSaysALaterAttemptsStepReplacedTheEarlierOnes) {
  testing::ScratchDir stepless;
  const RunOutcome current =
      outcome_of(stepless, {{"torchelastic_restart", 0, 1, profiler::StatSeverity::kInfo,
                             "attempt 1 of the job: torchrun restarted its workers"}});
  const std::vector<Finding> said = run_outcome_findings(current);
  ASSERT_FALSE(said.empty());
  EXPECT_NE(said[0].evidence.find("(comm ids ending @restartN); no attempt recorded a step"),
            std::string::npos)
      << said[0].evidence;

  testing::ScratchDir dir;
  const RunOutcome outcome =
      outcome_of(dir,
                 {{"torchelastic_restart", 0, 1, profiler::StatSeverity::kInfo,
                   "attempt 1 of the job: torchrun restarted its workers"}},
                 {}, /*schema_6=*/true);
  EXPECT_EQ(outcome.restarts, 1);
  const std::vector<Finding> findings = run_outcome_findings(outcome);
  const auto restarted = std::find_if(findings.begin(), findings.end(),
                                      [](const Finding& f) { return f.kind == "job_restarted"; });
  ASSERT_NE(restarted, findings.end());
  EXPECT_NE(restarted->evidence.find("(schema older than 7) keeps one step row per rank and step "
                                     "number: a later attempt's step replaced an earlier "
                                     "attempt's of the same number"),
            std::string::npos)
      << restarted->evidence;
  EXPECT_EQ(restarted->evidence.find("share their numbers"), std::string::npos)
      << restarted->evidence;
}

// A run its writer left `running` reads as incomplete once no writer holds it, also where the
// file was not marked so (opened read-only: another user's trace, a read-only mount), as the
// dashboard reads it; while its writer is alive it is running.
TEST(RunOutcome, ARunLeftRunningByAWriterThatIsGoneIsIncomplete) {
  testing::ScratchDir dir;
  const auto path = dir.path() / "left.db";
  auto writer = profiler::TraceWriter::create(path);
  ASSERT_TRUE(writer.is_ok()) << writer.status().message();
  (*writer)->append(profiler::RunInfo{"run-1", "torchrun train.py", "{}", 2, 1, 0});
  ASSERT_TRUE((*writer)->commit().is_ok());
  const auto outcome_now = [&] {
    auto db = profiler::SqliteDb::open(path.string(), SQLITE_OPEN_READONLY);
    EXPECT_TRUE(db.is_ok()) << db.status().message();
    auto outcome = read_run_outcome(profiler::TraceReader(*db));
    EXPECT_TRUE(outcome.is_ok()) << outcome.status().message();
    return *outcome;
  };
  EXPECT_EQ(outcome_now().status, "running");
  writer->reset();  // closed with the run left running: the status is not the writer's to say
  const RunOutcome left = outcome_now();
  EXPECT_EQ(left.status, "incomplete");
  ASSERT_EQ(left.data_loss.size(), 1u);
  EXPECT_EQ(left.data_loss[0].name, "run_incomplete");
}

// Step numbers recorded twice in one attempt (a step counter that started again): the replaced
// rows are kept (earlier_steps) and said by a finding of their own.
std::vector<profiler::StepEvent> steps_run_twice(int second_attempt = 0) {
  return {{0, 0, 1'000, 100, 2.5, 0, 0},
          {1, 0, 1'000, 100, 2.5, 0, 0},
          {1, 1, 1'100, 100, 2.4, 0, 0},
          {0, 0, 9'000, 100, 2.6, 0, second_attempt},
          {1, 0, 9'000, 100, 2.6, 0, second_attempt},
          {1, 1, 9'100, 100, 2.5, 0, second_attempt}};
}

const Finding* finding_of_kind(const std::vector<Finding>& findings, std::string_view kind) {
  const auto it = std::find_if(findings.begin(), findings.end(),
                               [&](const Finding& f) { return f.kind == kind; });
  return it == findings.end() ? nullptr : &*it;
}

const profiler::StatEvent kRestartedOnce = {"torchelastic_restart", 0, 1,
                                            profiler::StatSeverity::kInfo,
                                            "attempt 1 of the job: torchrun restarted its workers"};

// torchrun's attempt 1 ran the numbers attempt 0 had: each attempt keeps its steps, nothing is
// replaced, and job_restarted says which attempt the step figures are of.
TEST(RunOutcome, ARestartedJobsStepsAreKeptPerAttemptAndTheFiguresAreTheLasts) {
  testing::ScratchDir dir;
  const RunOutcome outcome = outcome_of(dir, {kRestartedOnce}, steps_run_twice(1));
  EXPECT_TRUE(outcome.earlier_steps.empty());
  ASSERT_EQ(outcome.step_attempts.size(), 2u);
  EXPECT_EQ(outcome.step_attempts[1].attempt, 1);
  EXPECT_EQ(outcome.step_attempts[1].rows, 3);
  const std::vector<Finding> findings = run_outcome_findings(outcome);
  const Finding* restarted = finding_of_kind(findings, "job_restarted");
  ASSERT_NE(restarted, nullptr);
  EXPECT_NE(restarted->evidence.find("its steps are kept under its attempt (attempt 0 steps 0-1, "
                                     "attempt 1 steps 0-1); the step figures of this analysis are "
                                     "attempt 1's (the last)"),
            std::string::npos)
      << restarted->evidence;
  EXPECT_EQ(finding_of_kind(findings, "step_numbers_repeated"), nullptr);

  // Without partrain_torch's stat (a job traced as a foreign program), the attempts say it.
  testing::ScratchDir unsaid;
  const RunOutcome from_steps = outcome_of(unsaid, {}, steps_run_twice(1));
  EXPECT_EQ(from_steps.restarts, 1);
  EXPECT_NE(finding_of_kind(run_outcome_findings(from_steps), "job_restarted"), nullptr);

  // Attempt 2 recorded no step: the figures are attempt 1's, and the finding says why.
  testing::ScratchDir twice;
  const RunOutcome stepless = outcome_of(
      twice,
      {{"torchelastic_restart", 0, 1, profiler::StatSeverity::kInfo, "attempt 2 of the job"}},
      steps_run_twice(1));
  const Finding* last = finding_of_kind(run_outcome_findings(stepless), "job_restarted");
  ASSERT_NE(last, nullptr);
  EXPECT_NE(last->evidence.find("attempt 1's (the last that recorded steps; attempt 2 recorded "
                                "none)"),
            std::string::npos)
      << last->evidence;
}

TEST(RunOutcome, StepNumbersRepeatedWithinAnAttemptAreKeptAndSaid) {
  testing::ScratchDir dir;
  const RunOutcome outcome = outcome_of(dir, {}, steps_run_twice());
  ASSERT_EQ(outcome.earlier_steps.size(), 2u);
  EXPECT_EQ(outcome.earlier_steps[1].rank, 1);
  EXPECT_EQ(outcome.earlier_steps[1].rows, 2);
  EXPECT_EQ(outcome.earlier_steps[1].last_step, 1);
  const std::vector<Finding> unrestarted = run_outcome_findings(outcome);
  const Finding* repeated = finding_of_kind(unrestarted, "step_numbers_repeated");
  ASSERT_NE(repeated, nullptr);
  EXPECT_NE(repeated->evidence.find("3 step rows of ranks 0,1 (steps 0-1) were replaced"),
            std::string::npos)
      << repeated->evidence;
  EXPECT_EQ(finding_of_kind(unrestarted, "job_restarted"), nullptr);

  // In a restarted job, a repeat within one attempt is said beside the restart.
  testing::ScratchDir restarted;
  std::vector<profiler::StepEvent> steps = steps_run_twice(1);
  steps.push_back({0, 0, 9'500, 100, 2.6, 0, 1});
  const std::vector<Finding> both =
      run_outcome_findings(outcome_of(restarted, {kRestartedOnce}, steps));
  EXPECT_NE(finding_of_kind(both, "job_restarted"), nullptr);
  const Finding* within = finding_of_kind(both, "step_numbers_repeated");
  ASSERT_NE(within, nullptr);
  EXPECT_NE(within->evidence.find("more than once within one attempt: 1 step row of rank 0 "
                                  "(step 0)"),
            std::string::npos)
      << within->evidence;

  testing::ScratchDir once;
  const RunOutcome single = outcome_of(once, {}, {{0, 0, 1'000, 100, 2.5, 0}});
  EXPECT_TRUE(single.earlier_steps.empty());
  EXPECT_EQ(finding_of_kind(run_outcome_findings(single), "step_numbers_repeated"), nullptr);
}

// A trace older than schema version 7 kept one step row per rank and number across attempts:
// job_restarted says the figures may mix attempts, and where the replaced rows are.
TEST(RunOutcome, AnOlderRestartedTraceSaysItsStepsMayMixAttempts) {
  testing::ScratchDir dir;
  const RunOutcome outcome =
      outcome_of(dir, {kRestartedOnce}, steps_run_twice(), /*schema_6=*/true);
  EXPECT_TRUE(outcome.step_attempts.empty());
  ASSERT_EQ(outcome.earlier_steps.size(), 2u);
  const std::vector<Finding> findings = run_outcome_findings(outcome);
  const Finding* restarted = finding_of_kind(findings, "job_restarted");
  ASSERT_NE(restarted, nullptr);
  EXPECT_NE(restarted->evidence.find("the replaced rows are kept in the earlier_steps view: "
                                     "3 step rows of ranks 0,1 (steps 0-1)"),
            std::string::npos)
      << restarted->evidence;
  EXPECT_NE(restarted->evidence.find("step times may mix attempts"), std::string::npos);
  EXPECT_EQ(finding_of_kind(findings, "step_numbers_repeated"), nullptr);
}

// torchrun restarted the job after rank 1 died in attempt 0 and attempt 1 completed: the op rank
// 1 never recorded on attempt 0's group is said to be attempt 0's, without a step number (the
// steps kept are attempt 1's), and is a warning torchrun recovered from, not the run's critical.
// The same op missing on the last attempt's group stays critical.
TEST(RunOutcome, AMissingCollectiveOfARecoveredAttemptIsAWarningOfThatAttempt) {
  CollectiveStatsReport report;
  MissingCollective earlier;
  earlier.comm_id = "default_pg:0";
  earlier.rank = 1;
  earlier.ops = {"all_reduce"};
  earlier.first_seq = earlier.last_seq = 8;
  earlier.count = 1;
  earlier.present = {0};
  earlier.step = 3;
  MissingCollective last = earlier;
  last.comm_id = "default_pg:0@restart1";
  report.missing = {earlier, last};
  RunOutcome outcome;
  outcome.status = "completed";
  outcome.restarts = 1;
  const std::vector<Finding> findings = collective_findings_by_attempt(report, outcome);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].kind, "missing_collective");
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  EXPECT_NE(
      findings[0].evidence.find("; this was attempt 0 of the job, which torchrun then restarted"),
      std::string::npos)
      << findings[0].evidence;
  EXPECT_EQ(findings[0].evidence.find("step 3"), std::string::npos) << findings[0].evidence;
  EXPECT_NE(findings[0].advice.find("torchrun recovered from it"), std::string::npos);
  EXPECT_EQ(findings[1].severity, Severity::kCritical);
  EXPECT_NE(findings[1].evidence.find("(step 3)"), std::string::npos) << findings[1].evidence;
  EXPECT_EQ(findings[1].evidence.find("attempt"), std::string::npos) << findings[1].evidence;
  // The Collectives section's list loses the earlier attempt's step as the finding does.
  CollectiveStatsReport section = report;
  forget_earlier_attempts_steps(section, outcome.restarts);
  EXPECT_FALSE(section.missing[0].step);
  EXPECT_EQ(section.missing[1].step, 3);
  // A run that failed in the end keeps attempt 0's missing op critical, with its attempt said.
  outcome.status = "failed";
  const std::vector<Finding> failed = collective_findings_by_attempt(report, outcome);
  EXPECT_EQ(failed[0].severity, Severity::kCritical);
  EXPECT_NE(failed[0].evidence.find("this was attempt 0"), std::string::npos) << failed[0].evidence;
}

// A hang the launcher diagnosed in attempt 0, after which torchrun restarted the job and attempt
// 1 completed: the diagnosis is a warning that says it was an earlier attempt's; in a run that
// failed in the end it stays critical.
TEST(RunOutcome, ADiagnosedHangTorchrunRecoveredFromIsAWarning) {
  RunOutcome outcome;
  outcome.status = "completed";
  outcome.restarts = 1;
  outcome.diagnosis = "attempt 0: rank 1 (missing_ranks at default_pg:0 seq 2): hung";
  outcome.diagnosis_culprit = 1;
  std::vector<Finding> findings = run_outcome_findings(outcome);
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings[0].kind, "collective_diagnosis");
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  EXPECT_NE(findings[0].evidence.find("(an earlier attempt's: torchrun restarted the job 1 time "
                                      "and the last attempt completed)"),
            std::string::npos)
      << findings[0].evidence;
  outcome.status = "failed";
  findings = run_outcome_findings(outcome);
  EXPECT_EQ(findings[0].severity, Severity::kCritical);
}

}  // namespace
}  // namespace partrain::analyzers
