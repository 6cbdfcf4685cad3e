// RemoveOnSignal in forked children (the handlers are the process's): a signal that stops the
// child removes the files it registered and still ends it by that signal.
#include "core/remove_on_signal.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "tests/support/scratch_dir.h"

namespace partrain {
namespace {

namespace fs = std::filesystem;

// Runs `body` in a child; returns its wait status.
template <typename Body>
int in_child(Body body) {
  const pid_t child = fork();
  if (child == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return status;
}

TEST(RemoveOnSignal, TheSignalRemovesTheFilesAndStillEndsTheProcess) {
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) {
    testing::ScratchDir dir;
    const fs::path a = dir.path() / "a.tmp", b = dir.path() / "a.tmp-wal";
    const int status = in_child([&] {
      std::ofstream(a) << "x";
      std::ofstream(b) << "x";
      RemoveOnSignal remove({a.string(), b.string(), (dir.path() / "never-made").string()});
      raise(signal_number);
    });
    ASSERT_TRUE(WIFSIGNALED(status)) << signal_number;
    EXPECT_EQ(WTERMSIG(status), signal_number);
    EXPECT_FALSE(fs::exists(a)) << signal_number;
    EXPECT_FALSE(fs::exists(b)) << signal_number;
  }
}

TEST(RemoveOnSignal, OnceGoneItRemovesNothing) {
  testing::ScratchDir dir;
  const fs::path kept = dir.path() / "kept.db";
  const int status = in_child([&] {
    std::ofstream(kept) << "x";
    { RemoveOnSignal remove({kept.string()}); }
    raise(SIGTERM);
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(fs::exists(kept));
}

// nohup's ignored SIGHUP stays ignored: the process goes on, its files with it.
TEST(RemoveOnSignal, AnIgnoredSignalStaysIgnored) {
  testing::ScratchDir dir;
  const fs::path file = dir.path() / "out.tmp";
  const int status = in_child([&] {
    signal(SIGHUP, SIG_IGN);
    std::ofstream(file) << "x";
    RemoveOnSignal remove({file.string()});
    raise(SIGHUP);
    _exit(7);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
  EXPECT_TRUE(fs::exists(file));
}

}  // namespace
}  // namespace partrain
