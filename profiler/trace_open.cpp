#include "profiler/trace_open.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/log.h"
#include "profiler/disk_reserve.h"
#include "profiler/trace_reader/lost_strings.h"
#include "profiler/trace_schema.h"
#include "profiler/trace_writer.h"

namespace partrain::profiler {

namespace {

// The read connection is used from one thread at a time, so SQLite's per-call mutex (a fifth of
// the CPU time of a large analysis) is not needed.
constexpr int kReadFlags = SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX;

template <typename... Args>
Status unreadable(fmt::format_string<Args...> format, Args&&... args) {
  return make_status(StatusCode::kUnreadable, format, std::forward<Args>(args)...);
}

bool is_corruption(int code) {
  int primary = code & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB || primary == SQLITE_IOERR;
}

Status corrupted(const std::filesystem::path& path, std::string_view detail) {
  return unreadable(
      "{} is a truncated or corrupted trace ({}); it cannot be read: record the run "
      "again, or salvage its rows with `sqlite3 {} .recover | sqlite3 copy.db`",
      path.string(), detail, path.string());
}

// The format a partrain trace names itself by in its meta table (kTraceFormatName); an error
// without a meta table.
StatusOr<std::optional<std::string>> meta_format(SqliteDb& db) {
  return db.query_text("SELECT value FROM meta WHERE key = 'format'");
}

// Version and identity, read through the connection: any corruption error here is reported as
// corruption; a missing meta table or a foreign format as "not a partrain trace".
Status check_identity(TraceFile& trace) {
  const std::string name = trace.path.string();
  auto version = trace.db.query_text("PRAGMA user_version");
  if (!version.is_ok()) return corrupted(trace.path, trace.db.error_message());
  trace.schema_version = std::stoi(version->value_or("0"));
  auto format = meta_format(trace.db);
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
    return unreadable("{} is a partrain trace without a schema version (user_version {})", name,
                      trace.schema_version);
  }
  return Status::ok();
}

// SQLite's check lists every problem it found, a line each (up to 100, after a "*** in
// database main ***" header): the first names the kind of damage, the count says how much.
std::string first_problem(std::string_view report) {
  std::vector<std::string_view> lines;
  for (size_t start = 0; start <= report.size();) {
    size_t end = report.find('\n', start);
    if (end == std::string_view::npos) end = report.size();
    std::string_view line = report.substr(start, end - start);
    if (!line.empty() && !line.starts_with("*** in database")) lines.push_back(line);
    start = end + 1;
  }
  if (lines.empty()) return std::string(report);
  if (lines.size() == 1) return std::string(lines[0]);
  return fmt::format("{}, and {} more problem{}", lines[0], lines.size() - 1,
                     lines.size() == 2 ? "" : "s");
}

Status quick_check(TraceFile& trace, std::string_view sql) {
  auto result = trace.db.query_text(sql);
  if (!result.is_ok()) return corrupted(trace.path, trace.db.error_message());
  if (result->value_or("") != "ok") {
    return corrupted(trace.path, first_problem(result->value_or("no result")));
  }
  return Status::ok();
}

// Up to kFullCheckBytes every page is checked (PRAGMA quick_check reads the whole file: ~3 s
// for 300 MB). Above, only the schema and the per-run tables are; a file shorter than the page
// count in its header was already refused by SQLite in check_identity, and the event tables
// (slice, collective, kernel, memory) are left to the reads that use them, which report a
// damaged page as the same kind of error (trace_read_error).
Status check_integrity(TraceFile& trace) {
  std::error_code ec;
  const uintmax_t bytes = std::filesystem::file_size(trace.path, ec);
  if (ec || bytes <= kFullCheckBytes) return quick_check(trace, "PRAGMA quick_check");
  for (const char* sql : {"PRAGMA quick_check(sqlite_schema)", "PRAGMA quick_check(meta)",
                          "PRAGMA quick_check(run)", "PRAGMA quick_check(rank)",
                          "PRAGMA quick_check(track)", "PRAGMA quick_check(string)",
                          "PRAGMA quick_check(step)", "PRAGMA quick_check(stat)"}) {
    RETURN_IF_ERROR(quick_check(trace, sql));
  }
  return Status::ok();
}

// Tables and views added after version 1 (docs/trace-format.md "Versioning"): older files lack
// them by right.
int introduced_in(std::string_view name) {
  if (name == "counter" || name == "counters") return 2;
  if (name == "transfer" || name == "transfers") return 3;
  if (name == "collective_nccl") return 4;
  if (name == "expert_load" || name == "expert_layers" || name == "expert_loads") return 5;
  if (name == "earlier_step" || name == "earlier_steps") return 6;
  return 1;
}

// The tables and views a trace of `version` has, from the compiled-in schema: "CREATE TABLE
// name" and "CREATE VIEW name" statements.
std::vector<std::pair<std::string, std::string>> expected_objects(int version) {
  std::vector<std::pair<std::string, std::string>> objects;
  for (std::string_view sql : {schema_sql(), views_sql()}) {
    for (std::string_view type : {"TABLE", "VIEW"}) {
      const std::string create = fmt::format("CREATE {} ", type);
      for (size_t at = sql.find(create); at != std::string_view::npos;
           at = sql.find(create, at + 1)) {
        const size_t begin = at + create.size();
        const size_t end = sql.find_first_of(" (\n", begin);
        std::string name(sql.substr(begin, end - begin));
        if (introduced_in(name) > version) continue;
        objects.emplace_back(type == "TABLE" ? "table" : "view", std::move(name));
      }
    }
  }
  return objects;
}

// Columns added to a table or view after version 1 (docs/trace-format.md "Versioning"): older
// files lack them by right.
int introduced_in(std::string_view object, std::string_view column) {
  if (column == "attempt" && (object == "step" || object == "earlier_step" || object == "steps" ||
                              object == "earlier_steps")) {
    return 7;
  }
  if (object == "collectives" && column == "label") return 5;
  if (object == "collectives" &&
      (column == "algorithm" || column == "protocol" || column == "channels")) {
    return 4;
  }
  return 1;
}

// The column names of a table or view as `db` lists them; an error when it cannot (a view
// reading a column that is gone).
StatusOr<std::set<std::string>> columns_of(const SqliteDb& db, const std::string& object) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   SqliteStatement::prepare(db, "SELECT name FROM pragma_table_info(?1)"));
  stmt.bind(1, std::string_view(object));
  std::set<std::string> columns;
  int rc = SQLITE_ROW;
  while ((rc = stmt.step()) == SQLITE_ROW) columns.insert(stmt.column_text(0));
  if (rc != SQLITE_DONE) return failed("{}", db.error_message());
  return columns;
}

