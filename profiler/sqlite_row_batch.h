// Multi-row INSERTs for the trace writer's busiest tables: rows are collected in memory and
// inserted 64 at a time by one prepared statement, so SQLite's per-execution work (opening
// cursors, starting and ending a statement) is paid once per 64 rows instead of per row.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "profiler/sqlite_db.h"

namespace partrain::profiler {

// One bound value of a row: an integer, or NULL (the event model's "not known").
struct SqlCell {
  int64_t value = 0;
  bool null = false;
};
inline SqlCell sql_integer(int64_t value) { return {value, false}; }
// NULL for the event model's negative "not known" sentinels.
inline SqlCell sql_known(int64_t value) {
  return value < 0 ? SqlCell{0, true} : SqlCell{value, false};
}
inline constexpr SqlCell kSqlNull{0, true};

class SqliteRowBatch {
 public:
  static constexpr size_t kRows = 64;

  // `insert_into` is "INSERT OR FAIL INTO table (columns...)" (or any conflict clause that never
  // aborts): a failing row then stops the statement without undoing the rows before it, so SQLite
  // keeps no statement journal (a copy of every page the statement touches); sqlite3_changes()
  // says how many went in and the rest are retried one by one, so exactly the rows that cannot
  // be stored are counted. `on_conflict` follows the VALUES (an upsert clause).
  //
  // With `rowid_first`, column 0 is the table's INTEGER PRIMARY KEY, the rows' ids are consecutive
  // and the table is written only through this batch: a batch whose first id is the table's
  // largest + 1 then binds NULL ids and lets SQLite append (no uniqueness seek per row), and the
  // ids it assigns are exactly the ones given.
  Status prepare(const SqliteDb& db, std::string_view insert_into, size_t columns,
                 std::string_view what, std::string_view on_conflict = {},
                 bool rowid_first = false);

  // The next row's cells, to be filled in column order; flush() once full().
  SqlCell* add_row() { return &cells_[rows_++ * columns_]; }
  bool full() const { return rows_ == kRows; }
  // Forgets the pending rows (their transaction was rolled back).
  void discard() { rows_ = 0; }
  // Inserts every pending row; returns how many could not be stored (and SQLite's last error
  // code in *error_code when any could not).
  uint64_t flush(int* error_code);
  std::string_view what() const { return what_; }

 private:
  static bool is_row_error(int rc);
  bool can_append_ids() const;
  size_t insert_many(int* error_code, bool* failed);  // returns the first row not yet inserted
  void bind_many(bool null_ids);
  void bind_one(const SqlCell* row);

  sqlite3* db_ = nullptr;
  SqliteStatement one_, many_;
  std::vector<SqlCell> bound_many_, bound_one_;  // what each statement's parameters hold
  size_t columns_ = 0;
  std::string what_;
  bool rowid_first_ = false;
  int64_t max_rowid_ = 0;  // the largest id stored, with rowid_first
  std::vector<SqlCell> cells_;
  size_t rows_ = 0;
};

}  // namespace partrain::profiler
