// Reading a trace in tests: every row of a query in a small golden format (columns joined by
// '|', rows by '\n', NULL as "NULL") and single numbers. Opens files read-only without
// open_trace, so a query never marks a run incomplete.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "profiler/sqlite_db.h"

namespace partrain::testing {

inline std::string query_rows(const profiler::SqliteDb& db, std::string_view sql) {
  auto stmt = profiler::SqliteStatement::prepare(db, sql);
  EXPECT_TRUE(stmt.is_ok()) << sql << ": " << stmt.status().message();
  if (!stmt.is_ok()) return {};
  std::string out;
  while (stmt->step() == SQLITE_ROW) {
    for (int c = 0; c < stmt->column_count(); ++c) {
      if (c > 0) out += '|';
      out += stmt->column_is_null(c) ? "NULL" : stmt->column_text(c);
    }
    out += '\n';
  }
  return out;
}

inline int64_t query_number(const profiler::SqliteDb& db, std::string_view sql) {
  auto stmt = profiler::SqliteStatement::prepare(db, sql);
  EXPECT_TRUE(stmt.is_ok()) << sql << ": " << stmt.status().message();
  if (!stmt.is_ok() || stmt->step() != SQLITE_ROW) return -1;
  return stmt->column_int(0);
}

inline profiler::SqliteDb open_read_only(const std::filesystem::path& path) {
  auto db = profiler::SqliteDb::open(path.string(), SQLITE_OPEN_READONLY);
  EXPECT_TRUE(db.is_ok()) << path << ": " << db.status().message();
  return db.is_ok() ? std::move(db).value() : profiler::SqliteDb();
}

// For polling a trace a live run is still creating: the number `sql` gives, or nullopt while the
// file or its schema is not there yet (no test failure: the caller asserts on what it waited for).
inline std::optional<int64_t> poll_number(const std::filesystem::path& path, std::string_view sql) {
  if (!std::filesystem::exists(path)) return std::nullopt;
  auto db = profiler::SqliteDb::open(path.string(), SQLITE_OPEN_READONLY);
  if (!db.is_ok()) return std::nullopt;
  auto stmt = profiler::SqliteStatement::prepare(*db, sql);
  if (!stmt.is_ok() || stmt->step() != SQLITE_ROW) return std::nullopt;
  return stmt->column_int(0);
}

// A trace file held open for a test's queries.
class TraceQuery {
 public:
  explicit TraceQuery(const std::filesystem::path& path) : db_(open_read_only(path)) {}
  std::string rows(std::string_view sql) const { return query_rows(db_, sql); }
  int64_t number(std::string_view sql) const { return query_number(db_, sql); }
  const profiler::SqliteDb& db() const { return db_; }

 private:
  profiler::SqliteDb db_;
};

}  // namespace partrain::testing
