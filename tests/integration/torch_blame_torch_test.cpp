// Who `analyze` says a failed PyTorch job began with, when the rank that failed first only waited
// for another (its exception a gloo timeout or a peer that closed the connection): 2 gloo ranks
// (tests/integration/scripts/torch_blame.py) whose rank 1 sleeps, exits 0 or issues its
// collectives in another order at step 1, with torch's own 3 s timeout, under `partrain launch`
// and `partrain trace -- torchrun`. rank_failed names rank 1 (or the cycle), whoever launched,
// and never says that what rank 1 missed before rank 0 failed follows from rank 0's failure.
// Labelled `torch`; SKIPPED with one line without a torch interpreter.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/command_runner.h"
#include "tests/integration/torch_scenarios.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/torch_python.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {

const std::string kBlameScript = (kScenarioScripts / "torch_blame.py").string();

// `partrain launch -n 2 [options] -- python torch_blame.py --fault FAULT` into `trace`; the
// timeout is around partrain, not the ranks' command.
CommandResult launch_fault(const std::string& trace, const std::string& fault,
                           const std::string& options = "") {
  return run_shell(fmt::format("timeout -k 10 180 {} launch -n 2 {} --trace {} -- {} {} --fault {}",
                               partrain_binary(), options, shell_quoted(trace),
                               shell_quoted(torch_python()), shell_quoted(kBlameScript), fault));
}

std::string analyzed(const std::string& trace) {
  const CommandResult analyze = run_partrain("analyze " + shell_quoted(trace));
  EXPECT_EQ(analyze.exit_code, 0) << analyze.err;
  return analyze.out;
}

// The text of the rank_failed finding (its evidence and advice), or "" with a test failure.
std::string rank_failed_text(const std::string& report) {
  const size_t at = report.find("] rank_failed");
  EXPECT_NE(at, std::string::npos) << report;
  if (at == std::string::npos) return "";
  const size_t next = report.find("\n ", report.find("    try:", at) + 1);
  return report.substr(at, next == std::string::npos ? std::string::npos : next - at);
}

// Rank 1 sleeps past rank 0's gloo timeout: rank 0 fails first ("Timed out waiting 3000ms"), the
// launcher stops rank 1. analyze named rank 0 and said rank 1's missing all_reduce followed
// from it.
TEST(TorchBlame, LaunchNamesTheRankThatSleptNotTheRankThatTimedOutWaitingForIt) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "sleep.db").string();
  const CommandResult run = launch_fault(trace, "sleep");
  EXPECT_NE(run.exit_code, 0) << run.err;
  const std::string failed = rank_failed_text(analyzed(trace));
  EXPECT_EQ(failed.rfind("] rank_failed (rank 1): ", 0), 0u) << failed;
  EXPECT_NE(failed.find("but rank 1 never entered all_reduce seq "), std::string::npos) << failed;
  EXPECT_NE(failed.find("it raised nothing and had no collective in flight"), std::string::npos)
      << failed;
  EXPECT_EQ(failed.find("follow from it"), std::string::npos) << failed;
}

