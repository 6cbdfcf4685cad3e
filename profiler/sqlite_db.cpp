#include "profiler/sqlite_db.h"

namespace partrain::profiler {

StatusOr<SqliteDb> SqliteDb::open(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  SqliteDb db;
  db.db_.reset(raw);
  if (rc != SQLITE_OK) {
    return failed("cannot open {}: {}", path, raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc));
  }
  sqlite3_extended_result_codes(raw, 1);
  // A busy database (another connection mid-checkpoint) is waited for, briefly, not failed.
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);
  return db;
}

Status SqliteDb::exec(std::string_view sql) {
  std::string text(sql);
  char* message = nullptr;
  int rc = sqlite3_exec(db_.get(), text.c_str(), nullptr, nullptr, &message);
  if (rc != SQLITE_OK) {
    std::string reason = message ? message : sqlite3_errstr(rc);
    sqlite3_free(message);
    return failed("{}", reason);
  }
  return Status::ok();
}

Status SqliteDb::exec_without_waiting(std::string_view sql) {
  sqlite3_busy_timeout(db_.get(), 0);
  Status status = exec(sql);
  sqlite3_busy_timeout(db_.get(), kBusyTimeoutMs);
  return status;
}

StatusOr<std::optional<std::string>> SqliteDb::query_text(std::string_view sql) {
  ASSIGN_OR_RETURN(SqliteStatement stmt, SqliteStatement::prepare(*this, sql));
  int rc = stmt.step();
  if (rc == SQLITE_ROW) return std::optional<std::string>(stmt.column_text(0));
  if (rc == SQLITE_DONE) return std::optional<std::string>();
  return failed("{}", error_message());
}

std::string SqliteDb::error_message() const { return sqlite3_errmsg(db_.get()); }
int SqliteDb::error_code() const { return sqlite3_extended_errcode(db_.get()); }

std::string SqliteDb::filename() const {
  const char* file = sqlite3_db_filename(db_.get(), "main");
  return file == nullptr ? std::string() : std::string(file);
}

bool SqliteDb::has_table(std::string_view schema, std::string_view name) const {
  auto stmt = SqliteStatement::prepare(
      *this, "SELECT 1 FROM \"" + std::string(schema) +
                 "\".sqlite_schema WHERE type = 'table' AND name = ?1");
  if (!stmt.is_ok()) return false;
  stmt->bind(1, name);
  return stmt->step() == SQLITE_ROW;
}

bool SqliteDb::has_column(std::string_view schema, std::string_view table,
                          std::string_view column) const {
  auto stmt =
      SqliteStatement::prepare(*this, "SELECT 1 FROM pragma_table_info(?1, ?2) WHERE name = ?3");
  if (!stmt.is_ok()) return false;
  stmt->bind(1, table);
  stmt->bind(2, schema);
  stmt->bind(3, column);
  return stmt->step() == SQLITE_ROW;
}

StatusOr<SqliteStatement> SqliteStatement::prepare(const SqliteDb& db, std::string_view sql) {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v3(db.get(), sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
  SqliteStatement stmt;
  stmt.stmt_.reset(raw);
  if (rc != SQLITE_OK) return failed("{} (in: {})", db.error_message(), sql);
  return stmt;
}

int SqliteStatement::run() {
  int rc = sqlite3_step(stmt_.get());
  sqlite3_reset(stmt_.get());
  return rc;
}

std::string SqliteStatement::column_text(int index) const {
  const unsigned char* text = sqlite3_column_text(stmt_.get(), index);
  if (text == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_.get(), index)));
}

}  // namespace partrain::profiler
