// The one decision of where a run's trace goes (launch, launch --tui, trace): the default under
// ./partrain-runs named by the run id, the file named with --trace, node N's name beside node
// 0's, and the refusals (a file already there, an empty name, a run id that cannot name a file).
#include "runner/launch/trace_path.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "tests/support/scratch_dir.h"

namespace partrain::launch {
namespace {
namespace fs = std::filesystem;

class TracePathTest : public ::testing::Test {
 protected:
  testing::ScratchDir scratch_;
  const fs::path& dir_ = scratch_.path();
};

TEST_F(TracePathTest, TheDefaultIsTheRunIdUnderTheRunsDirectory) {
  StatusOr<fs::path> path = decide_trace_path({std::nullopt, "20261128-0701-ab12", 0});
  ASSERT_TRUE(path.is_ok()) << path.status().message();
  EXPECT_EQ(*path, fs::path("partrain-runs") / "20261128-0701-ab12.db");
  EXPECT_EQ(kRunsDirectory, "partrain-runs");
  // Node 2 of the same run: beside node 0's file.
  path = decide_trace_path({std::nullopt, "20261128-0701-ab12", 2});
  ASSERT_TRUE(path.is_ok()) << path.status().message();
  EXPECT_EQ(*path, fs::path("partrain-runs") / "20261128-0701-ab12.node2.db");
}

// A --run-id given again (a requeued job's) finds its default file there: the next free
// <run-id>.N.db, as the log directory is <run-id>.N (it was exit 2 with the logs already made).
TEST_F(TracePathTest, ARunIdGivenAgainGetsTheNextFreeDefaultFile) {
  const fs::path before = fs::current_path();
  fs::current_path(dir_);
  fs::create_directories(kRunsDirectory);
  std::ofstream(fs::path(kRunsDirectory) / "job7.db") << "the first attempt";
  std::ofstream(fs::path(kRunsDirectory) / "job7.2.db") << "the second";
  StatusOr<fs::path> path = decide_trace_path({std::nullopt, "job7", 0});
  StatusOr<fs::path> node1 = decide_trace_path({std::nullopt, "job7", 1});
  fs::current_path(before);
  ASSERT_TRUE(path.is_ok()) << path.status().message();
  EXPECT_EQ(*path, fs::path("partrain-runs") / "job7.3.db");
  ASSERT_TRUE(node1.is_ok()) << node1.status().message();
  EXPECT_EQ(*node1, fs::path("partrain-runs") / "job7.node1.db");  // node 1's own name is free
}

TEST_F(TracePathTest, ANamedFileWinsOverTheRunId) {
  const std::string file = (dir_ / "run.db").string();
  StatusOr<fs::path> path = decide_trace_path({file, "ignored", 0});
  ASSERT_TRUE(path.is_ok()) << path.status().message();
  EXPECT_EQ(*path, dir_ / "run.db");
  path = decide_trace_path({file, "ignored", 1});
  ASSERT_TRUE(path.is_ok()) << path.status().message();
  EXPECT_EQ(*path, dir_ / "run.node1.db");
}

TEST_F(TracePathTest, AFileAlreadyThereIsRefusedByName) {
  std::ofstream(dir_ / "kept.node1.db") << "an earlier run";
  const std::string file = (dir_ / "kept.db").string();
  // Node 0's name is free, node 1's is taken: each node decides for its own file.
  EXPECT_TRUE(decide_trace_path({file, "r", 0}).is_ok());
  StatusOr<fs::path> taken = decide_trace_path({file, "r", 1});
  ASSERT_FALSE(taken.is_ok());
  EXPECT_EQ(taken.status().exit_code(), 2);
  EXPECT_EQ(taken.status().message(),
            "the trace file " + (dir_ / "kept.node1.db").string() +
                " already exists: remove it or pass another --trace FILE");
  // The file is left as it was.
  std::ifstream in(dir_ / "kept.node1.db");
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "an earlier run");
}

// A directory, /dev/null or a FIFO is not "a file already there" to remove: each is named for
// what it is, with what to pass instead (all three said "already exists: remove it").
TEST_F(TracePathTest, ADirectoryOrAFileThatIsNotRegularIsNamedForWhatItIs) {
  fs::create_directory(dir_ / "traces");
  StatusOr<fs::path> directory = decide_trace_path({(dir_ / "traces").string(), "r", 0});
  ASSERT_FALSE(directory.is_ok());
  EXPECT_EQ(directory.status().exit_code(), 2);
  EXPECT_EQ(directory.status().message(), "the trace file " + (dir_ / "traces").string() +
                                              " is a directory: pass a file in it "
                                              "(--trace " +
                                              (dir_ / "traces" / "run.db").string() +
                                              ") or another --trace FILE");
  ASSERT_EQ(mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  for (const fs::path& special : {fs::path("/dev/null"), dir_ / "fifo"}) {
    StatusOr<fs::path> refused = decide_trace_path({special.string(), "r", 0});
    ASSERT_FALSE(refused.is_ok()) << special;
    EXPECT_EQ(refused.status().exit_code(), 2);
    EXPECT_EQ(
        refused.status().message(),
        "the trace file " + special.string() +
            " is not a regular file (a device, a FIFO "
            "or a socket): a trace is an SQLite file, pass another --trace FILE, or --no-trace "
            "to run without one");
  }
}

TEST_F(TracePathTest, EmptyNamesAndUnusableRunIdsAreUsageErrors) {
  StatusOr<fs::path> empty = decide_trace_path({std::string(), "r", 0});
  ASSERT_FALSE(empty.is_ok());
  EXPECT_EQ(empty.status().exit_code(), 2);
  EXPECT_EQ(empty.status().message(),
            "--trace needs a file name (an empty one would trace into nothing)");
  for (const char* id : {"", "../escape", ".hidden"}) {
    StatusOr<fs::path> bad = decide_trace_path({std::nullopt, id, 0});
    ASSERT_FALSE(bad.is_ok()) << id;
    EXPECT_EQ(bad.status().exit_code(), 2) << id;
    EXPECT_EQ(bad.status().message().rfind("run id '", 0), 0u) << bad.status().message();
  }
  // The same check, spelled as the command spells the flag.
  Status typed = check_trace_file(std::string(), "--trace/-o");
  EXPECT_EQ(typed.message(), "--trace/-o needs a file name (an empty one would trace into nothing)");
  EXPECT_TRUE(check_trace_file(std::nullopt, "--trace").is_ok());
  EXPECT_TRUE(check_trace_file(std::string("x.db"), "--trace").is_ok());
}

}  // namespace
}  // namespace partrain::launch
