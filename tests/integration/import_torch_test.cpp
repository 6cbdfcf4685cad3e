// The Kineto fixtures regenerated with the real torch.profiler (tests/data/kineto/
// make_fixtures.py: 4-rank gloo jobs) and imported again: what the committed fixtures show
// still holds for traces torch writes today. Needs torch (tests/support/torch_python.h); SKIPPED
// without it.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/integration/command_runner.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/torch_python.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {

namespace fs = std::filesystem;

TEST(ImportTorch, RegeneratedFixturesImportAsTheCommittedOnesDo) {
  PARTRAIN_REQUIRE_TORCH();
  const std::string python = torch_python();
  ScratchDir dir;
  const fs::path script = fs::path(PARTRAIN_SOURCE_DIR) / "tests/data/kineto/make_fixtures.py";
  auto made = run_shell(python + " " + script.string() + " " + dir.path().string() + " 2>&1");
  ASSERT_EQ(made.exit_code, 0) << made.out;

  const fs::path ddp = dir.path() / "ddp.db";
  auto imported = run_shell(std::string(PARTRAIN_BINARY) + " import " +
                            (dir.path() / "ddp").string() + " -o " + ddp.string());
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  TraceQuery ddp_trace(ddp);
  EXPECT_EQ(ddp_trace.rows("SELECT group_concat(DISTINCT step) FROM steps"), "2,3\n");
  // Every all-reduce of the default group, on all four ranks, its bytes those of a bucket.
  EXPECT_EQ(ddp_trace.rows("SELECT DISTINCT comm_id, op, group_size FROM collectives"),
            "default_pg:0|all_reduce|4\n");
  EXPECT_EQ(ddp_trace.number("SELECT count(*) FROM (SELECT comm_id, seq FROM collectives GROUP BY "
                             "1, 2 HAVING count(*) != 4 OR count(DISTINCT bytes) != 1)"),
            0);
  EXPECT_GT(ddp_trace.number("SELECT count(*) FROM collectives"), 0);

  const fs::path two = dir.path() / "two.db";
  imported = run_shell(std::string(PARTRAIN_BINARY) + " import " +
                       (dir.path() / "two_groups").string() + " -o " + two.string());
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  TraceQuery two_trace(two);
  EXPECT_EQ(two_trace.rows("SELECT comm_id, count(DISTINCT seq), group_concat(DISTINCT "
                           "group_ranks) FROM collectives GROUP BY comm_id ORDER BY comm_id"),
            "default_pg:0|8|0,1,2,3\npg:1|4|0,1\npg:2|4|2,3\n");

  // Pipeline stages that issued send and recv only, both ways: every send pairs with its recv.
  const fs::path pipeline = dir.path() / "pipeline.db";
  imported = run_shell(std::string(PARTRAIN_BINARY) + " import " +
                       (dir.path() / "pipeline").string() + " -o " + pipeline.string());
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  TraceQuery pipeline_trace(pipeline);
  EXPECT_EQ(pipeline_trace.rows(
                "SELECT count(*), count(r.rank) FROM collectives s LEFT JOIN collectives r ON "
                "r.comm_id = s.comm_id AND r.seq = s.seq AND r.rank = s.peer AND r.peer = s.rank "
                "AND r.op = 'recv' AND r.bytes = s.bytes WHERE s.op = 'send'"),
            "24|24\n");

  // A scatter and an all_to_all: every member sized alike, as a live run sizes them.
  const fs::path rooted = dir.path() / "rooted.db";
  imported = run_shell(std::string(PARTRAIN_BINARY) + " import " +
                       (dir.path() / "rooted").string() + " -o " + rooted.string());
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_EQ(TraceQuery(rooted).rows("SELECT op, dtype, count, bytes, count(*) FROM collectives "
                                    "GROUP BY op, dtype, count, bytes ORDER BY op"),
            "all_to_all|float|4|64|8\nscatter|float|8|128|8\n");
}

}  // namespace
}  // namespace partrain::testing
