// Opening a trace for reading: tells a partrain trace from everything else (exit 3 naming the
// case: not SQLite, not a partrain trace, newer schema, truncated or corrupted), and marks a run
// whose writer died as incomplete, the one change a reader ever makes to an input trace.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>

#include "core/status.h"
#include "profiler/sqlite_db.h"
#include "profiler/trace_event.h"

namespace partrain::profiler {

enum class TraceOpenMode {
  kRead,       // a run left `running` by a writer that is gone is marked `incomplete`
  kReadStrict  // never writes, not even that (the status is still reported as incomplete)
};

struct TraceFile {
  std::filesystem::path path;
  SqliteDb db;  // read-only connection, for one thread at a time (opened without a mutex)
  int schema_version = 0;
  RunStatus status = RunStatus::kRunning;
  bool writer_alive = false;       // the run is live: its writer holds the lock
  bool marked_incomplete = false;  // this open changed `running` to `incomplete` in the file
};

// Files up to this size get a full integrity check when opened (PRAGMA quick_check); larger ones
// a probe of their length, schema and per-run tables, the event tables being checked page by
// page as they are read (trace_read_error).
inline constexpr uintmax_t kFullCheckBytes = uintmax_t{64} << 20;

// Whether a live TraceWriter holds `trace` (its `<trace>-writer` flock, released by the kernel
// when the writer's process exits or is killed).
bool writer_alive(const std::filesystem::path& trace);

// Whether `trace` is being created by a live TraceWriter: it holds the lock (which it takes
// before it makes the file) and the file is missing, empty, or an SQLite database whose schema is
// not committed yet (no meta table). open_trace calls such a file unreadable (exit 3), as it
// would a corrupt one; a reader that starts with the run (`partrain top` right after `launch`)
// asks this to tell one being born from one that is damaged, and waits for it.
bool trace_being_created(const std::filesystem::path& trace);

// A finished trace that a reader held open while its writer closed it (a live follower: the
// metrics endpoint, the dashboard) stays in WAL mode, and the reader's read-only close leaves its
// -wal and -shm files beside it. The last reader to let go puts it back into one file, as the
// writer would have: best effort, nothing done while a writer holds it or another reader does.
void settle_finished_trace(const std::filesystem::path& trace);

// Whether `path` can be a trace at all, by its first bytes (the SQLite magic), as open_trace
// checks it first: kUnreadable (exit 3) for a directory, a FIFO or device, JSON or gzip (a
// PyTorch profiler trace: "import it first") and anything else that is no SQLite database.
// Commands that check their paths before opening (export's output, merge's inputs) ask it first,
// so a Kineto file is named as one rather than as the output or an input given twice.
Status check_sqlite_header(const std::filesystem::path& path);

// Whether the SQLite database `db` is a partrain trace by its meta format (of any version, damaged
// or not): an importer given one says so rather than that it is no export of its kind.
bool is_partrain_trace(SqliteDb& db);

// Errors are kUnreadable (exit 3) with a message naming the file and the case.
StatusOr<TraceFile> open_trace(const std::filesystem::path& path,
                               TraceOpenMode mode = TraceOpenMode::kRead);

// The error for a read of an opened trace that just failed on `db` (`what`: "reading the slices
// of rank 0"): kUnreadable (exit 3), as open_trace would have said, when SQLite found the file
// truncated or corrupted; kFailed otherwise. Readers use it for the event tables, which
// open_trace's probe of a large file leaves unchecked.
Status trace_read_error(const SqliteDb& db, std::string_view what);

}  // namespace partrain::profiler