// What the compiled-in schema's `object` has of `version` and the file's lacks: "the column
// `ts_ns` of the table `slice`" per column. A view that cannot list its columns (one reading a
// table an older file was made without, as tests fake older files) is left to the reads.
std::string missing_columns(const SqliteDb& reference, const SqliteDb& file,
                            const std::pair<std::string, std::string>& object, int version) {
  auto expected = columns_of(reference, object.second);
  auto present = columns_of(file, object.second);
  if (!expected.is_ok() || !present.is_ok()) return {};
  std::string missing;
  for (const std::string& column : *expected) {
    if (present->contains(column) || introduced_in(object.second, column) > version) continue;
    missing += fmt::format("{}the column `{}` of the {} `{}`", missing.empty() ? "" : ", ", column,
                           object.first, object.second);
  }
  return missing;
}

// Every table and view of the file's schema version is there, with every column it has in that
// version: readers query them by name, and a dropped or renamed one would fail half-way ("no such
// table", "no such column") as a failure, not as the unreadable input it is.
Status check_schema_objects(TraceFile& trace) {
  auto stmt = SqliteStatement::prepare(
      trace.db, "SELECT type, name FROM sqlite_schema WHERE type IN ('table', 'view')");
  if (!stmt.is_ok()) return corrupted(trace.path, trace.db.error_message());
  std::set<std::pair<std::string, std::string>> present;
  int rc = SQLITE_ROW;
  while ((rc = stmt->step()) == SQLITE_ROW) {
    present.emplace(stmt->column_text(0), stmt->column_text(1));
  }
  if (rc != SQLITE_DONE) return corrupted(trace.path, trace.db.error_message());
  // The compiled-in schema, made in memory, lists each object's columns as SQLite names them.
  auto reference = SqliteDb::open(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX);
  if (!reference.is_ok()) return reference.status();
  RETURN_IF_ERROR(reference->exec(schema_sql()));
  RETURN_IF_ERROR(reference->exec(views_sql()));
  std::string missing;
  for (const auto& object : expected_objects(trace.schema_version)) {
    std::string lacking = present.contains(object)
                              ? missing_columns(*reference, trace.db, object, trace.schema_version)
                              : fmt::format("the {} `{}`", object.first, object.second);
    if (lacking.empty()) continue;
    missing += fmt::format("{}{}", missing.empty() ? "" : ", ", lacking);
  }
  if (missing.empty()) return Status::ok();
  return unreadable(
      "{} lacks {} of trace schema version {}: it was altered after it was written and cannot be "
      "read; record the run again, or restore what is missing from share/schema.sql and "
      "share/views.sql",
      trace.path.string(), missing, trace.schema_version);
}

