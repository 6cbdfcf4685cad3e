// `partrain merge` end to end: the real binary joins two node files (ranks 0-1 and 2-3) into a
// trace whose collectives view matches all four ranks, says what it merged, leaves the inputs
// untouched, and refuses other runs, a rank twice, an existing output and non-traces by exit code.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "profiler/sqlite_db.h"
#include "profiler/trace_open.h"
#include "profiler/trace_writer.h"
#include "tests/integration/command_runner.h"

namespace partrain {
namespace {

namespace fs = std::filesystem;
using testing::run_partrain;

constexpr std::string_view kRunId = "20240611-1402-ab12";

// One node's file: its ranks with a slice, two all-reduces on the 4-rank world, a memory sample,
// a step and a stat each.
void write_node(const fs::path& path, std::string_view run_id, int node, std::vector<int> ranks) {
  auto writer = profiler::TraceWriter::create(path);
  ASSERT_TRUE(writer.is_ok()) << writer.status().message();
  profiler::TraceWriter& w = **writer;
  w.append(profiler::RunInfo{std::string(run_id), "partrain launch --nnodes 2", "{}", 4, 0, 0});
  for (int rank : ranks) {
    profiler::RankInfo info;
    info.rank = rank;
    info.node = node;
    info.host = fmt::format("host{}", node);
    w.append(info);
    w.append(profiler::SliceEvent{rank, profiler::TrackKind::kCpuThread, "main", "forward",
                                  profiler::SliceCategory::kCompute, 100, 50});
    for (uint64_t seq = 0; seq < 2; ++seq) {
      profiler::CollectiveRecord r;
      r.world_rank = rank;
      r.event.comm_id = "world";
      r.event.seq = seq;
      r.event.op = "all_reduce";
      r.event.dtype = "float";
      r.event.reduce_op = "sum";
      r.event.rank = rank;
      r.event.group_ranks = {0, 1, 2, 3};
      r.event.start_ns = 1'000 * static_cast<int64_t>(seq + 1);
      r.event.end_ns = r.event.start_ns + 10;
      r.event.state = profiler::CollectiveState::kCompleted;
      w.append(r);
    }
    w.append(profiler::MemorySample{rank, 0, 100, 1 << 20});
    w.append(profiler::StepEvent{rank, 0, 100, 5'000, 1.0, 64});
  }
  w.append(profiler::StatEvent{"recorder_dropped_events", -1, 2, profiler::StatSeverity::kDataLoss,
                               ""});
  ASSERT_TRUE(w.set_run_status(profiler::RunStatus::kCompleted).is_ok());
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string rows(const profiler::SqliteDb& db, std::string_view sql) {
  auto stmt = profiler::SqliteStatement::prepare(db, sql);
  EXPECT_TRUE(stmt.is_ok()) << stmt.status().message();
  if (!stmt.is_ok()) return {};
  std::string out;
  while (stmt->step() == SQLITE_ROW) {
    for (int c = 0; c < stmt->column_count(); ++c) out += (c ? "|" : "") + stmt->column_text(c);
    out += '\n';
  }
  return out;
}

class MergeCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           fmt::format("merge_command_{}_{}", getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    node0_ = (dir_ / "run.db").string();
    node1_ = (dir_ / "run.node1.db").string();
    out_ = (dir_ / "all.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string node0_, node1_, out_;
};

TEST_F(MergeCommand, JoinsTwoNodeFilesIntoOneTrace) {
  write_node(node0_, kRunId, 0, {0, 1});
  write_node(node1_, kRunId, 1, {2, 3});
  const std::string before0 = file_bytes(node0_), before1 = file_bytes(node1_);
  const auto mtime0 = fs::last_write_time(node0_), mtime1 = fs::last_write_time(node1_);

  auto r = run_partrain(fmt::format("merge {} {} -o {}", node0_, node1_, out_));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(fmt::format("merged 2 files (4 ranks, 12 slices, 8 collectives) of run {} "
                                   "into {}", kRunId, out_)),
            std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;

  auto trace = profiler::open_trace(out_, profiler::TraceOpenMode::kReadStrict);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(rows(trace->db, "PRAGMA integrity_check"), "ok\n");
  EXPECT_EQ(rows(trace->db, "SELECT comm_id, seq, count(*), group_concat(rank) FROM "
                            "(SELECT * FROM collectives ORDER BY rank) GROUP BY 1, 2 ORDER BY 2"),
            "world|0|4|0,1,2,3\nworld|1|4|0,1,2,3\n");
  EXPECT_EQ(rows(trace->db, "SELECT rank, name FROM slices WHERE category = 'compute' ORDER BY 1"),
            "0|forward\n1|forward\n2|forward\n3|forward\n");
  EXPECT_EQ(rows(trace->db, "SELECT value FROM stats WHERE name = 'recorder_dropped_events'"),
            "4\n");
  EXPECT_EQ(rows(trace->db, "SELECT status FROM runs"), "completed\n");

  EXPECT_EQ(file_bytes(node0_), before0);
  EXPECT_EQ(file_bytes(node1_), before1);
  EXPECT_EQ(fs::last_write_time(node0_), mtime0);
  EXPECT_EQ(fs::last_write_time(node1_), mtime1);
}

// One input of the whole world is copied: the warning names the input and the output (it had
// named the output as what was copied).
TEST_F(MergeCommand, OneInputIsCopiedSayingWhichIntoWhich) {
  write_node(node0_, kRunId, 0, {0, 1, 2, 3});
  auto r = run_partrain(fmt::format("merge {} -o {}", node0_, out_));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(fmt::format("one input: {} is copied as it is into {}", node0_, out_)),
            std::string::npos)
      << r.err;
}

// Sets the run's world_size, as an edit or a damaged page would.
void claim_world(const std::string& trace, int64_t world_size) {
  auto db = profiler::SqliteDb::open(trace, SQLITE_OPEN_READWRITE);
  ASSERT_TRUE(db.is_ok()) << db.status().message();
  ASSERT_TRUE(db->exec(fmt::format("UPDATE run SET world_size = {}", world_size)).is_ok());
}

// A 2-rank node file whose run claims 2e9 ranks: analyze, top and merge built one path per
// "other node" (bad_alloc after 8 GB; 2e7 ranks: a 449 MB report). A few files are named and
// the rest counted; the merge advice takes a pattern.
TEST_F(MergeCommand, AHugeClaimedWorldNamesAFewNodeFilesAndCountsTheRest) {
  write_node(node1_, kRunId, 1, {2, 3});
  claim_world(node1_, 2'000'000'000);
  const std::string more = "... and 999999991 more";
  auto merged = run_partrain(fmt::format("merge {} -o {}", node1_, out_));
  ASSERT_EQ(merged.exit_code, 0) << merged.err.substr(0, 2000);
  EXPECT_NE(merged.err.find(more), std::string::npos) << merged.err.substr(0, 2000);
  EXPECT_NE(merged.err.find(
                fmt::format("partrain merge {} {} -o", node0_, (dir_ / "run.node*.db").string())),
            std::string::npos)
      << merged.err.substr(0, 2000);
  EXPECT_LT(merged.err.size(), 4096u);
  for (const char* command : {"analyze", "top --json"}) {
    auto analyzed = run_partrain(fmt::format("{} {}", command, node1_));
    ASSERT_EQ(analyzed.exit_code, 0) << command << ": " << analyzed.err.substr(0, 2000);
    EXPECT_NE(analyzed.out.find(more), std::string::npos) << analyzed.out.substr(0, 4000);
    EXPECT_LT(analyzed.out.size(), 64u * 1024) << command;
  }
}

// Merging imports that say which ranks had no file works the missing ranks out again from what
// the inputs hold: over a claimed world of 2e9 it listed each absent rank (GBs, or bad_alloc).
TEST_F(MergeCommand, MissingRanksOfAHugeClaimedWorldAreOneRange) {
  write_node(node0_, kRunId, 0, {0, 1});
  write_node(node1_, kRunId, 1, {2, 3});
  for (const std::string& node : {node0_, node1_}) {
    claim_world(node, 2'000'000'000);
    auto db = profiler::SqliteDb::open(node, SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE(db->exec("INSERT INTO stat (name, rank, value, severity, description) VALUES "
                         "('import_missing_ranks', -1, 1999999998, 'data_loss', 'as imported')")
                    .is_ok());
  }
  auto r = run_partrain(fmt::format("merge {} {} -o {}", node0_, node1_, out_));
  ASSERT_EQ(r.exit_code, 0) << r.err.substr(0, 2000);
  auto trace = profiler::open_trace(out_, profiler::TraceOpenMode::kReadStrict);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(rows(trace->db,
                 "SELECT value, description FROM stats WHERE name = "
                 "'import_missing_ranks'"),
            "1999999996|ranks 4-1999999999 of the world of 2000000000 had no trace file: their "
            "events and their part of every collective are absent\n");
}

TEST_F(MergeCommand, FilesOfDifferentRunsAreExitTwoNamingBothRuns) {
  write_node(node0_, kRunId, 0, {0, 1});
  write_node(node1_, "20240611-1500-cd34", 1, {2, 3});
  auto r = run_partrain(fmt::format("merge {} {} -o {}", node0_, node1_, out_));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(std::string(kRunId)), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("20240611-1500-cd34"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(node1_), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out_));
}

TEST_F(MergeCommand, ARankInTwoFilesIsExitTwo) {
  write_node(node0_, kRunId, 0, {0, 1});
  write_node(node1_, kRunId, 1, {1, 2});
  auto r = run_partrain(fmt::format("merge {} {} -o {}", node0_, node1_, out_));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("rank 1 is in both"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out_));
}

TEST_F(MergeCommand, AnExistingOutputNeedsForce) {
  write_node(node0_, kRunId, 0, {0, 1});
  write_node(node1_, kRunId, 1, {2, 3});
  { std::ofstream(out_) << "keep me"; }
  auto refused = run_partrain(fmt::format("merge {} {} -o {}", node0_, node1_, out_));
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;
  EXPECT_EQ(file_bytes(out_), "keep me");
  auto forced = run_partrain(fmt::format("merge {} {} -o {} --force", node0_, node1_, out_));
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_TRUE(profiler::open_trace(out_, profiler::TraceOpenMode::kReadStrict).is_ok());
}

// Through a symbolic link the file it names is replaced and the link kept; a FIFO or a directory
// cannot hold a trace and is refused before anything is read.
TEST_F(MergeCommand, ALinkIsFollowedAndADeviceOrDirectoryRefused) {
  write_node(node0_, kRunId, 0, {0, 1});
  const fs::path target = dir_ / "target.db", link = dir_ / "link.db";
  { std::ofstream(target) << "old"; }
  fs::create_symlink(target, link);
  auto forced = run_partrain(fmt::format("merge {} -o {} --force", node0_, link.string()));
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
  EXPECT_TRUE(profiler::open_trace(target, profiler::TraceOpenMode::kReadStrict).is_ok());

  const fs::path fifo = dir_ / "pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto refused = run_partrain(fmt::format("merge {} -o {} --force", node0_, fifo.string()));
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("is a device or FIFO, not a file"), std::string::npos) << refused.err;
  EXPECT_TRUE(fs::is_fifo(fifo));
  refused = run_partrain(fmt::format("merge {} -o {} --force", node0_, dir_.string()));
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("is a directory, not a file"), std::string::npos) << refused.err;
}

TEST_F(MergeCommand, AnInputThatIsNotSqliteIsExitThree) {
  write_node(node0_, kRunId, 0, {0, 1});
  { std::ofstream(node1_) << "step,loss\n1,2.5\n"; }
  auto r = run_partrain(fmt::format("merge {} {} -o {}", node0_, node1_, out_));
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("not an SQLite database"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out_));
}

TEST_F(MergeCommand, HelpShowsAnExampleAndAMissingOutputIsUsage) {
  auto help = run_partrain("merge --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("partrain merge "), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--force"), std::string::npos) << help.out;
  write_node(node0_, kRunId, 0, {0, 1});
  EXPECT_EQ(run_partrain(fmt::format("merge {}", node0_)).exit_code, 2);
}

}  // namespace
}  // namespace partrain
