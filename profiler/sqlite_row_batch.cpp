// SqliteRowBatch: see the header. Parameters are rebound only where a cell differs from what the
// statement already holds (SQLite keeps bindings across executions), which skips most of the
// constant columns (category, step, group size...).
#include "profiler/sqlite_row_batch.h"

#include <algorithm>

#include "core/log.h"

namespace partrain::profiler {
namespace {

bool same(const SqlCell& a, const SqlCell& b) {
  return a.null == b.null && (a.null || a.value == b.value);
}

void bind_cell(SqliteStatement& stmt, int index, const SqlCell& cell) {
  if (cell.null) stmt.bind_null(index); else stmt.bind(index, cell.value);
}

}  // namespace

Status SqliteRowBatch::prepare(const SqliteDb& db, std::string_view insert_into, size_t columns,
                               std::string_view what, std::string_view on_conflict,
                               bool rowid_first) {
  db_ = db.get();
  columns_ = columns;
  what_ = std::string(what);
  rowid_first_ = rowid_first;
  cells_.resize(kRows * columns);
  bound_many_.assign(kRows * columns, kSqlNull);  // parameters not bound yet are NULL
  bound_one_.assign(columns, kSqlNull);
  std::string row = "(";
  for (size_t c = 0; c < columns; ++c) row += c == 0 ? "?" : ", ?";
  row += ")";
  std::string many = std::string(insert_into) + " VALUES " + row;
  for (size_t r = 1; r < kRows; ++r) many += ", " + row;
  ASSIGN_OR_RETURN(one_, SqliteStatement::prepare(db, std::string(insert_into) + " VALUES " +
                                                          row + std::string(on_conflict)));
  ASSIGN_OR_RETURN(many_, SqliteStatement::prepare(db, many + std::string(on_conflict)));
  return Status::ok();
}

bool SqliteRowBatch::can_append_ids() const {
  if (!rowid_first_ || cells_[0].null || cells_[0].value != max_rowid_ + 1) return false;
  for (size_t r = 1; r < kRows; ++r) {
    const SqlCell& id = cells_[r * columns_];
    if (id.null || id.value != cells_[0].value + static_cast<int64_t>(r)) return false;
  }
  return true;
}

void SqliteRowBatch::bind_many(bool null_ids) {
  size_t i = 0;
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t c = 0; c < columns_; ++c, ++i) {
      const SqlCell& cell = (null_ids && c == 0) ? kSqlNull : cells_[i];
      if (same(cell, bound_many_[i])) continue;
      bind_cell(many_, static_cast<int>(i + 1), cell);
      bound_many_[i] = cell;
    }
  }
}

void SqliteRowBatch::bind_one(const SqlCell* row) {
  for (size_t c = 0; c < columns_; ++c) {
    if (same(row[c], bound_one_[c])) continue;
    bind_cell(one_, static_cast<int>(c + 1), row[c]);
    bound_one_[c] = row[c];
  }
}

// A failure of the row itself (a constraint), after which the next rows may still go in.
bool SqliteRowBatch::is_row_error(int rc) { return (rc & 0xff) == SQLITE_CONSTRAINT; }

size_t SqliteRowBatch::insert_many(int* error_code, bool* failed) {
  const bool append_ids = can_append_ids();
  bind_many(append_ids);
  const int rc = many_.run();
  size_t stored = kRows;
  if (rc != SQLITE_DONE) {
    // OR FAIL: the rows before the failing one are stored, the failing one is lost.
    *error_code = rc;
    *failed = true;
    stored = std::min<size_t>(static_cast<size_t>(sqlite3_changes(db_)), kRows - 1);
  }
  if (rowid_first_ && stored > 0) {
    int64_t last = cells_[(stored - 1) * columns_].value;
    const int64_t given = static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
    if (append_ids && given != last) {
      log::warn("trace writer: SQLite gave {} ids other than the ones assigned", what_);
      last = given;
    }
    max_rowid_ = std::max(max_rowid_, last);
  }
  return *failed ? stored + 1 : kRows;
}

uint64_t SqliteRowBatch::flush(int* error_code) {
  if (rows_ == 0) return 0;
  bool failed_many = false;
  const size_t first_single = rows_ == kRows ? insert_many(error_code, &failed_many) : 0;
  uint64_t failed = failed_many ? 1 : 0;
  if (failed_many && !is_row_error(*error_code)) {
    failed = rows_ - first_single + 1;
    rows_ = 0;
    return failed;
  }
  for (size_t r = first_single; r < rows_; ++r) {
    const SqlCell* row = &cells_[r * columns_];
    bind_one(row);
    const int rc = one_.run();
    if (rc != SQLITE_DONE) {
      *error_code = rc;
      ++failed;
      if (!is_row_error(rc)) {
        // Not this row's fault (a full disk, an I/O error): SQLite may have rolled the
        // transaction back, so the rows after it would each commit on their own. None is tried.
        failed += rows_ - r - 1;
        break;
      }
    } else if (rowid_first_ && !row[0].null) {
      max_rowid_ = std::max(max_rowid_, row[0].value);
    }
  }
  rows_ = 0;
  return failed;
}

}  // namespace partrain::profiler
