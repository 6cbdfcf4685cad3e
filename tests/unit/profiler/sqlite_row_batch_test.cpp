// SqliteRowBatch: rows go in 64 at a time and the leftovers one by one, in order; a row SQLite
// refuses is counted exactly once while its neighbours are stored; ids handed to SQLite to assign
// come out as the ones given, also after a failure broke the run of ids.
#include "profiler/sqlite_row_batch.h"

#include <gtest/gtest.h>

#include <string>

namespace partrain::profiler {
namespace {

class SqliteRowBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = SqliteDb::open(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    ASSERT_TRUE(db.is_ok()) << db.status().message();
    db_ = std::move(*db);
    ASSERT_TRUE(
        db_.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL, w INTEGER);"
                 "CREATE TABLE kv (k INTEGER PRIMARY KEY, v INTEGER NOT NULL) WITHOUT ROWID")
            .is_ok());
  }
  std::string rows(std::string_view sql) {
    auto stmt = SqliteStatement::prepare(db_, sql);
    EXPECT_TRUE(stmt.is_ok()) << stmt.status().message();
    std::string out;
    while (stmt.is_ok() && stmt->step() == SQLITE_ROW) {
      for (int c = 0; c < stmt->column_count(); ++c) {
        out += (c > 0 ? "|" : "") + (stmt->column_is_null(c) ? "NULL" : stmt->column_text(c));
      }
      out += ';';
    }
    return out;
  }
  // Adds row (id, v, w) and flushes when full; returns the failures of that flush.
  uint64_t add(SqliteRowBatch& batch, int64_t id, SqlCell v, int64_t w) {
    SqlCell* row = batch.add_row();
    row[0] = sql_integer(id);
    row[1] = v;
    row[2] = sql_known(w);
    int rc = SQLITE_OK;
    return batch.full() ? batch.flush(&rc) : 0;
  }

  SqliteDb db_;
};

TEST_F(SqliteRowBatchTest, FullBatchesAndLeftoversAreStoredInOrder) {
  SqliteRowBatch batch;
  ASSERT_TRUE(batch.prepare(db_, "INSERT OR FAIL INTO t (id, v, w)", 3, "rows").is_ok());
  uint64_t failed = 0;
  for (int64_t i = 1; i <= 150; ++i) failed += add(batch, i, sql_integer(i * 10), i % 3 - 1);
  EXPECT_EQ(rows("SELECT count(*) FROM t"), "128;") << "two full batches before the flush";
  int rc = SQLITE_OK;
  failed += batch.flush(&rc);
  EXPECT_EQ(failed, 0u);
  EXPECT_EQ(rows("SELECT count(*), sum(v), count(w) FROM t"), "150|113250|100;");
  EXPECT_EQ(rows("SELECT id, v, w FROM t WHERE id IN (1, 2, 3, 150)"),
            "1|10|0;2|20|1;3|30|NULL;150|1500|NULL;");
}

TEST_F(SqliteRowBatchTest, ARefusedRowIsCountedOnceAndItsNeighboursStored) {
  SqliteRowBatch batch;
  ASSERT_TRUE(batch.prepare(db_, "INSERT OR FAIL INTO t (id, v, w)", 3, "rows").is_ok());
  uint64_t failed = 0;
  for (int64_t i = 1; i <= 64; ++i) {
    failed += add(batch, i, i == 20 || i == 41 ? kSqlNull : sql_integer(i), 0);  // NOT NULL v
  }
  EXPECT_EQ(failed, 2u);
  EXPECT_EQ(rows("SELECT count(*), min(id), max(id) FROM t"), "62|1|64;");
  EXPECT_EQ(rows("SELECT count(*) FROM t WHERE id IN (19, 21, 40, 42)"), "4;");
}

TEST_F(SqliteRowBatchTest, AssignedIdsMatchTheGivenOnesAcrossFailures) {
  SqliteRowBatch batch;
  ASSERT_TRUE(batch.prepare(db_, "INSERT OR FAIL INTO t (id, v, w)", 3, "rows", {},
                            /*rowid_first=*/true).is_ok());
  uint64_t failed = 0;
  // The last row of the second batch fails: the table's largest id is then one short of the
  // next batch's first id, which must still be stored under its own ids.
  for (int64_t i = 1; i <= 64 * 3; ++i) {
    failed += add(batch, i, i == 128 ? kSqlNull : sql_integer(i), 0);
  }
  EXPECT_EQ(failed, 1u);
  EXPECT_EQ(rows("SELECT count(*) FROM t WHERE id = v"), "191;");
  EXPECT_EQ(rows("SELECT count(*) FROM t WHERE id = 128"), "0;");
  EXPECT_EQ(rows("SELECT max(id) FROM t"), "192;");
}

TEST_F(SqliteRowBatchTest, AnUpsertReplacesEarlierRowsWithTheSameKey) {
  SqliteRowBatch batch;
  ASSERT_TRUE(batch.prepare(db_, "INSERT OR FAIL INTO kv (k, v)", 2, "pairs",
                            " ON CONFLICT (k) DO UPDATE SET v = excluded.v").is_ok());
  int rc = SQLITE_OK;
  uint64_t failed = 0;
  for (int64_t i = 0; i < 100; ++i) {
    SqlCell* row = batch.add_row();
    row[0] = sql_integer(i % 10);
    row[1] = sql_integer(i);
    if (batch.full()) failed += batch.flush(&rc);
  }
  failed += batch.flush(&rc);
  EXPECT_EQ(failed, 0u);
  EXPECT_EQ(rows("SELECT count(*), min(v), max(v) FROM kv"), "10|90|99;");
}

}  // namespace
}  // namespace partrain::profiler