StatusOr<RunStatus> read_status(TraceFile& trace) {
  auto status = trace.db.query_text("SELECT status FROM run WHERE id = 1");
  if (!status.is_ok()) return corrupted(trace.path, trace.db.error_message());
  if (!status->has_value()) {
    // The writer makes the row with the file: a missing one was deleted, not lost to damage.
    return unreadable(
        "{} has no row in its `run` table (the run it records: id, status, world size), which "
        "every trace is written with: it was altered after it was written and cannot be read; "
        "record the run again",
        trace.path.string());
  }
  std::string text = status->value_or("");
  for (RunStatus s : {RunStatus::kRunning, RunStatus::kCompleted, RunStatus::kFailed,
                      RunStatus::kKilled, RunStatus::kIncomplete}) {
    if (run_status_name(s) == text) return s;
  }
  return corrupted(trace.path, fmt::format("unknown run status '{}'", text));
}

// The dead writer's `-writer` lock file, once its run is marked: taken first, so that a writer
// which has just started on the same path (it would hold it) keeps its lock.
bool dead_writers_lock_left(const std::filesystem::path& trace) {
  std::error_code error;
  return std::filesystem::is_regular_file(writer_lock_path(trace), error);
}

void remove_dead_writers_lock(const std::filesystem::path& trace) {
  const std::filesystem::path lock = writer_lock_path(trace);
  // Never through a link, nor blocked by a FIFO, planted at the name: the writer refuses both.
  const int fd = ::open(lock.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return;
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) ::unlink(lock.c_str());
  ::close(fd);
}

// The allowed modification of a trace whose writer is gone: `running` -> `incomplete`, with a
// stat row saying why; then what the writer would have done at close. The disk reserve goes
// first: it is the room the rest needs when the disk is full. Each step is done again by a later
// reader while the dead writer's lock stays, which goes last: one that could not finish (a full
// disk) leaves the rest to the next, not for good.
// `marked`: whether this call marked it.
Status finish_dead_writers_trace(const std::filesystem::path& path, bool mark, bool* marked) {
  std::error_code ignored;
  std::filesystem::remove(disk_reserve_path(path), ignored);
  ASSIGN_OR_RETURN(SqliteDb db, SqliteDb::open(path.string(), SQLITE_OPEN_READWRITE));
  if (mark) {
    RETURN_IF_ERROR(db.exec(
        "BEGIN IMMEDIATE;"
        "UPDATE run SET status = 'incomplete' WHERE id = 1 AND status = 'running';"
        "INSERT OR REPLACE INTO stat (name, rank, value, severity, description) VALUES "
        "('run_incomplete', -1, 1, 'data_loss', 'the writer stopped without closing the run; "
        "events after its last commit are lost');"
        "COMMIT;"));
    *marked = true;
  }
  RETURN_IF_ERROR(create_deferred_indexes(db));
  (void)settle_into_one_file(db);  // best effort: another reader may hold it open
  remove_dead_writers_lock(path);
  return Status::ok();
}

std::filesystem::path wal_path(const std::filesystem::path& trace) {
  std::filesystem::path wal = trace;
  wal += "-wal";
  return wal;
}

// Whether the file's header says rollback-journal mode (bytes 18-19, the format's write and read
// versions, are 1; WAL mode writes 2): a closed trace (settle_into_one_file). SQLite deletes the
// -wal before it writes 1 there, and writes 2 before it makes a -wal, so such a file never has a
// log of its own beside it.
bool header_says_rollback_mode(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<char, 20> header{};
  in.read(header.data(), header.size());
  return in.gcount() == 20 && header[18] == 1 && header[19] == 1;
}

