// The single writer of a node's trace file: creates it from the compiled-in schema, stores
// TraceEvents with prepared statements in batched transactions (at most ~250 ms apart), and
// holds the `<file>-writer` lock that tells readers the run is still live (trace_open.h). The
// schema's deferred indexes (share/schema.sql, end) are built when the writer closes the file.
//
// When the file cannot grow (the disk is full, or options.max_file_bytes is reached) or a batch
// cannot be committed, tracing stops for good and the run it records goes on: the batch in flight
// is rolled back, a warning is logged once, the stat row `trace_stopped` says why, and from then
// on only the run's own rows (stats, ranks' exits, the run status) are stored, those of the
// rolled-back batch too; every other event is counted in that row's value, which follows the
// count on the commit cadence (a live reader sees it grow). What was committed before stays
// readable.
//
// Another process that holds the file's write lock (a `sqlite3` shell or a DB browser with a
// write transaction open) never blocks the caller: what arrives meanwhile is held in memory, up to
// options.max_held_events (the oldest kept, the run's own rows always), and stored once the lock
// is free; the wait is recorded in stat `store_lock_wait_ms`, what did not fit in
// `store_lock_dropped`. Closing waits for the lock up to options.close_lock_wait.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "core/status.h"
#include "profiler/sqlite_db.h"
#include "profiler/trace_event.h"

namespace partrain::profiler {

struct TraceWriterOptions {
  bool overwrite = false;  // replace an existing file (else creating it fails)
  // A batch is committed once its oldest event is this old, or once it holds this many events.
  std::chrono::milliseconds max_commit_interval{250};
  size_t max_batch_events = 500'000;
  // The most the file may grow to (0: as much as the disk holds). Reaching it stops tracing as a
  // full disk does.
  uint64_t max_file_bytes = 0;
  // Space set aside beside the file (disk_reserve.h) and given back when the disk fills up, so
  // that the stop is still recorded.
  uint64_t disk_reserve_bytes = 4 << 20;
  // Events held while another process holds the write lock: 320 bytes each, ~128 MiB in all.
  size_t max_held_events = 400'000;
  // How long set_run_status() waits for that lock before it gives up (and says what is lost).
  std::chrono::milliseconds close_lock_wait{10'000};
};

// The path of the lock file a live writer holds (flock, exclusive) beside `trace`.
std::filesystem::path writer_lock_path(const std::filesystem::path& trace);

// Builds the indexes that the schema leaves until a trace is closed (those after its
// `-- partrain:deferred-indexes` line), in one transaction on `db`, a read-write connection;
// builds nothing that exists already. The writer calls it when it closes the file; whoever
// finishes a trace whose writer died (marking it incomplete) calls it too. `size_limit_hit`, when
// given, says whether a failure was the file's size limit (its max_page_count: --trace-max-size),
// SQLite's "database or disk is full" with room left on the disk.
Status create_deferred_indexes(SqliteDb& db, bool* size_limit_hit = nullptr);
// A closed trace as one file: the WAL checkpointed into it and the journal mode set back to
// DELETE, so the file can be copied alone and read-only readers leave no -wal/-shm beside it.
// Needs no other connection open (a live dashboard's keeps it in WAL mode, which readers
// handle the same): false when that is so.
bool settle_into_one_file(SqliteDb& db);

class TraceWriter {
 public:
  // Fails (kInvalidArgument) when the file exists and options.overwrite is false, or when
  // another writer holds it; kFailed when SQLite cannot create it.
  static StatusOr<std::unique_ptr<TraceWriter>> create(const std::filesystem::path& path,
                                                       const TraceWriterOptions& options = {});
  // Commits what is pending, builds the deferred indexes (one sort of the slice table: about a
  // second per 10^6 slices) and releases the lock; the run status is left as it was.
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Stores events in the open batch; never throws: failures are logged once and counted (the
  // count lands in stat as store_write_errors). Commits when the batch is due.
  void append(std::span<const TraceEvent> events);
  void append(const TraceEvent& event) { append(std::span<const TraceEvent>(&event, 1)); }
  // For the collector's loop when no events arrive: commits a batch that has become due (once
  // tracing stopped: records the events dropped since trace_stopped last counted them).
  void commit_if_due();
  Status commit();
  // Final status of the run (and failing rank for kFailed); committed at once. Fails, naming the
  // process and what is not stored, when another process holds the write lock past
  // options.close_lock_wait.
  Status set_run_status(RunStatus status, std::optional<int> failing_rank = std::nullopt,
                        std::optional<int64_t> end_ns = std::nullopt);

  uint64_t events_written() const;
  uint64_t write_errors() const;
  // Why tracing stopped ("the disk is full"), empty while it goes on; and the events not stored
  // since (those of the batch rolled back included).
  const std::string& stop_reason() const;
  uint64_t events_dropped() const;
  // Empty while the file's path still names the file being written; else what became of it
  // ("removed", "replaced by another file"): the events recorded are not at that path.
  std::string file_gone() const;
  const std::filesystem::path& path() const;

 private:
  struct State;
  explicit TraceWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace partrain::profiler
