#include "profiler/trace_open.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <fstream>

#include "core/log.h"
#include "profiler/trace_schema.h"
#include "profiler/trace_writer.h"

namespace partrain::profiler {

namespace {

template <typename... Args>
Status unreadable(fmt::format_string<Args...> format, Args&&... args) {
  return make_status(StatusCode::kUnreadable, format, std::forward<Args>(args)...);
}

bool is_corruption(int code) {
  int primary = code & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB || primary == SQLITE_IOERR;
}

Status corrupted(const std::filesystem::path& path, std::string_view detail) {
  return unreadable("{} is a truncated or corrupted trace ({}); it cannot be read", path.string(),
                    detail);
}

// The 16-byte magic every SQLite 3 database starts with.
Status check_sqlite_header(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return unreadable("cannot open {}: {}", path.string(), std::strerror(errno));
  std::array<char, 16> header{};
  in.read(header.data(), header.size());
  if (in.gcount() == 0) return unreadable("{} is not an SQLite database (it is empty)", path.string());
  if (in.gcount() < 16 || std::memcmp(header.data(), "SQLite format 3\0", 16) != 0) {
    return unreadable("{} is not an SQLite database, so not a partrain trace", path.string());
  }
  return Status::ok();
}

// Version and identity, read through the connection: any corruption error here is reported as
// corruption; a missing meta table or a foreign format as "not a partrain trace".
Status check_identity(TraceFile& trace) {
  const std::string name = trace.path.string();
  auto version = trace.db.query_text("PRAGMA user_version");
  if (!version.is_ok()) return corrupted(trace.path, trace.db.error_message());
  trace.schema_version = std::stoi(version->value_or("0"));
  auto format = trace.db.query_text("SELECT value FROM meta WHERE key = 'format'");
  if (!format.is_ok()) {
    if (is_corruption(trace.db.error_code())) return corrupted(trace.path, trace.db.error_message());
    return unreadable("{} is an SQLite database but not a partrain trace (no partrain meta table)",
                      name);
  }
  if (!format->has_value() || **format != kTraceFormatName) {
    return unreadable("{} is an SQLite database but not a partrain trace (meta format is '{}')",
                      name, format->value_or(""));
  }
  if (trace.schema_version > kTraceSchemaVersion) {
    return unreadable("{} uses trace schema version {}, newer than this partrain reads ({}): "
                      "open it with a newer partrain", name, trace.schema_version,
                      kTraceSchemaVersion);
  }
  if (trace.schema_version < 1) {
    return unreadable("{} is a partrain trace without a schema version (user_version 0)", name);
  }
  return Status::ok();
}

Status check_integrity(TraceFile& trace) {
  auto result = trace.db.query_text("PRAGMA quick_check");
  if (!result.is_ok()) return corrupted(trace.path, trace.db.error_message());
  if (result->value_or("") != "ok") return corrupted(trace.path, result->value_or("no result"));
  return Status::ok();
}

StatusOr<RunStatus> read_status(TraceFile& trace) {
  auto status = trace.db.query_text("SELECT status FROM run WHERE id = 1");
  if (!status.is_ok()) return corrupted(trace.path, trace.db.error_message());
  std::string text = status->value_or("");
  for (RunStatus s : {RunStatus::kRunning, RunStatus::kCompleted, RunStatus::kFailed,
                      RunStatus::kKilled, RunStatus::kIncomplete}) {
    if (run_status_name(s) == text) return s;
  }
  return corrupted(trace.path, fmt::format("unknown run status '{}'", text));
}

// The allowed modification: `running` -> `incomplete`, with a stat row saying why.
Status mark_incomplete(const std::filesystem::path& path) {
  ASSIGN_OR_RETURN(SqliteDb db, SqliteDb::open(path.string(), SQLITE_OPEN_READWRITE));
  return db.exec(
      "BEGIN IMMEDIATE;"
      "UPDATE run SET status = 'incomplete' WHERE id = 1 AND status = 'running';"
      "INSERT OR REPLACE INTO stat (name, rank, value, severity, description) VALUES "
      "('run_incomplete', -1, 1, 'data_loss', 'the writer stopped without closing the run; "
      "events after its last commit are lost');"
      "COMMIT;");
}

}  // namespace

bool writer_alive(const std::filesystem::path& trace) {
  int fd = ::open(writer_lock_path(trace).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // a writer that closed cleanly removed it
  bool alive = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);  // also drops our shared lock, if we got it
  return alive;
}

StatusOr<TraceFile> open_trace(const std::filesystem::path& path, TraceOpenMode mode) {
  RETURN_IF_ERROR(check_sqlite_header(path));
  TraceFile trace;
  trace.path = path;
  auto db = SqliteDb::open(path.string(), SQLITE_OPEN_READONLY);
  if (!db.is_ok()) return unreadable("{}", db.status().message());
  trace.db = std::move(db).value();
  RETURN_IF_ERROR(check_identity(trace));
  RETURN_IF_ERROR(check_integrity(trace));
  ASSIGN_OR_RETURN(trace.status, read_status(trace));
  trace.writer_alive = writer_alive(path);
  if (trace.status != RunStatus::kRunning || trace.writer_alive) return trace;

  trace.status = RunStatus::kIncomplete;
  if (mode == TraceOpenMode::kReadStrict) return trace;
  trace.db = SqliteDb();  // the read-write connection below recovers and checkpoints the WAL
  Status marked = mark_incomplete(path);
  if (marked.is_ok()) {
    trace.marked_incomplete = true;
  } else {
    log::warn("{}: the run was left running by a writer that is gone, and it could not be marked "
              "incomplete: {}", path.string(), marked.message());
  }
  auto reopened = SqliteDb::open(path.string(), SQLITE_OPEN_READONLY);
  if (!reopened.is_ok()) return unreadable("{}", reopened.status().message());
  trace.db = std::move(reopened).value();
  return trace;
}

}  // namespace partrain::profiler
