// Thin RAII over the SQLite C API for the trace store: a connection and prepared statements with
// bound parameters (never SQL assembled from values). Errors come back as Status with SQLite's
// message, so the writer can log-and-count and the reader can map them to exit codes.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace partrain::profiler {

class SqliteDb {
 public:
  // How long a statement waits for another connection's lock before it fails with SQLITE_BUSY.
  static constexpr int kBusyTimeoutMs = 2000;

  SqliteDb() = default;
  // flags: SQLITE_OPEN_READONLY, or SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE.
  static StatusOr<SqliteDb> open(const std::string& path, int flags);

  sqlite3* get() const { return db_.get(); }
  explicit operator bool() const { return db_ != nullptr; }
  // Runs one or more statements without parameters (schema, pragmas, BEGIN/COMMIT).
  Status exec(std::string_view sql);
  // exec() that fails at once (SQLITE_BUSY) where it would wait for another connection's lock.
  Status exec_without_waiting(std::string_view sql);
  // The first column of the first row of a parameterless query, as text; nullopt for no row.
  StatusOr<std::optional<std::string>> query_text(std::string_view sql);
  std::string error_message() const;
  int error_code() const;
  // Whether `schema` ("main", or an ATTACHed name) has a table `name`: a newer schema's table
  // is absent from files of an older one.
  bool has_table(std::string_view schema, std::string_view name) const;
  // Whether `schema`'s table `table` has a column `column`: a newer schema's column is absent
  // from tables of files of an older one.
  bool has_column(std::string_view schema, std::string_view table, std::string_view column) const;
  // The file of the main database; empty for an in-memory or temporary one.
  std::string filename() const;

 private:
  struct Closer {
    void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
  };
  std::unique_ptr<sqlite3, Closer> db_;
};

class SqliteStatement {
 public:
  SqliteStatement() = default;
  static StatusOr<SqliteStatement> prepare(const SqliteDb& db, std::string_view sql);

  // Parameters are 1-based, as in SQLite.
  void bind(int index, int64_t value) { sqlite3_bind_int64(stmt_.get(), index, value); }
  void bind(int index, double value) { sqlite3_bind_double(stmt_.get(), index, value); }
  void bind(int index, std::string_view value) {
    sqlite3_bind_text(stmt_.get(), index, value.data(), static_cast<int>(value.size()),
                      SQLITE_TRANSIENT);
  }
  void bind_null(int index) { sqlite3_bind_null(stmt_.get(), index); }
  // Binds NULL for the "not known" sentinel (a negative value).
  void bind_or_null(int index, int64_t value) {
    if (value < 0) bind_null(index); else bind(index, value);
  }
  // Steps a statement that returns no rows, then resets it; SQLite's result code.
  int run();
  // SQLITE_ROW while rows come, SQLITE_DONE at the end.
  int step() { return sqlite3_step(stmt_.get()); }
  void reset() { sqlite3_reset(stmt_.get()); }
  int column_count() const { return sqlite3_column_count(stmt_.get()); }
  int64_t column_int(int index) const { return sqlite3_column_int64(stmt_.get(), index); }
  double column_double(int index) const { return sqlite3_column_double(stmt_.get(), index); }
  bool column_is_null(int index) const {
    return sqlite3_column_type(stmt_.get(), index) == SQLITE_NULL;
  }
  std::string column_text(int index) const;
  // Steps of SQLite's virtual machine so far: how much of the file the statement went through
  // (a full scan takes at least one per row of its table).
  int vm_steps() const { return sqlite3_stmt_status(stmt_.get(), SQLITE_STMTSTATUS_VM_STEP, 0); }

 private:
  struct Finalizer {
    void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
  };
  std::unique_ptr<sqlite3_stmt, Finalizer> stmt_;
};

}  // namespace partrain::profiler
