// What partrain's processes set right first thing in main (core/process_start.h): the soft limit
// on open files, raised for partrain and given back to the processes it starts; standard
// descriptors closed at the start.
#include "core/process_start.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace partrain {
namespace {

rlim_t soft_open_files() {
  rlimit limit{};
  return ::getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : 0;
}

// Runs `body` in a forked child (as main runs, with its own process state) and returns its exit
// code: 0 when every check passed, else the code of the one that failed; 100 when it ended some
// other way.
int exit_code_in_child(int (*body)()) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(body());
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child) return 100;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

// In a child, as main would be: started with soft 32 under a hard 4096, raised to 4096; its own
// child gets 32 back. Exit codes say which check failed.
TEST(OpenFilesLimit, RaisedToTheHardLimitAndGivenBackToChildren) {
  const int failed = exit_code_in_child([] {
    const rlimit lowered{32, 4096};
    if (::setrlimit(RLIMIT_NOFILE, &lowered) != 0) return 10;
    raise_open_files_limit();
    if (soft_open_files() != 4096) return 11;
    return exit_code_in_child([] {
      restore_open_files_limit();
      return soft_open_files() == 32 ? 0 : 12;
    });
  });
  EXPECT_EQ(failed, 0) << "10: setrlimit, 11: not raised, 12: not given back";
}

// A soft limit already at the hard one is left alone, and so are children.
TEST(OpenFilesLimit, ALimitAtTheHardOneIsLeftAlone) {
  const int failed = exit_code_in_child([] {
    const rlimit level{256, 256};
    if (::setrlimit(RLIMIT_NOFILE, &level) != 0) return 10;
    raise_open_files_limit();
    restore_open_files_limit();
    return soft_open_files() == 256 ? 0 : 11;
  });
  EXPECT_EQ(failed, 0);
}

// Descriptors closed at the start stay taken (the next file does not become stdout) but fail as
// closed ones do: writing stdout said nothing and exited 0 (`partrain analyze --json >&-`).
TEST(StandardFds, ClosedOnesStayTakenAndFailLikeClosedOnes) {
  const int failed = exit_code_in_child([] {
    ::close(STDIN_FILENO);
    ::close(STDOUT_FILENO);
    open_missing_standard_fds();
    if (::fcntl(STDOUT_FILENO, F_GETFD) < 0 || ::fcntl(STDIN_FILENO, F_GETFD) < 0) return 10;
    if (::write(STDOUT_FILENO, "x", 1) != -1 || errno != EBADF) return 11;
    char byte = 0;
    if (::read(STDIN_FILENO, &byte, 1) != -1 || errno != EBADF) return 12;
    if (!was_closed_at_start(0) || !was_closed_at_start(1) || was_closed_at_start(2)) return 13;
    // launch makes them discard instead, and a child gets them closed again.
    discard_output_to_closed_standard_fds();
    if (::write(STDOUT_FILENO, "x", 1) != 1) return 14;
    return exit_code_in_child([] {
      close_standard_fds_closed_at_start();
      const bool closed = ::fcntl(STDOUT_FILENO, F_GETFD) < 0;
      return closed && ::fcntl(STDERR_FILENO, F_GETFD) >= 0 ? 0 : 15;
    });
  });
  EXPECT_EQ(failed, 0) << "10: not taken, 11: stdout written, 12: stdin read, 13: not "
                          "remembered, 14: not discarding, 15: not closed in a child";
}

}  // namespace
}  // namespace partrain