// Rank 1 exits 0 in the middle of training; rank 0's all_reduce then loses its peer. Every
// reading named rank 0. Under load rank 1 sometimes aborts after its atexit (torch's gloo
// threads in the interpreter's shutdown), and torchrun's trace then had no goodbye from it: it
// read as a rank that vanished mid-program, until its atexit's stat was read as its end.
TEST(TorchBlame, ARankThatExitedZeroEarlyIsNamedUnderLaunchAndUnderTorchrun) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "exit0.db").string();
  const CommandResult run = launch_fault(trace, "exit0");
  EXPECT_NE(run.exit_code, 0) << run.err;
  const std::string failed = rank_failed_text(analyzed(trace));
  EXPECT_EQ(failed.rfind("] rank_failed (rank 1): ", 0), 0u) << failed;
  // Its exit code, or, where gloo's worker thread aborted it in the interpreter's shutdown (the
  // default group is never destroyed; under load, about 1 run in 25), that its atexit had run.
  EXPECT_TRUE(failed.find("but rank 1 exited (code 0) without entering all_reduce seq ") !=
                  std::string::npos ||
              failed.find("but rank 1 ended its program (its atexit handlers ran) without "
                          "entering all_reduce seq ") != std::string::npos)
      << failed;
  EXPECT_NE(failed.find("which rank 0 still expected"), std::string::npos) << failed;
  // The advice sends the reader to rank 1: from the rule itself, or (when rank 0's failed
  // collective dumped the flight recorders in time, as it does under launch) from the launcher's
  // diagnosis, which blames rank 1 too.
  EXPECT_TRUE(failed.find("start from rank 1: why it ended before the others") !=
                  std::string::npos ||
              failed.find("which the collective diagnosis above blames: start from rank 1") !=
                  std::string::npos)
      << failed;

  const std::string traced = (scratch.path() / "exit0-torchrun.db").string();
  const CommandResult torchrun_run = run_partrain(
      fmt::format("trace -o {} -- timeout -k 10 180 {} --standalone --nproc-per-node 2 {} "
                  "--fault exit0",
                  shell_quoted(traced), torchrun(), shell_quoted(kBlameScript)));
  EXPECT_NE(torchrun_run.exit_code, 0) << torchrun_run.err;
  const std::string named = rank_failed_text(analyzed(traced));
  EXPECT_EQ(named.rfind("] rank_failed (rank 1): ", 0), 0u) << named;
  EXPECT_NE(named.find("without entering all_reduce seq "), std::string::npos) << named;
  EXPECT_NE(named.find("which rank 0 still expected"), std::string::npos) << named;
}

// Ranks 0 and 1 all_reduce on two groups in different orders. With --collective-timeout the
// launcher's diagnosis is the cycle, and so is the trace's collective_diagnosis stat (it kept
// "rank 1 never issued ...", and analyze said "start from rank 1"); with torch's timeout alone,
// analyze reads the cycle from the ranks' failed collectives (it named rank 0).
TEST(TorchBlame, ADeadlockIsTheCycleInTheTraceNotOneSidesFault) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string watched = (scratch.path() / "deadlock-watched.db").string();
  const CommandResult run = launch_fault(watched, "deadlock", "--collective-timeout 2s");
  EXPECT_EQ(run.exit_code, 124) << run.err;
  EXPECT_NE(run.err.find("partrain: diagnosis: ranks 0,1 wait on each other"), std::string::npos)
      << run.err;
  TraceQuery query(watched);
  const std::string stat = query.rows(
      "SELECT coalesce(rank, -1) || ': ' || description FROM stats WHERE name = "
      "'collective_diagnosis'");
  EXPECT_EQ(stat.rfind("-1: ranks 0,1 wait on each other, none of them at the root: the ranks "
                       "issue their collectives in different orders (rank 0 waits on rank 1",
                       0),
            0u)
      << stat;
  const std::string report = analyzed(watched);
  EXPECT_EQ(report.find("start from rank"), std::string::npos) << report;
  EXPECT_NE(report.find("which names no single rank"), std::string::npos) << report;

  const std::string timed_out = (scratch.path() / "deadlock.db").string();
  const CommandResult torch_timeout = launch_fault(timed_out, "deadlock");
  EXPECT_NE(torch_timeout.exit_code, 0) << torch_timeout.err;
  const std::string failed = rank_failed_text(analyzed(timed_out));
  EXPECT_NE(failed.find("but ranks 0,1 wait on each other: rank "), std::string::npos) << failed;
  // Neither side is named alone: by the rule itself, or by the launcher's diagnosis of the
  // cycle when the failed collectives dumped the flight recorders in time.
  EXPECT_TRUE(failed.find("neither rank alone is the cause") != std::string::npos ||
              failed.find("which names no single rank") != std::string::npos)
      << failed;
  EXPECT_EQ(failed.find("start from rank"), std::string::npos) << failed;
}

}  // namespace
}  // namespace partrain::testing
