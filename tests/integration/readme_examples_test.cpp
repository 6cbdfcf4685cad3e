// README.md as a new user follows it: its links stay inside the repository, and its examples
// run as written (the workload config, the sqlite3 query once there are several runs).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>

#include "tests/integration/command_runner.h"

namespace partrain::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = PARTRAIN_SOURCE_DIR;

std::string readme() { return read_file((kSource / "README.md").string()); }

// The README's line that starts with `prefix`, as a user would paste it.
std::string readme_line(const std::string& prefix) {
  const std::string text = readme();
  const size_t start = text.find("\n" + prefix);
  if (start == std::string::npos) return "";
  return text.substr(start + 1, text.find('\n', start + 1) - start - 1);
}

TEST(Readme, LinksPointInsideTheRepository) {
  const std::string text = readme();
  static const std::regex kLink(R"(\]\(([^)]+)\))");
  int checked = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kLink); it != std::sregex_iterator();
       ++it) {
    const std::string target = (*it)[1].str();
    if (target.starts_with("http")) continue;
    EXPECT_FALSE(target.starts_with("..")) << target;
    EXPECT_TRUE(fs::exists(kSource / target)) << target;
    ++checked;
  }
  EXPECT_GT(checked, 5);
  EXPECT_EQ(text.find("../shared"), std::string::npos);
}

TEST(Readme, QuickStartIsTwoCommands) {
  const std::string text = readme();
  const size_t start = text.find("## Quick start");
  const size_t block = text.find("```sh\n", start);
  const size_t end = text.find("```", block + 6);
  std::string commands = text.substr(block + 6, end - block - 6);
  EXPECT_EQ(commands.rfind("make demo", 0), 0u) << commands;
  EXPECT_NE(commands.find("\nmake test"), std::string::npos) << commands;
  EXPECT_EQ(std::count(commands.begin(), commands.end(), '\n'), 2) << commands;
}

// Each run writes its own partrain-runs/<run-id>.db: `sqlite3 partrain-runs/*.db` handed
// sqlite3 two files once there were two runs ("too many options"). The README's line reads the
// newest.
TEST(Readme, TheWorkloadConfigAndTheSqliteQueryWorkAfterTwoRuns) {
  if (system("command -v sqlite3 >/dev/null") != 0) GTEST_SKIP() << "no sqlite3 command";
  char dir[] = "/tmp/partrain-readme-XXXXXX";
  const fs::path cwd = mkdtemp(dir);
  const std::string config = (kSource / "examples/workloads/gpt-dp2-tp2.toml").string();
  for (int run = 0; run < 2; ++run) {
    CommandResult launched = run_shell("cd " + cwd.string() + " && " + partrain_binary() +
                                       " launch --config " + config + " --steps 2");
    ASSERT_EQ(launched.exit_code, 0) << launched.err;
  }
  std::string query = readme_line("sqlite3 ");
  ASSERT_FALSE(query.empty());
  CommandResult queried = run_shell("cd " + cwd.string() + " && " + query);
  EXPECT_EQ(queried.exit_code, 0) << query << "\n" << queried.err;
  EXPECT_NE(queried.out.find("all_reduce|"), std::string::npos) << queried.out;
  fs::remove_all(cwd);
}

TEST(Readme, TheDashboardIsAmongTheExamples) {
  EXPECT_NE(readme().find("partrain top"), std::string::npos);
  EXPECT_NE(readme().find("--tui"), std::string::npos);
  EXPECT_NE(readme().find("make install PREFIX="), std::string::npos);
}

}  // namespace
}  // namespace partrain::testing
