// TraceWriter beside another process that holds the trace's write lock (a `sqlite3` shell or a DB
// browser with a write transaction open): the writer never blocks its caller (the collector's
// thread, which must keep reading the ranks' sockets), holds what arrives in memory up to a bound,
// stores it once the lock is free, and counts what it could not hold.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "profiler/sqlite_db.h"
#include "profiler/sqlite_lock_holder.h"
#include "profiler/trace_writer.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_query.h"

namespace partrain::profiler {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using testing::open_read_only;
using testing::query_number;
using testing::query_rows;

std::vector<TraceEvent> slices(int count, int64_t& ts) {
  std::vector<TraceEvent> batch;
  for (int i = 0; i < count; ++i) {
    batch.push_back(SliceEvent{0, TrackKind::kCpuThread, "main", fmt::format("op{}", ts % 5),
                               SliceCategory::kCompute, ts, 1, ts / 10, -1, -1});
    ++ts;
  }
  return batch;
}

// Another connection to the trace that holds its write lock until released.
class ForeignWriter {
 public:
  explicit ForeignWriter(const fs::path& path) {
    auto db = SqliteDb::open(path.string(), SQLITE_OPEN_READWRITE);
    EXPECT_TRUE(db.is_ok()) << db.status().message();
    if (db.is_ok()) db_ = std::move(db).value();
    Status begun = db_.exec("BEGIN IMMEDIATE");
    EXPECT_TRUE(begun.is_ok()) << begun.message();
  }
  void release() {
    if (db_.get() != nullptr) (void)db_.exec("ROLLBACK");
  }

 private:
  SqliteDb db_;
};

class TraceWriterLockTest : public ::testing::Test {
 protected:
  std::unique_ptr<TraceWriter> make_writer(TraceWriterOptions options = {}) {
    auto writer = TraceWriter::create(path_, options);
    EXPECT_TRUE(writer.is_ok()) << writer.status().message();
    return writer.is_ok() ? std::move(writer).value() : nullptr;
  }
  testing::ScratchDir scratch_;
  const fs::path path_ = scratch_.path() / "locked.db";
};

TEST_F(TraceWriterLockTest, EventsArrivingWhileAnotherProcessHoldsTheLockAreStoredAfterIt) {
  TraceWriterOptions options;
  options.max_commit_interval = std::chrono::milliseconds(50);
  auto writer = make_writer(options);
  ASSERT_TRUE(writer);
  int64_t ts = 0;
  writer->append(slices(100, ts));
  ASSERT_TRUE(writer->commit().is_ok());

  ForeignWriter foreign(path_);
  EXPECT_THAT(sqlite_write_lock_holder(path_),
              ::testing::HasSubstr(fmt::format("pid {}", ::getpid())));
  // The caller is not held up: before, each statement waited out SQLite's busy timeout (2 s)
  // and then failed, so these 3 appends of 100 events took minutes and stored nothing.
  const auto start = Clock::now();
  for (int i = 0; i < 3; ++i) {
    writer->append(slices(100, ts));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    writer->commit_if_due();
  }
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(1500));
  foreign.release();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  writer->commit_if_due();
  {
    SqliteDb reader = open_read_only(path_);
    EXPECT_EQ(query_number(reader, "SELECT count(*) FROM slice"), 400);  // before the close
  }
  ASSERT_TRUE(writer->set_run_status(RunStatus::kCompleted).is_ok());
  EXPECT_EQ(writer->write_errors(), 0u);
  writer.reset();

  SqliteDb db = open_read_only(path_);
  EXPECT_EQ(query_number(db, "SELECT count(*) FROM slice"), 400);
  EXPECT_EQ(query_rows(db, "SELECT status FROM runs"), "completed\n");
  EXPECT_EQ(query_rows(db, "SELECT name, severity FROM stat ORDER BY name"),
            "store_lock_wait_ms|info\n");
  EXPECT_GE(query_number(db, "SELECT value FROM stat WHERE name = 'store_lock_wait_ms'"), 300);
}

TEST_F(TraceWriterLockTest, WhatExceedsTheHeldBoundIsCountedAsLost) {
  TraceWriterOptions options;
  options.max_held_events = 150;
  auto writer = make_writer(options);
  ASSERT_TRUE(writer);
  int64_t ts = 0;
  ForeignWriter foreign(path_);
  writer->append(slices(100, ts));
  writer->append(slices(100, ts));  // 50 of these fit
  writer->append(slices(30, ts));
  foreign.release();
  ASSERT_TRUE(writer->set_run_status(RunStatus::kCompleted).is_ok());
  writer.reset();

  SqliteDb db = open_read_only(path_);
  EXPECT_EQ(query_number(db, "SELECT count(*) FROM slice"), 150);
  EXPECT_EQ(query_number(db, "SELECT max(ts_ns) FROM slice"), 149);  // the oldest are kept
  EXPECT_EQ(query_rows(db, "SELECT value, severity FROM stat WHERE name = 'store_lock_dropped'"),
            "80|data_loss\n");
  EXPECT_EQ(query_rows(db, "SELECT status FROM runs"), "completed\n");
}

TEST_F(TraceWriterLockTest, TheCloseWaitsForTheLockAndStoresEverythingHeld) {
  auto writer = make_writer();
  ASSERT_TRUE(writer);
  int64_t ts = 0;
  auto foreign = std::make_unique<ForeignWriter>(path_);
  writer->append(slices(200, ts));
  std::thread releaser([&foreign] {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    foreign->release();
  });
  ASSERT_TRUE(writer->set_run_status(RunStatus::kCompleted).is_ok());
  writer.reset();
  releaser.join();

  SqliteDb db = open_read_only(path_);
  EXPECT_EQ(query_number(db, "SELECT count(*) FROM slice"), 200);
  EXPECT_EQ(query_rows(db, "SELECT status FROM runs"), "completed\n");
}

TEST_F(TraceWriterLockTest, ALockHeldPastTheCloseWaitLeavesTheCommittedRowsAndSaysWhatIsLost) {
  TraceWriterOptions options;
  options.close_lock_wait = std::chrono::milliseconds(300);
  auto writer = make_writer(options);
  ASSERT_TRUE(writer);
  int64_t ts = 0;
  writer->append(slices(50, ts));
  ASSERT_TRUE(writer->commit().is_ok());
  ForeignWriter foreign(path_);
  writer->append(slices(70, ts));
  const Status status = writer->set_run_status(RunStatus::kCompleted);
  EXPECT_FALSE(status.is_ok());
  EXPECT_THAT(status.message(), ::testing::HasSubstr("write lock"));
  EXPECT_THAT(status.message(), ::testing::HasSubstr(fmt::format("pid {}", ::getpid())));
  EXPECT_THAT(status.message(), ::testing::HasSubstr("70 events"));
  writer.reset();
  foreign.release();

  SqliteDb db = open_read_only(path_);
  EXPECT_EQ(query_number(db, "SELECT count(*) FROM slice"), 50);
}

TEST(SqliteWriteLockHolderTest, NoneWhenNobodyWrites) {
  testing::ScratchDir scratch;
  const fs::path path = scratch.path() / "free.db";
  auto writer = TraceWriter::create(path);
  ASSERT_TRUE(writer.is_ok());
  EXPECT_EQ(sqlite_write_lock_holder(path), "");
  EXPECT_EQ(sqlite_write_lock_holder(scratch.path() / "absent.db"), "");
}

}  // namespace
}  // namespace partrain::profiler
