// TraceWriter and open_trace: what is written comes back through the public views, a writer
// killed mid-batch leaves a readable file marked incomplete, and bad inputs are told apart.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include "memory/category.h"
#include "profiler/disk_reserve.h"
#include "profiler/sqlite_db.h"
#include "profiler/trace_open.h"
#include "profiler/trace_schema.h"
#include "profiler/trace_writer.h"
#include "tests/support/file_size_limit.h"
#include "tests/support/killed_writer.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_fixture.h"
#include "tests/support/trace_query.h"

namespace partrain::profiler {
namespace {

namespace fs = std::filesystem;
using testing::open_read_only;
using testing::query_number;
using testing::query_rows;

class TraceStoreTest : public ::testing::Test {
 protected:
  fs::path file(std::string_view name) const { return dir_ / name; }
  testing::ScratchDir scratch_;
  const fs::path& dir_ = scratch_.path();
};

std::unique_ptr<TraceWriter> make_writer(const fs::path& path, TraceWriterOptions options = {}) {
  auto writer = TraceWriter::create(path, options);
  EXPECT_TRUE(writer.is_ok()) << writer.status().message();
  return writer.is_ok() ? std::move(writer).value() : nullptr;
}

CollectiveRecord all_reduce(int world_rank, uint64_t seq, int64_t start) {
  return testing::completed_all_reduce("dp0", world_rank, {0, 1}, seq, 1024, start, 100);
}

RankInfo rank_info(int rank, int64_t pid, int64_t offset_ns, int64_t uncertainty_ns) {
  RankInfo info;
  info.rank = rank;
  info.local_rank = rank;
  info.host = "hostA";
  info.pid = pid;
  info.device = "cpu";
  info.clock_offset_ns = offset_ns;
  info.clock_uncertainty_ns = uncertainty_ns;
  info.clock_drift_ppm = offset_ns > 0 ? 12.5 : 0.0;
  return info;
}

// What the launcher knows once a rank is reaped.
RankInfo exit_info(int rank, int64_t pid, int exit_code, int exit_signal) {
  RankInfo info;
  info.rank = rank;
  info.local_rank = rank;
  info.host = "hostA";
  info.pid = pid;
  info.exited = true;
  info.exit_code = exit_code;
  info.exit_signal = exit_signal;
  return info;
}

TEST_F(TraceStoreTest, ViewsReturnWhatWasWritten) {
  fs::path path = file("run.db");
  {
    auto writer = make_writer(path);
    ASSERT_TRUE(writer);
    CollectiveRecord send = all_reduce(0, 0, 3'000);
    send.event.comm_id = "pp0-1";
    send.event.op = "send";
    send.event.reduce_op = "";
    send.event.peer = 1;
    std::vector<TraceEvent> events = {
        RunInfo{"r1", "partrain launch -n 2", R"({"dp":2})", 2, 1, 0},
        rank_info(0, 100, 0, 0),
        rank_info(1, 101, 250, 10),
        SliceEvent{0, TrackKind::kCpuThread, "main", "forward", SliceCategory::kPhase, 10, 90,
                   1, 0, 3},
        all_reduce(0, 0, 1'000),
        all_reduce(1, 0, 1'020),
        send,
        MemorySample{0, static_cast<uint8_t>(memory::Category::kGrads), 50, 4096},
        StepEvent{0, 1, 0, 5'000, 3.5, 2048},
        StatEvent{"recorder_dropped_events", 1, 3, StatSeverity::kDataLoss, "buffer full"},
        StatEvent{"recorder_dropped_events", 1, 2, StatSeverity::kDataLoss, ""},
        exit_info(1, 101, 0, 9),
        // A rank killed before it connected: the launcher's record alone describes it.
        exit_info(2, 102, 1, 0),
    };
    writer->append(events);
    ASSERT_TRUE(writer->set_run_status(RunStatus::kFailed, 1, 6'000).is_ok());
    EXPECT_EQ(writer->write_errors(), 0u);
  }
  EXPECT_FALSE(fs::exists(writer_lock_path(path)));
  auto trace = open_trace(path);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(trace->status, RunStatus::kFailed);
  EXPECT_FALSE(trace->marked_incomplete);
  const SqliteDb& db = trace->db;
  EXPECT_EQ(query_rows(db, "SELECT rank, comm_id, seq, op, dtype, count, bytes, peer, ts_ns, dur_ns "
                     "FROM collectives ORDER BY rank, comm_id"),
            "0|dp0|0|all_reduce|float|256|1024|NULL|1000|100\n"
            "0|pp0-1|0|send|float|256|1024|1|3000|100\n"
            "1|dp0|0|all_reduce|float|256|1024|NULL|1020|100\n");
  EXPECT_EQ(query_rows(db, "SELECT reduce_op, group_ranks, group_size, enqueue_ns, state FROM "
                     "collectives WHERE rank = 1"),
            "sum|0,1|2|1015|completed\n");
  EXPECT_EQ(query_rows(db, "SELECT rank, ts_ns, category, bytes FROM memory_events"), "0|50|grads|4096\n");
  EXPECT_EQ(query_rows(db, "SELECT rank, track_kind, track, name, category, ts_ns, dur_ns, step, "
                     "micro_batch, layer FROM slices WHERE category = 'phase'"),
            "0|cpu_thread|main|forward|phase|10|90|1|0|3\n");
  EXPECT_EQ(query_rows(db, "SELECT category, count(*) FROM slices GROUP BY category ORDER BY 1"),
            "collective|2\np2p|1\nphase|1\n");
  EXPECT_EQ(query_rows(db, "SELECT rank, step, ts_ns, dur_ns, loss, tokens FROM steps"),
            "0|1|0|5000|3.5|2048\n");
  EXPECT_EQ(query_rows(db, "SELECT name, rank, value, severity, description FROM stats"),
            "recorder_dropped_events|1|5|data_loss|buffer full\n");
  EXPECT_EQ(query_rows(db,
                       "SELECT rank, host, pid, clock_offset_ns, clock_uncertainty_ns, exit_code, "
                       "exit_signal FROM ranks ORDER BY rank"),
            "0|hostA|100|0|0|NULL|NULL\n1|hostA|101|250|10|NULL|9\n2|hostA|102|NULL|NULL|1|0\n");
  EXPECT_EQ(query_rows(db, "SELECT rank, device, clock_drift_ppm FROM ranks ORDER BY rank"),
            "0|cpu|0.0\n1|cpu|12.5\n2|NULL|NULL\n");
  EXPECT_EQ(query_rows(db, "SELECT run_id, command, config, status, failing_rank, end_ns, world_size "
                     "FROM runs"),
            "r1|partrain launch -n 2|{\"dp\":2}|failed|1|6000|2\n");
  EXPECT_EQ(query_number(db, "PRAGMA user_version"), kTraceSchemaVersion);
}

// The format's document names the version the writer writes in its title (it said 6 of a
// version-7 writer).
TEST(TraceStore, FormatDocumentTitleNamesTheSchemaVersion) {
  std::ifstream doc(fs::path(PARTRAIN_SOURCE_DIR) / "docs/trace-format.md");
  std::string title;
  ASSERT_TRUE(std::getline(doc, title));
  EXPECT_EQ(title, fmt::format("# partrain trace format (schema version {})", kTraceSchemaVersion));
}

// A later RunInfo fills in what it knows and leaves the rest: how a launcher under an outer
// `partrain trace` adds its world size and config to the tracer's run row.
TEST_F(TraceStoreTest, ALaterRunInfoKeepsWhatItLeavesEmpty) {
  fs::path path = file("merged.db");
  {
    auto writer = make_writer(path);
    ASSERT_TRUE(writer);
    std::vector<TraceEvent> events = {
        RunInfo{"r7", "partrain trace -- partrain launch -n 2", "{}", 0, 111, 222},
        RunInfo{"", "", R"({"dp":2})", 2, 0, 0},
    };
    writer->append(events);
  }
  auto trace = open_trace(path);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(query_rows(trace->db,
                       "SELECT run_id, command, config, world_size, start_unix_ns, "
                       "start_ns FROM runs"),
            "r7|partrain trace -- partrain launch -n 2|{\"dp\":2}|2|111|222\n");
}

// A restarted worker (torchrun's attempt 1) runs step numbers its rank recorded in attempt 0:
// each attempt keeps its own steps, under its attempt. Within one attempt a step of a number
// already recorded (the job's step counter started again) replaces it in `step`, and the row it
// replaced is kept in `earlier_step`, not lost. The same step sent twice is one step.
TEST_F(TraceStoreTest, EachAttemptKeepsItsStepsAndARepeatWithinOneKeepsTheReplacedRow) {
  fs::path path = file("restarted.db");
  {
    auto writer = make_writer(path);
    ASSERT_TRUE(writer);
    std::vector<TraceEvent> events = {
        // Attempt 0: rank 1 runs steps 0-2, then fails; rank 0 runs 0-1, and 0 again.
        StepEvent{1, 0, 1'000, 100, 2.5, 64, 0},
        StepEvent{1, 1, 1'100, 100, 2.4, 64, 0},
        StepEvent{1, 2, 1'200, 100, 2.3, 64, 0},
        StepEvent{0, 0, 1'000, 100, 2.5, 64, 0},
        StepEvent{0, 1, 1'100, 100, 2.4, 64, 0},
        StepEvent{0, 1, 1'100, 100, 2.4, 64, 0},  // sent again: not an earlier step
        StepEvent{0, 0, 1'300, 100, 2.2, 64, 0},  // its counter started again
        // Attempt 1: both ranks run steps 0-1 again.
        StepEvent{1, 0, 9'000, 150, 2.6, 64, 1},
        StepEvent{1, 1, 9'150, 150, 2.5, 64, 1},
        StepEvent{0, 0, 9'000, 150, 2.6, 64, 1},
        StepEvent{0, 1, 9'150, 150, 2.5, 64, 1},
    };
    writer->append(events);
  }
  auto trace = open_trace(path);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(query_rows(trace->db,
                       "SELECT attempt, rank, step, ts_ns, dur_ns FROM steps "
                       "ORDER BY attempt, rank, step"),
            "0|0|0|1300|100\n0|0|1|1100|100\n0|1|0|1000|100\n0|1|1|1100|100\n0|1|2|1200|100\n"
            "1|0|0|9000|150\n1|0|1|9150|150\n1|1|0|9000|150\n1|1|1|9150|150\n");
  EXPECT_EQ(query_rows(trace->db,
                       "SELECT attempt, rank, step, ts_ns, dur_ns, loss, tokens FROM "
                       "earlier_steps ORDER BY rank, step"),
            "0|0|0|1000|100|2.5|64\n");
}

TEST_F(TraceStoreTest, MemoryCategoriesMatchTheMemoryModule) {
  fs::path path = file("mem.db");
  {
    auto writer = make_writer(path);
    ASSERT_TRUE(writer);
    int64_t ts = 0;
    for (memory::Category c : memory::kAllCategories) {
      writer->append(MemorySample{0, static_cast<uint8_t>(c), ts++, 1});
    }
  }
  auto trace = open_trace(path);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  std::string expected;
  for (memory::Category c : memory::kAllCategories) {
    expected += std::string(memory::category_name(c)) + "\n";
  }
  EXPECT_EQ(query_rows(trace->db, "SELECT category FROM memory_events ORDER BY ts_ns"), expected);
}

TEST_F(TraceStoreTest, BatchesCommitWhenDue) {
  fs::path path = file("batch.db");
  TraceWriterOptions options;
  options.max_commit_interval = std::chrono::milliseconds(100);
  auto writer = make_writer(path, options);
  ASSERT_TRUE(writer);
  auto reader = SqliteDb::open(path.string(), SQLITE_OPEN_READONLY);
  ASSERT_TRUE(reader.is_ok());
  writer->append(MemorySample{0, 0, 1, 1});
  EXPECT_EQ(query_number(*reader, "SELECT count(*) FROM memory"), 0) << "committed too early";
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  writer->commit_if_due();
  EXPECT_EQ(query_number(*reader, "SELECT count(*) FROM memory"), 1);

  // A live writer's run is reported running and is not touched.
  auto live = open_trace(path);
  ASSERT_TRUE(live.is_ok()) << live.status().message();
  EXPECT_EQ(live->status, RunStatus::kRunning);
  EXPECT_TRUE(live->writer_alive);
  EXPECT_FALSE(live->marked_incomplete);
  live = StatusOr<TraceFile>(Status::ok());

  // And through a symbolic link, or another spelling of its path: the lock is found beside the
  // file itself (a reader through a link took the live run for a dead writer's and marked it
  // incomplete for good).
  fs::create_symlink(path.filename(), file("link.db"));
  for (const fs::path& name : {file("link.db"), dir_ / "." / "batch.db"}) {
    auto other = open_trace(name);
    ASSERT_TRUE(other.is_ok()) << other.status().message();
    EXPECT_EQ(other->status, RunStatus::kRunning) << name;
    EXPECT_TRUE(other->writer_alive) << name;
    EXPECT_FALSE(other->marked_incomplete) << name;
  }
  EXPECT_EQ(query_rows(*reader, "SELECT status FROM runs"), "running\n");
}

// A dangling link at a new trace's name (planted in a directory others write to): SQLite followed
// it and created the trace, and the writer its lock, where it pointed; launch refuses one as
// "already exists", but import's and merge's temporaries are made with overwrite. Refused, the
// link named, nothing made.
TEST_F(TraceStoreTest, ATraceIsNeverCreatedThroughADanglingLink) {
  const fs::path path = file("import.tmp"), elsewhere = file("elsewhere.db");
  fs::create_symlink(elsewhere, path);
  TraceWriterOptions options;
  options.overwrite = true;
  auto writer = TraceWriter::create(path, options);
  ASSERT_FALSE(writer.is_ok());
  EXPECT_NE(writer.status().message().find(path.string() + " is a symbolic link"),
            std::string::npos)
      << writer.status().message();
  EXPECT_FALSE(fs::exists(elsewhere));
  EXPECT_FALSE(fs::exists(elsewhere.string() + "-writer"));
  EXPECT_FALSE(fs::exists(elsewhere.string() + "-reserve"));
}

// A link planted at the disk reserve or the writer lock is refused, naming it, and its target is
// neither written (the reserve's zeros, the lock's "host pid") nor the link removed.
TEST_F(TraceStoreTest, ALinkAtACompanionFileIsRefusedNotWrittenThrough) {
  for (const char* suffix : {"-reserve", "-writer"}) {
    const fs::path path = file(std::string("planted") + suffix + ".db");
    const fs::path victim = file(std::string("victim") + suffix);
    std::ofstream(victim) << "precious";
    fs::create_symlink(victim, path.string() + suffix);
    auto writer = TraceWriter::create(path);
    ASSERT_FALSE(writer.is_ok()) << suffix;
    EXPECT_NE(writer.status().message().find(path.string() + suffix + " is a symbolic link"),
              std::string::npos)
        << writer.status().message();
    EXPECT_EQ(fs::file_size(victim), 8u) << suffix;
    EXPECT_TRUE(fs::is_symlink(fs::symlink_status(path.string() + suffix))) << suffix;
    EXPECT_FALSE(fs::exists(path)) << suffix;
  }
}

TEST_F(TraceStoreTest, LargeBatchCommitsBeforeTheInterval) {
  fs::path path = file("large.db");
  TraceWriterOptions options;
  options.max_commit_interval = std::chrono::hours(1);
  options.max_batch_events = 10;
  auto writer = make_writer(path, options);
  ASSERT_TRUE(writer);
  auto reader = SqliteDb::open(path.string(), SQLITE_OPEN_READONLY);
  ASSERT_TRUE(reader.is_ok());
  std::vector<TraceEvent> batch;
  for (int i = 0; i < 10; ++i) batch.push_back(MemorySample{0, 0, i, 1});
  writer->append(batch);
  EXPECT_EQ(query_number(*reader, "SELECT count(*) FROM memory"), 10);
}

int64_t index_count(const SqliteDb& db, std::string_view name) {
  return query_number(db, fmt::format("SELECT count(*) FROM sqlite_schema WHERE type = 'index' "
                                      "AND name = '{}'", name));
}

std::vector<TraceEvent> slices_on_two_tracks(int count) {
  std::vector<TraceEvent> batch;
  for (int i = 0; i < count; ++i) {
    batch.push_back(SliceEvent{i % 2, TrackKind::kCpuThread, "main", "op",
                               SliceCategory::kCompute, count - i, 1, 0, -1, -1});
  }
  return batch;
}

// slice_track_ts is built when the writer closes the file (share/schema.sql, deferred indexes):
// a reader of the running trace gets the same answers without it.
TEST_F(TraceStoreTest, SliceIndexIsBuiltWhenTheWriterCloses) {
  fs::path path = file("indexed.db");
  auto writer = make_writer(path);
  ASSERT_TRUE(writer);
  writer->append(slices_on_two_tracks(1000));
  ASSERT_TRUE(writer->commit().is_ok());
  const std::string by_track_and_time =
      "SELECT count(*), min(ts_ns), max(ts_ns) FROM slice WHERE track_id = 2 AND ts_ns >= 100";
  {
    auto live = open_trace(path);
    ASSERT_TRUE(live.is_ok()) << live.status().message();
    EXPECT_TRUE(live->writer_alive);
    EXPECT_EQ(index_count(live->db, "slice_track_ts"), 0);
    EXPECT_EQ(query_rows(live->db, by_track_and_time), "450|101|999\n");
  }
  writer.reset();
  auto closed = open_trace(path);
  ASSERT_TRUE(closed.is_ok()) << closed.status().message();
  EXPECT_EQ(index_count(closed->db, "slice_track_ts"), 1);
  EXPECT_EQ(query_rows(closed->db, by_track_and_time), "450|101|999\n");
  EXPECT_NE(query_rows(closed->db, "EXPLAIN QUERY PLAN " + by_track_and_time)
                .find("slice_track_ts"),
            std::string::npos);
  EXPECT_EQ(query_rows(closed->db, "PRAGMA integrity_check"), "ok\n");
}

// Memory samples are appended in arrival order (two ranks interleaved); the covering index built
// at close serves each rank's replay in time order without touching the table.
TEST_F(TraceStoreTest, MemoryIndexIsBuiltWhenTheWriterClosesAndCoversTheReplay) {
  fs::path path = file("memory.db");
  auto writer = make_writer(path);
  ASSERT_TRUE(writer);
  std::vector<TraceEvent> samples;
  for (int64_t i = 0; i < 100; ++i) {
    for (int32_t rank : {1, 0}) samples.push_back(MemorySample{rank, 3, 1000 - i * 10, i * 100 + rank});
  }
  writer->append(samples);
  ASSERT_TRUE(writer->commit().is_ok());
  const std::string replay =
      "SELECT count(*), min(ts_ns), max(ts_ns), sum(bytes) FROM memory WHERE rank = 1";
  {
    auto live = open_trace(path);
    ASSERT_TRUE(live.is_ok()) << live.status().message();
    EXPECT_EQ(index_count(live->db, "memory_rank_ts"), 0);
    EXPECT_EQ(query_rows(live->db, replay), "100|10|1000|495100\n");
  }
  writer.reset();
  auto closed = open_trace(path);
  ASSERT_TRUE(closed.is_ok()) << closed.status().message();
  EXPECT_EQ(index_count(closed->db, "memory_rank_ts"), 1);
  EXPECT_EQ(query_rows(closed->db, replay), "100|10|1000|495100\n");
  const std::string ordered = "SELECT ts_ns, bytes FROM memory WHERE rank = 1 ORDER BY ts_ns LIMIT 2";
  EXPECT_EQ(query_rows(closed->db, ordered), "10|9901\n20|9801\n");
  const std::string plan = query_rows(closed->db, "EXPLAIN QUERY PLAN " + ordered);
  EXPECT_NE(plan.find("COVERING INDEX memory_rank_ts"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("TEMP B-TREE"), std::string::npos) << plan;
}

TEST_F(TraceStoreTest, SecondWriterAndExistingFileAreRefused) {
  fs::path path = file("one.db");
  auto first = make_writer(path);
  ASSERT_TRUE(first);
  auto second = TraceWriter::create(path, {.overwrite = true});
  ASSERT_FALSE(second.is_ok());
  EXPECT_NE(second.status().message().find("another process"), std::string::npos);
  first.reset();
  auto again = TraceWriter::create(path);
  ASSERT_FALSE(again.is_ok());
  EXPECT_NE(again.status().message().find("already exists"), std::string::npos);
  EXPECT_TRUE(TraceWriter::create(path, {.overwrite = true}).is_ok());
}

using testing::kill_writer_after_commits;

// The writer process dies (SIGKILL) with a batch open: committed batches survive, the open one
// is gone, and the first reader marks the run incomplete.
TEST_F(TraceStoreTest, WriterKilledMidBatchLeavesAnIncompleteReadableTrace) {
  fs::path path = file("killed.db");
  constexpr int kBatches = 3;
  constexpr int kPerBatch = 1000;
  std::vector<TraceEvent> lost(kPerBatch, MemorySample{0, 0, 0, 1});
  for (int i = 0; i < kPerBatch; ++i) std::get<MemorySample>(lost[i]).ts_ns = i;
  kill_writer_after_commits(path, kBatches, kPerBatch, lost);
  ASSERT_TRUE(fs::exists(writer_lock_path(path)));
  ASSERT_TRUE(fs::exists(disk_reserve_path(path))) << "the dead writer's reserve is left";

  auto strict = open_trace(path, TraceOpenMode::kReadStrict);
  ASSERT_TRUE(strict.is_ok()) << strict.status().message();
  EXPECT_EQ(strict->status, RunStatus::kIncomplete);
  EXPECT_FALSE(strict->marked_incomplete);
  strict = StatusOr<TraceFile>(Status::ok());  // close before the marking open

  auto trace = open_trace(path);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(trace->status, RunStatus::kIncomplete);
  EXPECT_TRUE(trace->marked_incomplete);
  EXPECT_FALSE(trace->writer_alive);
  EXPECT_EQ(query_rows(trace->db, "PRAGMA integrity_check"), "ok\n");
  EXPECT_EQ(query_number(trace->db, "SELECT count(*) FROM slices"), kBatches * kPerBatch);
  EXPECT_EQ(query_number(trace->db, "SELECT count(*) FROM memory_events"), 0);
  EXPECT_EQ(query_rows(trace->db, "SELECT status FROM runs"), "incomplete\n");
  EXPECT_EQ(query_rows(trace->db, "SELECT name, severity FROM stats"), "run_incomplete|data_loss\n");
  EXPECT_FALSE(fs::exists(disk_reserve_path(path))) << "marking it incomplete frees the reserve";
  EXPECT_FALSE(fs::exists(writer_lock_path(path))) << "and removes the dead writer's lock file";
  trace = StatusOr<TraceFile>(Status::ok());

  // The writer died before building the deferred indexes; whoever finishes the trace can.
  auto db = SqliteDb::open(path.string(), SQLITE_OPEN_READWRITE);
  ASSERT_TRUE(db.is_ok()) << db.status().message();
  ASSERT_TRUE(create_deferred_indexes(*db).is_ok()) << db->error_message();
  ASSERT_TRUE(create_deferred_indexes(*db).is_ok()) << "a second time builds nothing";
  EXPECT_EQ(index_count(*db, "slice_track_ts"), 1);
  EXPECT_EQ(query_rows(*db, "PRAGMA integrity_check"), "ok\n");
}

// A killed run's trace first read while its disk is full (played by the file-size limit, which
// needs no root and fails SQLite's writes the same way): that reader marks it incomplete but
// cannot build the indexes. It frees the dead writer's reserve all the same (the room the rest
// needs), and the next reader, with room, finishes the job: indexes, one file, no lock.
TEST_F(TraceStoreTest, AReaderFinishesWhatAFullDiskLeftOfADeadWritersTrace) {
  fs::path path = file("killed_full.db");
  kill_writer_after_commits(path, 20, 1000, {});
  ASSERT_TRUE(fs::exists(disk_reserve_path(path)));

  // Room for the marking (a few pages more in either file), not for the indexes.
  std::error_code error;
  const uintmax_t wal_bytes = fs::file_size(path.string() + "-wal", error);
  const auto room = static_cast<rlim_t>(
      std::max<uintmax_t>(fs::file_size(path), error ? 0 : wal_bytes) + (64 << 10));
  testing::LimitedRun first = testing::run_with_file_size_limit(room, [&] {
    auto trace = open_trace(path);
    if (!trace.is_ok() || !trace->marked_incomplete) return 3;
    return fs::exists(writer_lock_path(path)) ? 0 : 4;  // not finished: the scenario holds
  });
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.err.find("a later read finishes the job"), std::string::npos) << first.err;
  EXPECT_FALSE(fs::exists(disk_reserve_path(path))) << "the first reader frees the reserve";

  {
    auto trace = open_trace(path);
    ASSERT_TRUE(trace.is_ok()) << trace.status().message();
    EXPECT_EQ(trace->status, RunStatus::kIncomplete);
    EXPECT_FALSE(trace->marked_incomplete) << "marked by the first reader";
    EXPECT_EQ(index_count(trace->db, "slice_track_ts"), 1);
    EXPECT_EQ(query_number(trace->db, "SELECT count(*) FROM slices"), 20000);
  }
  EXPECT_FALSE(fs::exists(writer_lock_path(path))) << "the second reader removes the lock";
  EXPECT_FALSE(fs::exists(path.string() + "-wal"));
  EXPECT_FALSE(fs::exists(path.string() + "-shm"));
}

std::vector<TraceEvent> numbered_slices(int count, int64_t& ts) {
  std::vector<TraceEvent> batch;
  for (int i = 0; i < count; ++i) {
    batch.push_back(SliceEvent{0, TrackKind::kCpuThread, "main", fmt::format("op{}", ts % 7),
                               SliceCategory::kCompute, ts, 1, ts / 100, -1, -1});
    ++ts;
  }
  return batch;
}

TEST_F(TraceStoreTest, DiskReserveIsHeldWhileWritingAndFreedAtClose) {
  fs::path path = file("reserve.db");
  TraceWriterOptions options;
  options.disk_reserve_bytes = 3 << 20;
  auto writer = make_writer(path, options);
  ASSERT_TRUE(writer);
  std::error_code error;
  EXPECT_EQ(fs::file_size(disk_reserve_path(path), error), uint64_t{3} << 20);
  writer.reset();
  EXPECT_FALSE(fs::exists(disk_reserve_path(path)));
}

// At a full disk the stop checkpoints the write-ahead log into the file with the space the
// reserve frees: the log must never hold more than half of it, however many events a batch
// gathers in its 250 ms. It held one whole batch (20 000 slices here, 1.4 MiB beside a 512 KiB
// reserve), and the log bound itself was at least 128 KiB, twice the least reserve of 64 KiB.
TEST_F(TraceStoreTest, TheWriteAheadLogNeverHoldsMoreThanHalfTheDiskReserve) {
  fs::path path = file("bounded.db");
  TraceWriterOptions options;
  options.disk_reserve_bytes = DiskReserve::kMinReserveBytes;
  options.max_commit_interval = std::chrono::hours(1);
  auto writer = make_writer(path, options);
  ASSERT_TRUE(writer);
  std::error_code error;
  ASSERT_EQ(fs::file_size(disk_reserve_path(path), error), DiskReserve::kMinReserveBytes);
  int64_t ts = 0;
  for (int chunk = 0; chunk < 80; ++chunk) {
    writer->append(numbered_slices(250, ts));
    EXPECT_LE(fs::file_size(path.string() + "-wal", error), DiskReserve::kMinReserveBytes / 2)
        << "after " << ts << " slices";
  }
  ASSERT_TRUE(writer->commit().is_ok());
  EXPECT_LE(fs::file_size(path.string() + "-wal", error), DiskReserve::kMinReserveBytes / 2);
  writer.reset();
  auto trace = open_trace(path);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(query_number(trace->db, "SELECT count(*) FROM slices"), ts);
}

// Tracing starts only where a full disk later still lets the trace be closed, and the refusal
// says what to do.
TEST_F(TraceStoreTest, ADiskWithLessThanTheLeastReserveAndTraceRoomIsRefused) {
  EXPECT_TRUE(check_room_for_trace("t.db", DiskReserve::kMinFreeBytes).is_ok());
  Status refused = check_room_for_trace("t.db", 450 << 10);
  EXPECT_EQ(refused.code(), StatusCode::kFailed);
  EXPECT_THAT(refused.message(),
              ::testing::HasSubstr("the filesystem of t.db has 450.00 KiB free, and a trace needs "
                                   "at least 1.00 MiB to be closed properly"));
  EXPECT_THAT(refused.message(), ::testing::HasSubstr("free some space, trace into a file on "
                                                      "another filesystem (--trace FILE), or run "
                                                      "without a trace (--no-trace)"));
}

// A writer of a file limited to 1 MiB, fed batches of 1000 slices (from ts on) until tracing
// stops; `committed`: how many were stored before. Its disk reserve is held until the stop.
std::unique_ptr<TraceWriter> fill_until_stopped(const fs::path& path,
                                                std::chrono::milliseconds commit_interval,
                                                int64_t& ts, uint64_t& committed) {
  TraceWriterOptions options;
  options.max_file_bytes = 1 << 20;
  options.max_commit_interval = commit_interval;
  auto writer = make_writer(path, options);
  if (!writer) return nullptr;
  EXPECT_TRUE(fs::exists(disk_reserve_path(path)));
  for (int batch = 0; batch < 500 && writer->stop_reason().empty(); ++batch) {
    writer->append(numbered_slices(1000, ts));
    if (writer->commit().is_ok() && writer->stop_reason().empty()) committed = ts;
  }
  return writer;
}

// A full file (here the size limit; a full disk gives SQLite the same SQLITE_FULL) stops tracing:
// the rows committed before stay, the batch in flight and everything after are counted, and the
// run's own rows (stats, status) are still stored.
TEST_F(TraceStoreTest, FullFileStopsTracingAndKeepsEveryCommittedEvent) {
  fs::path path = file("full.db");
  int64_t ts = 0;
  uint64_t committed = 0;
  auto writer = fill_until_stopped(path, std::chrono::hours(1), ts, committed);
  ASSERT_TRUE(writer);
  ASSERT_FALSE(writer->stop_reason().empty()) << "1 MiB never filled up";
  EXPECT_THAT(writer->stop_reason(), ::testing::HasSubstr("size limit of 1048576 bytes"));
  EXPECT_GT(committed, 0u);
  EXPECT_EQ(writer->events_dropped(), static_cast<uint64_t>(ts) - committed)
      << "exactly the batch in flight is lost";
  EXPECT_FALSE(fs::exists(disk_reserve_path(path))) << "the reserve is handed back";

  // Later events are counted, not stored; the run's rows still go in.
  writer->append(numbered_slices(250, ts));
  writer->append(MemorySample{0, 1, 2, 3});
  writer->append(StatEvent{"probe", 0, 7, StatSeverity::kInfo, "stored after the stop"});
  EXPECT_EQ(writer->events_dropped(), static_cast<uint64_t>(ts) - committed + 1);
  ASSERT_TRUE(writer->set_run_status(RunStatus::kCompleted, std::nullopt, ts).is_ok());
  const uint64_t dropped = writer->events_dropped();
  writer.reset();

  auto trace = open_trace(path);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(trace->status, RunStatus::kCompleted);
  EXPECT_EQ(query_rows(trace->db, "PRAGMA integrity_check"), "ok\n");
  EXPECT_EQ(query_number(trace->db, "SELECT count(*) FROM slices"), static_cast<int64_t>(committed));
  EXPECT_EQ(query_number(trace->db, "SELECT max(ts_ns) FROM slices"),
            static_cast<int64_t>(committed) - 1);
  EXPECT_EQ(query_number(trace->db, "SELECT count(*) FROM memory_events"), 0);
  EXPECT_EQ(query_number(trace->db, "SELECT value FROM stats WHERE name = 'trace_stopped'"),
            static_cast<int64_t>(dropped));
  EXPECT_EQ(query_rows(trace->db, "SELECT severity FROM stats WHERE name = 'trace_stopped'"),
            "data_loss\n");
  EXPECT_THAT(query_rows(trace->db, "SELECT description FROM stats WHERE name = 'trace_stopped'"),
              ::testing::HasSubstr("tracing stopped: the disk is full or the trace reached"));
  EXPECT_EQ(query_number(trace->db, "SELECT value FROM stats WHERE name = 'probe'"), 7);
  EXPECT_FALSE(fs::exists(writer_lock_path(path)));
}

// Every event fit under --trace-max-size but the indexes built at close did not: the log said
// "database or disk is full" (the disk had room) and the trace kept no word of it. Now the trace
// stays as it was, every event readable, with the stat trace_indexes_not_built naming the limit.
TEST_F(TraceStoreTest, IndexesThatDoNotFitUnderTheSizeLimitAreLeftOutAndSaidSo) {
  fs::path path = file("capped.db");
  TraceWriterOptions options;
  options.max_file_bytes = 2 << 20;
  auto writer = make_writer(path, options);
  ASSERT_TRUE(writer);
  int64_t ts = 0;
  {
    auto reader = SqliteDb::open(path.string(), SQLITE_OPEN_READONLY);
    ASSERT_TRUE(reader.is_ok());
    // Slices up to ~85% of the limit: their index (track, ts) needs more than the rest.
    const char* kBytes = "SELECT page_count * page_size FROM pragma_page_count, pragma_page_size";
    while (query_number(*reader, kBytes) <
           static_cast<int64_t>(options.max_file_bytes * 85 / 100)) {
      writer->append(numbered_slices(500, ts));
      ASSERT_TRUE(writer->commit().is_ok());
      ASSERT_TRUE(writer->stop_reason().empty()) << writer->stop_reason();
    }
  }
  ASSERT_TRUE(writer->set_run_status(RunStatus::kCompleted, std::nullopt, ts).is_ok());
  writer.reset();

  auto trace = open_trace(path);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(trace->status, RunStatus::kCompleted);
  EXPECT_EQ(query_number(trace->db, "SELECT count(*) FROM slices"), ts);
  EXPECT_EQ(index_count(trace->db, "slice_track_ts"), 0);
  EXPECT_EQ(query_number(trace->db, "SELECT count(*) FROM stats WHERE name = 'trace_stopped'"), 0);
  EXPECT_EQ(
      query_rows(trace->db, "SELECT severity FROM stats WHERE name = 'trace_indexes_not_built'"),
      "info\n");
  EXPECT_THAT(
      query_rows(trace->db, "SELECT description FROM stats WHERE name = 'trace_indexes_not_built'"),
      ::testing::HasSubstr("did not fit under the trace's size limit of 2097152 bytes "
                           "(--trace-max-size); every event is stored"));
}

// Once tracing stopped, trace_stopped follows the events dropped while the run goes on (on the
// commit cadence), not only at the end: a live reader (the metrics endpoint) served the count at
// the stop, 300 times too low, until the run ended.
TEST_F(TraceStoreTest, AfterAStopTheDroppedCountReachesLiveReadersOnTheCommitCadence) {
  fs::path path = file("stopped-live.db");
  int64_t ts = 0;
  uint64_t committed = 0;
  auto writer = fill_until_stopped(path, std::chrono::milliseconds(100), ts, committed);
  ASSERT_TRUE(writer);
  ASSERT_FALSE(writer->stop_reason().empty()) << "1 MiB never filled up";
  auto reader = SqliteDb::open(path.string(), SQLITE_OPEN_READONLY);
  ASSERT_TRUE(reader.is_ok());
  const char* kCount = "SELECT value FROM stats WHERE name = 'trace_stopped'";
  const int64_t at_stop = query_number(*reader, kCount);
  EXPECT_EQ(at_stop, static_cast<int64_t>(writer->events_dropped()));

  writer->append(numbered_slices(250, ts));
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  writer->append(numbered_slices(50, ts));  // the events of a later batch, past the interval
  EXPECT_EQ(query_number(*reader, kCount), at_stop + 300);
  writer->append(numbered_slices(20, ts));
  EXPECT_EQ(query_number(*reader, kCount), at_stop + 300) << "at most once per interval";
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  writer->commit_if_due();  // the collector's idle tick
  EXPECT_EQ(query_number(*reader, kCount), at_stop + 320);
  EXPECT_EQ(query_number(*reader, kCount), static_cast<int64_t>(writer->events_dropped()));
}

// The run's own rows in the batch a stop rolls back are stored after it: each batch carries a
// rank's exit beside its slices, and the status is set with each commit (a launch's last batch
// carries the ranks' exits, and its status follows). With 1000 slices a batch the file fills
// while the append stores them; with 50, fewer than a row batch holds, only when the status's
// commit flushes them. Either way every rank and the final status are in the trace.
TEST_F(TraceStoreTest, TheRunsRowsInTheBatchAStopRollsBackAreStoredAfterIt) {
  for (int slices_per_batch : {1000, 50}) {
    SCOPED_TRACE(fmt::format("{} slices a batch", slices_per_batch));
    fs::path path = file(fmt::format("full-{}.db", slices_per_batch));
    TraceWriterOptions options;
    options.max_file_bytes = 1 << 20;
    options.max_commit_interval = std::chrono::hours(1);
    auto writer = make_writer(path, options);
    ASSERT_TRUE(writer);
    int64_t ts = 0;
    int ranks = 0;
    for (; ranks < 5000 && writer->stop_reason().empty(); ++ranks) {
      std::vector<TraceEvent> batch = numbered_slices(slices_per_batch, ts);
      RankInfo rank;
      rank.rank = ranks;
      rank.exited = true;
      batch.emplace_back(rank);
      writer->append(batch);
      ASSERT_TRUE(writer->set_run_status(RunStatus::kCompleted, std::nullopt, ts).is_ok());
    }
    ASSERT_FALSE(writer->stop_reason().empty()) << "1 MiB never filled up";
    writer.reset();

    auto trace = open_trace(path);
    ASSERT_TRUE(trace.is_ok()) << trace.status().message();
    EXPECT_EQ(trace->status, RunStatus::kCompleted);
    EXPECT_EQ(query_number(trace->db, "SELECT end_ns FROM runs"), ts) << "the last status set";
    EXPECT_EQ(query_number(trace->db, "SELECT count(*) FROM rank WHERE exit_code = 0"), ranks);
    EXPECT_EQ(query_number(trace->db, "SELECT value FROM stats WHERE name = 'trace_stopped'"),
              static_cast<int64_t>(ts) - query_number(trace->db, "SELECT count(*) FROM slices"));
  }
}

void write_bytes(const fs::path& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(),
                                                               static_cast<std::streamsize>(bytes.size()));
}

void expect_unreadable(const fs::path& path, std::string_view says) {
  auto trace = open_trace(path);
  ASSERT_FALSE(trace.is_ok()) << path << " opened";
  EXPECT_EQ(trace.status().code(), StatusCode::kUnreadable);
  EXPECT_EQ(trace.status().exit_code(), 3);
  EXPECT_NE(trace.status().message().find(says), std::string::npos) << trace.status().message();
}

fs::path closed_trace(const fs::path& path, int slices) {
  auto writer = make_writer(path);
  std::vector<TraceEvent> batch;
  for (int i = 0; i < slices; ++i) {
    batch.push_back(SliceEvent{i % 4, TrackKind::kCpuThread, "main", fmt::format("op{}", i % 50),
                               SliceCategory::kCompute, i, 1, i / 100, -1, -1});
  }
  writer->append(batch);
  (void)writer->set_run_status(RunStatus::kCompleted);
  return path;
}

TEST_F(TraceStoreTest, BadInputsSayWhichCase) {
  expect_unreadable(file("missing.db"), "cannot open");
  write_bytes(file("empty.db"), "");
  expect_unreadable(file("empty.db"), "not an SQLite database");
  write_bytes(file("text.db"), "rank,step\n0,1\n");
  expect_unreadable(file("text.db"), "not an SQLite database");

  {
    auto other = SqliteDb::open(file("other.db").string(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    ASSERT_TRUE(other.is_ok());
    ASSERT_TRUE(other->exec("CREATE TABLE t (x); INSERT INTO t VALUES (1)").is_ok());
  }
  expect_unreadable(file("other.db"), "not a partrain trace");

  fs::path newer = closed_trace(file("newer.db"), 10);
  {
    auto db = SqliteDb::open(newer.string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE(db->exec(fmt::format("PRAGMA user_version = {}", kTraceSchemaVersion + 1)).is_ok());
  }
  expect_unreadable(newer, "newer than this partrain reads");

  fs::path truncated = closed_trace(file("truncated.db"), 20'000);
  fs::resize_file(truncated, fs::file_size(truncated) / 2);
  expect_unreadable(truncated, "truncated or corrupted");
  fs::resize_file(truncated, 60);
  expect_unreadable(truncated, "truncated or corrupted");

  fs::path corrupt = closed_trace(file("corrupt.db"), 20'000);
  {
    std::fstream f(corrupt, std::ios::binary | std::ios::in | std::ios::out);
    std::string garbage(8192 * 4, '\x5a');
    f.seekp(8192 * 6);
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  expect_unreadable(corrupt, "truncated or corrupted");
  // One line naming the first problem and how many more, and the way out, not SQLite's list of
  // up to 100 lines.
  const std::string said = open_trace(corrupt).status().message();
  EXPECT_EQ(said.find('\n'), std::string::npos) << said;
  EXPECT_LT(said.size(), 400u) << said;
  EXPECT_NE(said.find(".recover"), std::string::npos) << said;

  // None of the failed opens wrote to its input.
  EXPECT_EQ(fs::file_size(file("text.db")), 14u);
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The writer-only rate for `bench ingest`: prints events/s and bytes/event, asserts only that
// everything arrived (speed depends on the machine).
TEST_F(TraceStoreTest, TraceWriterThroughput) {
  fs::path path = file("bench.db");
  constexpr int kRanks = 8;
  constexpr int kEach = 400'000;  // of slices and of memory samples
  std::vector<TraceEvent> batch;
  batch.reserve(2 * 50'000);
  auto writer = make_writer(path);
  ASSERT_TRUE(writer);
  auto start = std::chrono::steady_clock::now();
  double cpu_start = thread_cpu_seconds();
  for (int i = 0; i < kEach; ++i) {
    int rank = i % kRanks;
    batch.push_back(SliceEvent{rank, TrackKind::kCpuThread, "main",
                               i % 3 == 0 ? "forward" : (i % 3 == 1 ? "backward" : "optimizer"),
                               SliceCategory::kPhase, int64_t{i} * 1000, 900, i / 1000, i % 4,
                               i % 24});
    batch.push_back(MemorySample{rank, static_cast<uint8_t>(i % 7), int64_t{i} * 1000,
                                 int64_t{i} * 4096});
    if (batch.size() == batch.capacity()) {
      writer->append(batch);
      batch.clear();
    }
  }
  writer->append(batch);
  ASSERT_TRUE(writer->commit().is_ok());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double cpu_seconds = thread_cpu_seconds() - cpu_start;
  writer.reset();  // checkpoints the WAL into the file
  double events = 2.0 * kEach;
  auto size = static_cast<double>(fs::file_size(path));
  // CPU time too: on a shared 2-core machine the wall clock also measures the neighbours.
  std::printf("[ bench ingest ] writer only: %.0f events in %.3f s = %.0f events/s "
              "(%.0f events per CPU second), %.1f bytes/event\n",
              events, seconds, events / seconds, events / cpu_seconds, size / events);
  auto trace = open_trace(path);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(query_number(trace->db, "SELECT count(*) FROM slice"), kEach);
  EXPECT_EQ(query_number(trace->db, "SELECT count(*) FROM memory"), kEach);
}

}  // namespace
}  // namespace partrain::profiler

namespace partrain::profiler {
namespace {

class ClosedTraceTest : public ::testing::Test {
 protected:
  testing::ScratchDir scratch_;
};

TEST_F(ClosedTraceTest, IsOneFileThatReadersLeaveAlone) {
  const fs::path path = scratch_.path() / "closed.db";
  {
    auto writer = TraceWriter::create(path);
    ASSERT_TRUE(writer.is_ok()) << writer.status().message();
    std::vector<TraceEvent> events{all_reduce(0, 0, 1000), all_reduce(1, 0, 1010)};
    (*writer)->append(events);
    ASSERT_TRUE((*writer)->set_run_status(RunStatus::kCompleted).is_ok());
  }
  EXPECT_FALSE(fs::exists(path.string() + "-wal"));
  EXPECT_FALSE(fs::exists(path.string() + "-shm"));
  {
    SqliteDb db = open_read_only(path);
    EXPECT_EQ(query_rows(db, "PRAGMA journal_mode"), "delete\n");
    EXPECT_EQ(query_number(db, "SELECT count(*) FROM collectives"), 2);
  }
  EXPECT_FALSE(fs::exists(path.string() + "-wal"));  // a reader of a closed trace writes nothing
  EXPECT_FALSE(fs::exists(path.string() + "-shm"));
}

TEST_F(ClosedTraceTest, StaysInWalModeWhileAReaderHoldsItAndKeepsEveryRow) {
  const fs::path path = scratch_.path() / "read.db";
  auto writer = TraceWriter::create(path);
  ASSERT_TRUE(writer.is_ok());
  std::vector<TraceEvent> events{all_reduce(0, 0, 1000)};
  (*writer)->append(events);
  ASSERT_TRUE((*writer)->commit().is_ok());
  SqliteDb reader = open_read_only(path);  // a live dashboard
  EXPECT_EQ(query_number(reader, "SELECT count(*) FROM collectives"), 1);
  ASSERT_TRUE((*writer)->set_run_status(RunStatus::kCompleted).is_ok());
  writer->reset();
  EXPECT_EQ(query_rows(reader, "SELECT status FROM runs"), "completed\n");
  EXPECT_EQ(query_rows(reader, "PRAGMA journal_mode"), "wal\n");
}

}  // namespace
}  // namespace partrain::profiler
