// The worker's stop-signal thread: a SIGTERM runs the callback and then still ends the process by
// SIGTERM (what the launcher expects to see); without a signal it stops and unblocks cleanly.
#include "runner/worker/stop_signal_watch.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace partrain::runner {
namespace {

TEST(StopSignalWatch, RunsTheCallbackThenDiesByTheSignal) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // the child: a "worker" stopped by its launcher
    ::close(fds[0]);
    auto watch = StopSignalWatch::start([&](int signal) {
      const char byte = static_cast<char>(signal);
      (void)!::write(fds[1], &byte, 1);
    });
    ::kill(::getpid(), SIGTERM);
    std::this_thread::sleep_for(std::chrono::seconds(10));
    ::_exit(0);  // only if the signal did not end the process
  }
  ::close(fds[1]);
  char seen = 0;
  EXPECT_EQ(::read(fds[0], &seen, 1), 1);
  EXPECT_EQ(seen, SIGTERM);
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exited with " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST(StopSignalWatch, StopsAndUnblocksWithoutASignal) {
  {
    auto watch = StopSignalWatch::start([](int) { ADD_FAILURE() << "no signal was sent"; });
    sigset_t blocked;
    ::pthread_sigmask(SIG_BLOCK, nullptr, &blocked);
    EXPECT_TRUE(sigismember(&blocked, SIGTERM));
  }
  sigset_t blocked;
  ::pthread_sigmask(SIG_BLOCK, nullptr, &blocked);
  EXPECT_FALSE(sigismember(&blocked, SIGTERM));
  EXPECT_FALSE(sigismember(&blocked, SIGINT));
}

}  // namespace
}  // namespace partrain::runner
