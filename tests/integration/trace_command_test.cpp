// `partrain trace -- CMD`: any command runs under a collector with the injection environment;
// ranks of a foreign launcher's processes appear through libpartrain_inject.so, partrain's own
// workers record everything themselves, and the command's exit code comes back.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "tests/support/scratch_dir.h"
#include "tests/integration/command_runner.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {
namespace fs = std::filesystem;

std::string query(const fs::path& db, const std::string& sql) {
  return TraceQuery(db).rows(sql);
}

class TraceCommandTest : public ::testing::Test {
 protected:
  std::string db(const char* name) const { return (dir_ / name).string(); }
  ScratchDir scratch_;
  const fs::path& dir_ = scratch_.path();
};

TEST_F(TraceCommandTest, ForeignRanksAppearThroughTheInjectionLibrary) {
  CommandResult r = run_partrain(fmt::format("trace -o {} -- {} launch -n 2 -- sleep 0.2",
                                             db("foreign.db"), PARTRAIN_BINARY));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(query(db("foreign.db"), "SELECT status FROM runs"), "completed\n");
  EXPECT_EQ(query(db("foreign.db"), "SELECT rank, count(DISTINCT pid) FROM ranks GROUP BY rank"),
            "0|1\n1|1\n");
  // Each rank's lifetime: at least the 0.2 s it slept.
  EXPECT_EQ(query(db("foreign.db"),
                  "SELECT rank, dur_ns >= 200000000 FROM slices WHERE name = 'process' "
                  "ORDER BY rank"),
            "0|1\n1|1\n");
  EXPECT_NE(r.err.find("workers record into the collector of an outer `partrain trace`"),
            std::string::npos)
      << r.err;
}

TEST_F(TraceCommandTest, PartrainWorkersRecordThemselvesIntoTheOuterTrace) {
  CommandResult r = run_partrain(fmt::format(
      "trace -o {} -- {} launch -n 2 --workload mlp --layers 2 --hidden 32 --steps 2",
      db("workload.db"), PARTRAIN_BINARY));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(query(db("workload.db"), "SELECT count(*) FROM ranks"), "2\n");
  EXPECT_EQ(query(db("workload.db"), "SELECT count(*) FROM steps"), "4\n");
  EXPECT_EQ(query(db("workload.db"),
                  "SELECT count(*) > 0 FROM collectives WHERE op = 'all_reduce'"),
            "1\n");
  // No process was recorded twice: the injection library stays inert in partrain's workers.
  EXPECT_EQ(query(db("workload.db"), "SELECT count(*) FROM slices WHERE name = 'process'"), "0\n");
}

TEST_F(TraceCommandTest, EnvironmentExitCodesAndRefusals) {
  CommandResult r = run_partrain(fmt::format(
      "trace -o {} -- sh -c 'echo $PARTRAIN_COLLECTOR; echo $LD_PRELOAD; "
      "echo $CUDA_INJECTION64_PATH; echo $PARTRAIN_RUN_ID; exit 5'",
      db("env.db")));
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_NE(r.out.find("/collector-"), std::string::npos) << r.out;  // <dir>/collector-<pid>.sock
  EXPECT_NE(r.out.find("libpartrain_inject.so\n"), std::string::npos) << r.out;
  EXPECT_EQ(query(db("env.db"), "SELECT status FROM runs"), "failed\n");
  const std::string run_id = query(db("env.db"), "SELECT run_id FROM runs");
  EXPECT_NE(r.out.find(run_id), std::string::npos) << r.out << run_id;

  r = run_partrain(fmt::format("trace -o {} -- true", db("env.db")));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
  r = run_partrain("trace");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no command to trace"), std::string::npos) << r.err;
  r = run_partrain(fmt::format("trace -o {} -- no-such-command-xyz", db("missing.db")));
  EXPECT_EQ(r.exit_code, 127) << r.err;
  EXPECT_EQ(query(db("missing.db"), "SELECT status FROM runs"), "failed\n");
}

}  // namespace
}  // namespace partrain::testing
