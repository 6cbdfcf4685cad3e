// remove_stale_launcher_dirs: what a launcher killed with SIGKILL left (its flight-dump directory,
// its collector's socket directory) goes; what a live launcher holds, or something not a
// launcher's, stays.
#include "runner/launch/stale_launcher_dirs.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "tests/support/scratch_dir.h"

namespace partrain::launch {
namespace {

namespace fs = std::filesystem;

// The pid of a process that has exited and been reaped.
pid_t dead_pid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return child;
}

void touch(const fs::path& path) { std::ofstream(path) << ""; }

class StaleLauncherDirsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(temp_);
    fs::create_directories(collectors_);
  }
  testing::ScratchDir scratch_;
  const fs::path temp_ = scratch_.path() / "tmp";
  const fs::path collectors_ = scratch_.path() / "partrain-uid";
};

// The links a launcher made to an injection whose path held a space or ':' (injection_links.h).
TEST_F(StaleLauncherDirsTest, InjectionLinkDirsOfDeadLaunchersGoAndLiveOnesStay) {
  const pid_t gone = dead_pid();
  const fs::path stale = temp_ / ("partrain-inject-" + std::to_string(gone) + "-Ab12Cd");
  const fs::path live = temp_ / ("partrain-inject-" + std::to_string(getpid()) + "-Ef34Gh");
  for (const fs::path& dir : {stale, live}) fs::create_directories(dir);
  fs::create_symlink("/nonexistent/lib", stale / "libpartrain_inject.so");

  EXPECT_EQ(remove_stale_launcher_dirs(temp_, collectors_), 1);
  EXPECT_FALSE(fs::exists(fs::symlink_status(stale)));
  EXPECT_TRUE(fs::exists(live));
}

TEST_F(StaleLauncherDirsTest, FlightDirsOfDeadLaunchersGoAndLiveOnesStay) {
  const pid_t gone = dead_pid();
  const fs::path stale = temp_ / ("partrain-flight-" + std::to_string(gone) + "-Ab12Cd");
  const fs::path live = temp_ / ("partrain-flight-" + std::to_string(getpid()) + "-Ef34Gh");
  const fs::path unrelated = temp_ / "partrain-flight-notapid";
  const fs::path other = temp_ / ("someone-else-" + std::to_string(gone));
  for (const fs::path& dir : {stale, live, unrelated, other}) fs::create_directories(dir);
  touch(stale / "rank_3.json");

  EXPECT_EQ(remove_stale_launcher_dirs(temp_, collectors_), 1);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(unrelated));
  EXPECT_TRUE(fs::exists(other));
}

TEST_F(StaleLauncherDirsTest, CollectorDirsGoOnlyWhenEverySocketsLauncherIsGone) {
  const std::string gone = std::to_string(dead_pid());
  const std::string alive = std::to_string(getpid());
  const fs::path stale = collectors_ / "20261122-101010-dead";
  const fs::path shared = collectors_ / "20261122-101010-both";  // two launchers, one alive
  const fs::path foreign = collectors_ / "20261122-101010-file";
  const fs::path fresh_empty = collectors_ / "20261122-101010-new";
  const fs::path old_empty = collectors_ / "20261122-101010-old";
  for (const fs::path& dir : {stale, shared, foreign, fresh_empty, old_empty}) {
    fs::create_directories(dir);
  }
  touch(stale / ("collector-" + gone + ".sock"));
  touch(shared / ("collector-" + gone + ".sock"));
  touch(shared / ("collector-" + alive + ".sock"));
  touch(foreign / ("collector-" + gone + ".sock"));
  touch(foreign / "notes.txt");
  fs::last_write_time(old_empty, fs::file_time_type::clock::now() - std::chrono::minutes(5));

  EXPECT_EQ(remove_stale_launcher_dirs(temp_, collectors_), 2);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(old_empty));
  EXPECT_TRUE(fs::exists(shared));
  EXPECT_TRUE(fs::exists(foreign));
  EXPECT_TRUE(fs::exists(fresh_empty)) << "a launcher between mkdir and bind keeps its directory";
}

// A killed launcher whose parent is gone waits for init to reap it; an init that reaps slowly
// (some containers' PID 1) leaves a zombie, which is gone all the same.
TEST_F(StaleLauncherDirsTest, AZombieLauncherIsGone) {
  const pid_t zombie = fork();
  if (zombie == 0) _exit(0);
  ASSERT_GT(zombie, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // exited, not reaped
  const fs::path stale = temp_ / ("partrain-flight-" + std::to_string(zombie) + "-Zz99Zz");
  fs::create_directories(stale);
  EXPECT_EQ(remove_stale_launcher_dirs(temp_, collectors_), 1);
  EXPECT_FALSE(fs::exists(stale));
  int status = 0;
  waitpid(zombie, &status, 0);
}

TEST_F(StaleLauncherDirsTest, MissingDirectoriesAreNothingToDo) {
  EXPECT_EQ(remove_stale_launcher_dirs(scratch_.path() / "none", scratch_.path() / "nor"), 0);
}

}  // namespace
}  // namespace partrain::launch
