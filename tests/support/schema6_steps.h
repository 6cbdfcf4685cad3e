// A trace's steps as schema version 6 stored them, for tests of how older files are read and
// merged: no attempt column, one row per rank and step number (a later attempt's replacing an
// earlier one's), the key (rank, step).
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <string>
#include <string_view>

#include "profiler/sqlite_db.h"

namespace partrain::testing {

// Rewrites the step and earlier_step tables and their views; the version is the caller's to set.
inline constexpr std::string_view kStepTablesOfSchema6 =
    "DROP VIEW steps; DROP VIEW earlier_steps; "
    "CREATE TABLE step_v6 (rank INTEGER NOT NULL, step INTEGER NOT NULL, ts_ns INTEGER NOT NULL, "
    "dur_ns INTEGER NOT NULL, loss REAL, tokens INTEGER, PRIMARY KEY (rank, step)) WITHOUT ROWID; "
    "INSERT OR REPLACE INTO step_v6 SELECT rank, step, ts_ns, dur_ns, loss, tokens FROM step "
    "ORDER BY attempt; "
    "CREATE TABLE earlier_step_v6 (rank INTEGER NOT NULL, step INTEGER NOT NULL, "
    "ts_ns INTEGER NOT NULL, dur_ns INTEGER NOT NULL, loss REAL, tokens INTEGER); "
    "INSERT INTO earlier_step_v6 SELECT rank, step, ts_ns, dur_ns, loss, tokens FROM earlier_step; "
    "DROP TABLE step; DROP TABLE earlier_step; "
    "ALTER TABLE step_v6 RENAME TO step; ALTER TABLE earlier_step_v6 RENAME TO earlier_step; "
    "CREATE VIEW steps AS SELECT rank, step, ts_ns, dur_ns, loss, tokens FROM step; "
    "CREATE VIEW earlier_steps AS SELECT rank, step, ts_ns, dur_ns, loss, tokens "
    "FROM earlier_step; ";

// `trace` (closed) made a version-6 file.
inline void make_schema_6(const std::filesystem::path& trace) {
  auto db = profiler::SqliteDb::open(trace.string(), SQLITE_OPEN_READWRITE);
  ASSERT_TRUE(db.is_ok()) << db.status().message();
  ASSERT_TRUE(db->exec(std::string(kStepTablesOfSchema6) +
                       "PRAGMA user_version = 6; "
                       "UPDATE meta SET value = '6' WHERE key = 'schema_version'")
                  .is_ok())
      << db->error_message();
}

}  // namespace partrain::testing
