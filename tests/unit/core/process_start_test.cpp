// What partrain's processes set right first thing in main (core/process_start.h): here, the soft
// limit on open files, raised for partrain and given back to the processes it starts.
#include "core/process_start.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace partrain {
namespace {

rlim_t soft_open_files() {
  rlimit limit{};
  return ::getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : 0;
}

// In a child, as main would be: started with soft 32 under a hard 4096, raised to 4096; its own
// child gets 32 back. Exit codes say which check failed.
TEST(OpenFilesLimit, RaisedToTheHardLimitAndGivenBackToChildren) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const rlimit lowered{32, 4096};
    if (::setrlimit(RLIMIT_NOFILE, &lowered) != 0) ::_exit(10);
    raise_open_files_limit();
    if (soft_open_files() != 4096) ::_exit(11);
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      restore_open_files_limit();
      ::_exit(soft_open_files() == 32 ? 0 : 12);
    }
    int status = 0;
    if (grandchild < 0 || ::waitpid(grandchild, &status, 0) != grandchild) ::_exit(13);
    ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 14);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: setrlimit, 11: not raised, 12: not given back";
}

// A soft limit already at the hard one is left alone, and so are children.
TEST(OpenFilesLimit, ALimitAtTheHardOneIsLeftAlone) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const rlimit level{256, 256};
    if (::setrlimit(RLIMIT_NOFILE, &level) != 0) ::_exit(10);
    raise_open_files_limit();
    restore_open_files_limit();
    ::_exit(soft_open_files() == 256 ? 0 : 11);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace partrain