// A -wal with frames beside a closed trace is another file's log: one a killed writer left at
// this name before the trace was copied over it. SQLite would replay it as part of the file (the
// report would be of the other run), and the dead-writer repair would checkpoint it into the file
// for good. The header is read before the -wal is looked for, so a writer settling its trace
// (the -wal deleted, then the header changed) is never taken for one.
Status check_no_foreign_wal(const std::filesystem::path& path) {
  if (!header_says_rollback_mode(path)) return Status::ok();
  const std::filesystem::path wal = wal_path(path);
  std::error_code error;
  const uintmax_t bytes = std::filesystem::file_size(wal, error);
  if (error || bytes == 0) return Status::ok();  // none, or one with nothing to replay
  return unreadable(
      "{} lies beside {}, but it is not that trace's log: {} is a closed trace (one file), so the "
      "log is another run's, left by a writer that was killed before this file was put at its "
      "name; read with it, the trace would be the other run's rows over this one's. Move {} (and "
      "{}-shm) away, or put the killed run's own file back beside its log",
      wal.string(), path.string(), path.string(), wal.string(), path.string());
}

}  // namespace

void settle_finished_trace(const std::filesystem::path& trace) {
  std::error_code error;
  const std::filesystem::path wal = wal_path(trace);
  if (!std::filesystem::exists(wal, error) || writer_alive(trace)) return;
  if (!check_no_foreign_wal(trace).is_ok()) return;  // never folded into the file
  auto db = SqliteDb::open(trace.string(), SQLITE_OPEN_READWRITE);
  if (db.is_ok()) (void)settle_into_one_file(*db);
}

Status trace_read_error(const SqliteDb& db, std::string_view what) {
  if (is_corruption(db.error_code())) {
    return unreadable("{}: the trace is truncated or corrupted ({}); it cannot be read", what,
                      db.error_message());
  }
  return failed("{}: {}", what, db.error_message());
}

bool writer_alive(const std::filesystem::path& trace) {
  int fd = ::open(writer_lock_path(trace).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;  // a writer that closed cleanly removed it
  bool alive = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);  // also drops our shared lock, if we got it
  return alive;
}

bool trace_being_created(const std::filesystem::path& trace) {
  if (!writer_alive(trace)) return false;
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(trace, error);
  if (error) return !std::filesystem::exists(trace, error);  // not made yet
  if (size == 0) return true;
  // Its schema goes in one transaction, meta table included: before the commit, no meta table.
  if (!check_sqlite_header(trace).is_ok()) return false;
  auto db = SqliteDb::open(trace.string(), kReadFlags);
  if (!db.is_ok()) return false;
  return !db->has_table("main", "meta");
}

namespace {

// A trace in WAL mode (one a reader held at its close, or a killed run's) where this process
// cannot make the -shm file SQLite shares the log through: a read-only mount or directory. SQLite
// then cannot open it ("unable to open database file"), which read as corruption. With no log
// beside it, nothing another connection could be writing: it is read as an immutable file.
bool unopenable_for_its_shm(const SqliteDb& db, const std::filesystem::path& path) {
  const int primary = db.error_code() & 0xff;
  if (primary != SQLITE_CANTOPEN && primary != SQLITE_READONLY) return false;
  std::error_code error;
  return !std::filesystem::exists(wal_path(path), error);
}

// SQLite's URI for `path` read as immutable: '%', '?' and '#' escaped as a URI requires.
std::string immutable_uri(const std::filesystem::path& path) {
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(path, error);
  std::string uri = "file:";
  for (char c : (error ? path : absolute).string()) {
    if (c == '%' || c == '?' || c == '#') {
      uri += fmt::format("%{:02x}", static_cast<unsigned char>(c));
    } else {
      uri += c;
    }
  }
  return uri + "?immutable=1";
}

}  // namespace

