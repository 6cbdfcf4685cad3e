// What every cursor of the reader shares: a prepared statement stepped row by row, and the error
// of a read that failed part way (a truncated or corrupted page is exit 3, as open_trace says).
#pragma once

#include <string>
#include <utility>

#include "core/status.h"
#include "profiler/sqlite_db.h"

namespace partrain::profiler {

class RowCursor {
 public:
  RowCursor() = default;
  // `what` names the read in an error: "reading the steps of rank 3".
  RowCursor(const SqliteDb& db, SqliteStatement stmt, std::string what)
      : stmt_(std::move(stmt)), db_(&db), what_(std::move(what)) {}
  // After next() returned false: ok at the end of the rows, else what failed.
  const Status& status() const { return status_; }
  // How much of the file the read has gone through (SqliteStatement::vm_steps()).
  int vm_steps() const { return stmt_.vm_steps(); }

 protected:
  // True with a row in stmt_; false at the end or on an error (status()). Inline: the analyses'
  // loops step millions of rows.
  bool step() {
    const int rc = stmt_.step();
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) note_error();
    return false;
  }
  // Ends the rows with an error of the cursor's own (a lookup it makes per row).
  bool fail(Status status) {
    status_ = std::move(status);
    return false;
  }
  // Steps from the first row again, with the parameters bound since.
  void rewind() {
    stmt_.reset();
    status_ = Status::ok();
  }

  SqliteStatement stmt_;

 private:
  void note_error();

  const SqliteDb* db_ = nullptr;
  std::string what_;
  Status status_;
};

}  // namespace partrain::profiler
