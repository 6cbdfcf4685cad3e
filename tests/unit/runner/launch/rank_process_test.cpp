// What the launcher reads of a rank's process: the state letter of /proc/<pid>/stat (commands
// with spaces and parentheses included), what each letter means, a real child seen stopped and
// running, and the words the diagnosis uses.
#include "runner/launch/rank_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace partrain::launch {
namespace {

TEST(RankProcess, StateLetterOfAProcStatLine) {
  EXPECT_EQ(state_of_proc_stat("1234 (partrain) S 1 1234 1234 0 -1"), 'S');
  EXPECT_EQ(state_of_proc_stat("1234 (a (b) c) T 1 2"), 'T');
  EXPECT_EQ(state_of_proc_stat("1234 (x) D"), 'D');
  EXPECT_EQ(state_of_proc_stat(""), '?');
  EXPECT_EQ(state_of_proc_stat("1234 (unterminated S 1"), '?');
  EXPECT_EQ(state_of_proc_stat("1234 (x)"), '?');
}

TEST(RankProcess, ConditionOfEachState) {
  for (char c : {'R', 'S', 'I'}) EXPECT_EQ(condition_of_state(c), ProcessCondition::kRunning);
  for (char c : {'T', 't'}) EXPECT_EQ(condition_of_state(c), ProcessCondition::kStopped);
  EXPECT_EQ(condition_of_state('D'), ProcessCondition::kUninterruptible);
  for (char c : {'Z', 'X'}) EXPECT_EQ(condition_of_state(c), ProcessCondition::kEnded);
  EXPECT_EQ(condition_of_state('?'), ProcessCondition::kUnknown);
}

TEST(RankProcess, ARealChildIsSeenStoppedThenRunning) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::raise(SIGSTOP);
    ::pause();
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, WUNTRACED), child);
  ASSERT_TRUE(WIFSTOPPED(status));
  const ProcessSnapshot stopped = snapshot_process(child);
  EXPECT_EQ(stopped.state, 'T');
  EXPECT_EQ(stopped.condition, ProcessCondition::kStopped);
  ::kill(child, SIGCONT);
  ASSERT_EQ(::waitpid(child, &status, WCONTINUED), child);
  ProcessSnapshot running = snapshot_process(child);
  for (int i = 0; i < 100 && running.condition != ProcessCondition::kRunning; ++i) {
    ::usleep(10'000);
    running = snapshot_process(child);
  }
  EXPECT_EQ(running.condition, ProcessCondition::kRunning) << running.state;
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  EXPECT_EQ(snapshot_process(child).condition, ProcessCondition::kUnknown);  // reaped: gone
}

TEST(RankProcess, Words) {
  RankProcess p;
  p.at_failure = {ProcessCondition::kStopped, 'T', ""};
  EXPECT_EQ(describe_rank_process(p), "stopped (state T: SIGSTOP or SIGTSTP)");
  p.at_failure = {ProcessCondition::kUninterruptible, 'D', "io_schedule"};
  EXPECT_EQ(describe_rank_process(p),
            "stuck in the kernel (state D, waiting in io_schedule: a system call that does not "
            "return, or a host swapping)");
  p.at_failure = {};
  p.ended_before_stop = true;
  p.exit = ExitStatus{true, 6};
  EXPECT_EQ(describe_rank_process(p), "killed by signal 6 (SIGABRT)");
  p.exit = ExitStatus{false, 7};
  EXPECT_EQ(describe_rank_process(p), "exited with exit code 7");
}

}  // namespace
}  // namespace partrain::launch