// The 16-byte magic every SQLite 3 database starts with.
Status check_sqlite_header(const std::filesystem::path& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return unreadable("{} is a directory, not a trace: pass a trace file (a partrain .db)",
                      path.string());
  }
  // A FIFO would block the read below until a writer came; a device or socket is no file either.
  if (std::filesystem::exists(path, error) && !std::filesystem::is_regular_file(path, error)) {
    return unreadable(
        "{} is not a regular file (a FIFO, device or socket), not a trace: pass a "
        "trace file (a partrain .db)",
        path.string());
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return unreadable("cannot open {}: {}", path.string(), std::strerror(errno));
  std::array<char, 16> header{};
  in.read(header.data(), header.size());
  if (in.gcount() == 0)
    return unreadable("{} is not an SQLite database (it is empty)", path.string());
  if (in.gcount() < 16 || std::memcmp(header.data(), "SQLite format 3\0", 16) != 0) {
    // JSON or gzip: most likely a PyTorch profiler (Kineto) trace, which `import` reads.
    const std::string_view start(header.data(), static_cast<size_t>(in.gcount()));
    const size_t first = start.find_first_not_of(" \t\r\n");
    // An object or an array whose first value starts as JSON's do ("[rank 0] ...", a launcher's
    // log, starts with '[' too).
    const size_t second =
        first == std::string_view::npos ? first : start.find_first_not_of(" \t\r\n", first + 1);
    const bool json_value_next =
        second == std::string_view::npos ||
        std::string_view("{[]}\"-0123456789tfn").find(start[second]) != std::string_view::npos;
    const bool json = first != std::string_view::npos &&
                      (start[first] == '{' || start[first] == '[') && json_value_next;
    const bool gzip = start.size() >= 2 && start[0] == '\x1f' && start[1] == '\x8b';
    if (json || gzip) {
      return unreadable(
          "{} is {}, not a partrain trace: for a PyTorch profiler (Kineto) trace, "
          "import it first: partrain import FILE... -o trace.db",
          path.string(), json ? "JSON" : "gzip-compressed");
    }
    return unreadable("{} is not an SQLite database, so not a partrain trace", path.string());
  }
  return Status::ok();
}

bool is_partrain_trace(SqliteDb& db) {
  auto format = meta_format(db);
  return format.is_ok() && format->value_or("") == kTraceFormatName;
}

namespace {

StatusOr<TraceFile> open_checked(const std::filesystem::path& path, TraceOpenMode mode) {
  RETURN_IF_ERROR(check_sqlite_header(path));
  RETURN_IF_ERROR(check_no_foreign_wal(path));
  TraceFile trace;
  trace.path = path;
  std::string name = path.string();
  int flags = kReadFlags;
  auto db = SqliteDb::open(name, flags);
  if (!db.is_ok()) return unreadable("{}", db.status().message());
  trace.db = std::move(db).value();
  if (!trace.db.query_text("PRAGMA user_version").is_ok() &&
      unopenable_for_its_shm(trace.db, path)) {
    name = immutable_uri(path);
    flags |= SQLITE_OPEN_URI;
    auto immutable = SqliteDb::open(name, flags);
    if (!immutable.is_ok()) return unreadable("{}", immutable.status().message());
    trace.db = std::move(immutable).value();
  }
  RETURN_IF_ERROR(check_identity(trace));
  RETURN_IF_ERROR(check_integrity(trace));
  RETURN_IF_ERROR(check_schema_objects(trace));
  ASSIGN_OR_RETURN(trace.status, read_status(trace));
  trace.writer_alive = writer_alive(path);
  if (trace.writer_alive || mode == TraceOpenMode::kReadStrict) {
    if (trace.status == RunStatus::kRunning && !trace.writer_alive) {
      trace.status = RunStatus::kIncomplete;
    }
    return trace;
  }
  // Running with its writer gone; or marked by an earlier reader that could not finish the
  // dead writer's close (a full disk), its lock left.
  const bool running = trace.status == RunStatus::kRunning;
  if (!running && !dead_writers_lock_left(path)) return trace;
  trace.db = SqliteDb();  // the read-write connection below recovers and checkpoints the WAL
  bool marked = false;
  Status finished = finish_dead_writers_trace(path, running, &marked);
  if (running) {
    trace.status = RunStatus::kIncomplete;
    trace.marked_incomplete = marked;
  }
  if (running && !marked) {
    log::warn(
        "{}: the run was left running by a writer that is gone, and it could not be marked "
        "incomplete: {}",
        path.string(), finished.message());
  } else if (running && !finished.is_ok()) {
    log::warn("{}: {}; its writer's leftovers stay beside it, a later read finishes the job",
              path.string(), finished.message());
  } else if (!finished.is_ok()) {
    log::debug("{}: the writer's leftovers stay: {}", path.string(), finished.message());
  }
  auto reopened = SqliteDb::open(name, flags);
  if (!reopened.is_ok()) return unreadable("{}", reopened.status().message());
  trace.db = std::move(reopened).value();
  return trace;
}

}  // namespace

StatusOr<TraceFile> open_trace(const std::filesystem::path& path, TraceOpenMode mode) {
  ASSIGN_OR_RETURN(TraceFile trace, open_checked(path, mode));
  // Rows naming strings a damaged file lost stay in the reads (damaged_rows.h: strings_lost).
  if (Status kept = keep_rows_of_lost_strings(trace.db); !kept.is_ok()) {
    return corrupted(trace.path, kept.message());
  }
  return trace;
}

}  // namespace partrain::profiler
