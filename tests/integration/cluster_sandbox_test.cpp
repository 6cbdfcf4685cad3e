// The cluster tests' sandbox leaves nothing behind: a test killed outright (a ctest timeout's
// SIGKILL) takes its Slurm daemons, munged and every task with it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/integration/cluster_sandbox.h"
#include "tests/integration/command_runner.h"

namespace partrain::testing {
namespace {

// Processes whose command line names `dir` (the sandbox's daemons all do: their config is there).
int processes_naming(const std::string& dir) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_file(entry.path() / "cmdline");
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    if (cmdline.find(dir) != std::string::npos) ++count;
  }
  return count;
}

TEST(ClusterSandbox, AKilledTestTakesItsClusterWithIt) {
  if (std::string why = ClusterSandbox::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  const pid_t test = fork();
  if (test == 0) {
    // The killed test: a cluster with a job step running, then SIGKILL from outside.
    ClusterSandbox cluster(2);
    std::string dir = cluster.failure().empty() ? cluster.dir() : "";
    if (!dir.empty()) {
      cluster.run("srun -N2 --ntasks-per-node=1 sleep 300 >/dev/null 2>&1 &", 10);
    }
    dir += "\n";
    (void)!::write(report[1], dir.data(), dir.size());
    ::pause();
    _exit(0);
  }
  ::close(report[1]);
  std::string dir;
  char c;
  while (::read(report[0], &c, 1) == 1 && c != '\n') dir += c;
  ::close(report[0]);
  ASSERT_FALSE(dir.empty()) << "the cluster did not start";
  // Its daemons and the step's tasks run now.
  EXPECT_GE(processes_naming(dir), 4);
  ::kill(test, SIGKILL);
  ::waitpid(test, nullptr, 0);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (processes_naming(dir) > 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(processes_naming(dir), 0) << "processes of " << dir << " outlived their test";
  std::filesystem::remove_all(dir);  // the killed test could not
}

}  // namespace
}  // namespace partrain::testing
