// trace_read_error: a damaged page of an event table, met by a read after open_trace (whose probe
// of a large file leaves the event tables unchecked), is the same exit 3 as one open_trace finds;
// other read errors stay failures. A trace missing a table or view of its schema is exit 3 too,
// naming what is missing; a live writer's lock is left alone by a reader. A killed writer's log
// left beside a closed trace copied to its name is refused, never read nor folded in.
#include "profiler/trace_open.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "profiler/sqlite_db.h"
#include "profiler/trace_writer.h"
#include "tests/support/killed_writer.h"
#include "tests/support/scratch_dir.h"

namespace partrain::profiler {
namespace {

namespace fs = std::filesystem;

fs::path write_slices(const fs::path& path, int slices) {
  auto writer = TraceWriter::create(path);
  EXPECT_TRUE(writer.is_ok()) << writer.status().message();
  std::vector<TraceEvent> batch;
  for (int i = 0; i < slices; ++i) {
    batch.push_back(SliceEvent{i % 4, TrackKind::kCpuThread, "main", "op", SliceCategory::kCompute,
                               i, 1, i / 100, -1, -1});
  }
  (*writer)->append(batch);
  EXPECT_TRUE((*writer)->set_run_status(RunStatus::kCompleted).is_ok());
  return path;
}

// Overwrites page `page` (1-based) with garbage.
void damage_page(const fs::path& path, int64_t page, int64_t page_bytes) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  const std::string garbage(static_cast<size_t>(page_bytes), '\x5a');
  f.seekp((page - 1) * page_bytes);
  f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
}

TEST(TraceOpenTest, DamagedEventPageReadLaterIsUnreadable) {
  testing::ScratchDir dir;
  const fs::path path = write_slices(dir.path() / "damaged.db", 20'000);
  int64_t root = 0, page_bytes = 0;
  {
    auto db = SqliteDb::open(path.string(), SQLITE_OPEN_READONLY);
    ASSERT_TRUE(db.is_ok());
    root = std::stoll(db->query_text("SELECT rootpage FROM sqlite_schema WHERE name = 'slice'")
                          ->value_or("0"));
    page_bytes = std::stoll(db->query_text("PRAGMA page_size")->value_or("0"));
  }
  ASSERT_GT(root, 1);
  damage_page(path, root, page_bytes);

  // Read as an analysis reads after open_trace's probe let the file through.
  auto db = SqliteDb::open(path.string(), SQLITE_OPEN_READONLY);
  ASSERT_TRUE(db.is_ok());
  auto stmt = SqliteStatement::prepare(*db, "SELECT ts_ns, dur_ns FROM slice");
  ASSERT_TRUE(stmt.is_ok());
  int rc = SQLITE_ROW;
  while ((rc = stmt->step()) == SQLITE_ROW) {
  }
  ASSERT_NE(rc, SQLITE_DONE);
  const Status error = trace_read_error(*db, "reading the slices of rank 0");
  EXPECT_EQ(error.code(), StatusCode::kUnreadable);
  EXPECT_EQ(error.exit_code(), 3);
  EXPECT_NE(error.message().find("reading the slices of rank 0: the trace is truncated or "
                                 "corrupted"),
            std::string::npos)
      << error.message();

  // open_trace checks a file of this size in full, so it refuses it up front.
  auto opened = open_trace(path, TraceOpenMode::kReadStrict);
  ASSERT_FALSE(opened.is_ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kUnreadable);
}

TEST(TraceOpenTest, OtherReadErrorsStayFailures) {
  testing::ScratchDir dir;
  const fs::path path = write_slices(dir.path() / "fine.db", 10);
  auto trace = open_trace(path, TraceOpenMode::kReadStrict);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_FALSE(SqliteStatement::prepare(trace->db, "SELECT x FROM no_such_table").is_ok());
  const Status error = trace_read_error(trace->db, "reading x");
  EXPECT_EQ(error.code(), StatusCode::kFailed);
  EXPECT_NE(error.message().find("reading x: no such table"), std::string::npos)
      << error.message();
}

// A directory given as the trace is said to be one (it read "is not an SQLite database (it is
// empty)"); exit 3 as any unreadable trace.
TEST(TraceOpenTest, ADirectoryIsSaidToBeOne) {
  testing::ScratchDir dir;
  const fs::path path = dir.path() / "run.db";
  fs::create_directories(path);
  auto trace = open_trace(path, TraceOpenMode::kRead);
  ASSERT_FALSE(trace.is_ok());
  EXPECT_EQ(trace.status().code(), StatusCode::kUnreadable);
  EXPECT_NE(trace.status().message().find("run.db is a directory, not a trace: pass a trace file"),
            std::string::npos)
      << trace.status().message();
}

// A FIFO would block the read of the header until some writer came (analyze, export, top and
// merge hung): refused as what it is, as are devices.
TEST(TraceOpenTest, AFifoOrADeviceIsNoTrace) {
  testing::ScratchDir dir;
  const fs::path fifo = dir.path() / "fifo.db";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const fs::path& path : {fifo, fs::path("/dev/null")}) {
    auto trace = open_trace(path, TraceOpenMode::kRead);
    ASSERT_FALSE(trace.is_ok()) << path;
    EXPECT_EQ(trace.status().code(), StatusCode::kUnreadable);
    EXPECT_NE(trace.status().message().find(path.string() + " is not a regular file"),
              std::string::npos)
        << trace.status().message();
  }
}

// A table or a view dropped after the trace was written: open_trace names each one missing (exit
// 3), instead of the reader failing half-way on "no such table" (exit 1).
TEST(TraceOpenTest, ADroppedTableOrViewIsUnreadableNamingIt) {
  testing::ScratchDir dir;
  const fs::path path = write_slices(dir.path() / "dropped.db", 10);
  ASSERT_TRUE(open_trace(path).is_ok());
  {
    auto db = SqliteDb::open(path.string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE(db->exec("DROP VIEW steps; DROP TABLE step; DROP VIEW slices").is_ok());
  }
  auto trace = open_trace(path);
  ASSERT_FALSE(trace.is_ok());
  EXPECT_EQ(trace.status().code(), StatusCode::kUnreadable);
  EXPECT_EQ(trace.status().exit_code(), 3);
  const std::string said = trace.status().message();
  EXPECT_NE(said.find("lacks the table `step`, the view `slices`, the view `steps` of trace schema "
                      "version"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("share/schema.sql"), std::string::npos) << said;
}

// A column renamed or dropped after the trace was written: readers failed on "no such column"
// with SQLite's text (exit 1); open_trace names each column missing, as it names a dropped table
// (exit 3). SQLite rewrote the `steps` view to the renamed column, so the view lacks it too.
TEST(TraceOpenTest, ARenamedColumnIsUnreadableNamingIt) {
  testing::ScratchDir dir;
  const fs::path path = write_slices(dir.path() / "renamed.db", 10);
  {
    auto db = SqliteDb::open(path.string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE(db->exec("ALTER TABLE slice RENAME COLUMN ts_ns TO t; "
                         "ALTER TABLE step RENAME COLUMN dur_ns TO dur")
                    .is_ok())
        << db->error_message();
  }
  for (TraceOpenMode mode : {TraceOpenMode::kReadStrict, TraceOpenMode::kRead}) {
    auto trace = open_trace(path, mode);
    ASSERT_FALSE(trace.is_ok());
    EXPECT_EQ(trace.status().code(), StatusCode::kUnreadable);
    EXPECT_EQ(trace.status().exit_code(), 3);
    const std::string said = trace.status().message();
    EXPECT_NE(said.find("lacks the column `ts_ns` of the table `slice`"), std::string::npos)
        << said;
    EXPECT_NE(said.find("the column `dur_ns` of the table `step`"), std::string::npos) << said;
    EXPECT_NE(said.find("the column `dur_ns` of the view `steps`"), std::string::npos) << said;
    EXPECT_NE(said.find("of trace schema version"), std::string::npos) << said;
  }
}

// Columns later versions added are not required of older files: a version-6 file has no
// `attempt` in its steps.
TEST(TraceOpenTest, ColumnsOfLaterVersionsAreNotRequiredOfOlderFiles) {
  testing::ScratchDir dir;
  const fs::path path = write_slices(dir.path() / "v6.db", 10);
  {
    auto db = SqliteDb::open(path.string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE(db->exec("DROP VIEW steps; CREATE VIEW steps AS SELECT rank, step, ts_ns, dur_ns, "
                         "loss, tokens FROM step; PRAGMA user_version = 6")
                    .is_ok())
        << db->error_message();
  }
  auto trace = open_trace(path);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(trace->schema_version, 6);
}

// A trace whose `run` row was deleted was "a truncated or corrupted trace (unknown run status
// '')" with advice to salvage it with .recover: the file is whole, the row is missing.
TEST(TraceOpenTest, AMissingRunRowIsSaidToBeMissing) {
  testing::ScratchDir dir;
  const fs::path path = write_slices(dir.path() / "norun.db", 10);
  {
    auto db = SqliteDb::open(path.string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE(db->exec("DELETE FROM run").is_ok()) << db->error_message();
  }
  auto trace = open_trace(path);
  ASSERT_FALSE(trace.is_ok());
  EXPECT_EQ(trace.status().code(), StatusCode::kUnreadable);
  const std::string said = trace.status().message();
  EXPECT_NE(said.find(path.string() + " has no row in its `run` table"), std::string::npos) << said;
  EXPECT_EQ(said.find("corrupted"), std::string::npos) << said;
  EXPECT_EQ(said.find(".recover"), std::string::npos) << said;
}

// An older schema lacks what later versions added, by right: a version-2 file has no transfer
// table and is read.
TEST(TraceOpenTest, TablesOfLaterVersionsAreNotRequiredOfOlderFiles) {
  testing::ScratchDir dir;
  const fs::path path = write_slices(dir.path() / "v2.db", 10);
  {
    auto db = SqliteDb::open(path.string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE(
        db->exec("DROP VIEW transfers; DROP TABLE transfer; PRAGMA user_version = 2").is_ok());
  }
  auto trace = open_trace(path);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(trace->schema_version, 2);
}

// Marking a dead writer's run incomplete removes its lock file; a live writer's stays.
TEST(TraceOpenTest, ALiveWritersLockIsNotRemoved) {
  testing::ScratchDir dir;
  const fs::path path = dir.path() / "live.db";
  auto writer = TraceWriter::create(path);
  ASSERT_TRUE(writer.is_ok()) << writer.status().message();
  ASSERT_TRUE((*writer)->commit().is_ok());
  auto trace = open_trace(path);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_TRUE(trace->writer_alive);
  EXPECT_FALSE(trace->marked_incomplete);
  EXPECT_TRUE(fs::exists(writer_lock_path(path)));
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A killed launch leaves run.db and its -wal; the user then copies a closed trace to run.db. The
// log is not the copy's (a closed trace is in rollback mode): it was read as part of it (the
// report was of the killed run) and, its run `running`, checkpointed into the copy by the
// dead-writer repair. Now: exit 3 naming the -wal, the copy and the log untouched; with the log
// moved away the copy reads as itself.
TEST(TraceOpenTest, AnotherRunsLogBesideAClosedTraceIsRefusedNotFoldedIn) {
  testing::ScratchDir dir;
  const fs::path path = dir.path() / "run.db";
  const fs::path wal = dir.path() / "run.db-wal";
  testing::kill_writer_after_commits(path, 1, 50, {});
  ASSERT_TRUE(fs::exists(wal));
  ASSERT_GT(fs::file_size(wal), 0u);
  const fs::path good = write_slices(dir.path() / "good.db", 10);
  fs::copy_file(good, path, fs::copy_options::overwrite_existing);
  const std::string copied = file_bytes(path);
  const std::string log = file_bytes(wal);

  for (TraceOpenMode mode : {TraceOpenMode::kReadStrict, TraceOpenMode::kRead}) {
    auto trace = open_trace(path, mode);
    ASSERT_FALSE(trace.is_ok()) << "read with another run's log";
    EXPECT_EQ(trace.status().code(), StatusCode::kUnreadable);
    EXPECT_EQ(trace.status().exit_code(), 3);
    const std::string said = trace.status().message();
    EXPECT_NE(said.find(wal.string() + " lies beside " + path.string() +
                        ", but it is not that trace's log"),
              std::string::npos)
        << said;
    EXPECT_NE(said.find("Move " + wal.string() + " (and " + path.string() + "-shm) away"),
              std::string::npos)
        << said;
  }
  settle_finished_trace(path);  // a follower letting go never folds it in either
  EXPECT_TRUE(file_bytes(path) == copied) << "the copied trace was changed";
  EXPECT_TRUE(file_bytes(wal) == log) << "the log was changed";

  fs::rename(wal, dir.path() / "killed-run.wal");
  auto trace = open_trace(path);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(trace->status, RunStatus::kCompleted);
  EXPECT_EQ(trace->db.query_text("SELECT count(*) FROM slice")->value_or(""), "10");
}

// What is not another run's log is read as before: an empty -wal beside a closed trace (nothing
// to replay), and a killed writer's trace with its own log (WAL mode), marked incomplete.
TEST(TraceOpenTest, AnEmptyLogOrAKilledWritersOwnLogIsRead) {
  testing::ScratchDir dir;
  const fs::path closed = write_slices(dir.path() / "closed.db", 10);
  std::ofstream(dir.path() / "closed.db-wal").flush();
  auto trace = open_trace(closed);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(trace->status, RunStatus::kCompleted);

  const fs::path killed = dir.path() / "killed.db";
  testing::kill_writer_after_commits(killed, 1, 50, {});
  trace = open_trace(killed);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_TRUE(trace->marked_incomplete);
  EXPECT_EQ(trace->db.query_text("SELECT count(*) FROM slice")->value_or(""), "50");
}

}  // namespace
}  // namespace partrain::profiler
