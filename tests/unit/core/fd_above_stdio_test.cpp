#include "core/fd_above_stdio.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

namespace partrain {
namespace {

// Runs with the test's stdin closed, as a program started with `0<&-`: the descriptor the next
// open gets is 0, and it must not stay there.
TEST(FdAboveStdio, AFreeStandardSlotIsLeftFree) {
  const int saved = ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);  // -1: the test's stdin is closed
  ::close(STDIN_FILENO);
  const int opened = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int moved = fd_above_stdio(opened);
  const bool stdin_still_closed = ::fcntl(STDIN_FILENO, F_GETFD) == -1;
  const int flags = ::fcntl(moved, F_GETFD);
  ::close(moved);
  if (saved >= 0) {
    ::dup2(saved, STDIN_FILENO);
    ::close(saved);
  }
  EXPECT_EQ(opened, STDIN_FILENO);
  EXPECT_GT(moved, STDERR_FILENO);
  EXPECT_TRUE(stdin_still_closed);
  EXPECT_TRUE(flags & FD_CLOEXEC);
}

TEST(FdAboveStdio, ADescriptorAboveTheStandardOnesStays) {
  const int opened = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int fd = ::fcntl(opened, F_DUPFD_CLOEXEC, 10);  // above 2 whatever the test's stdin is
  ::close(opened);
  ASSERT_GE(fd, 10);
  EXPECT_EQ(fd_above_stdio(fd), fd);
  EXPECT_EQ(fd_above_stdio(-1), -1);
  ::close(fd);
}

}  // namespace
}  // namespace partrain
