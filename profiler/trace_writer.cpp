#include "profiler/trace_writer.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <unordered_map>

#include "core/byte_size.h"
#include "core/log.h"
#include "core/own_file.h"
#include "profiler/disk_reserve.h"
#include "profiler/p2p_seq.h"
#include "profiler/sqlite_db.h"
#include "profiler/sqlite_lock_holder.h"
#include "profiler/sqlite_row_batch.h"
#include "profiler/trace_schema.h"

namespace partrain::profiler {

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kTracePageBytes = 8192;  // SQLite's page size in a trace file

// What a stopped trace still stores: the run's stats, its ranks (their exits) and its status.
bool is_run_row(const TraceEvent& event) {
  return std::holds_alternative<StatEvent>(event) || std::holds_alternative<RankInfo>(event) ||
         std::holds_alternative<RunInfo>(event);
}

// Heterogeneous lookup, so interning a string_view allocates only for strings not seen yet.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct TrackKey {
  int32_t rank;
  TrackKind kind;
  int64_t name_id;
  bool operator==(const TrackKey&) const = default;
};
struct TrackKeyHash {
  size_t operator()(const TrackKey& k) const {
    uint64_t h = static_cast<uint64_t>(k.name_id) * 0x9E3779B97F4A7C15ull;
    h ^= (static_cast<uint64_t>(static_cast<uint32_t>(k.rank)) << 8) | static_cast<uint8_t>(k.kind);
    return static_cast<size_t>(h * 0xBF58476D1CE4E5B9ull);
  }
};

std::string host_name() {
  char buffer[256] = {};
  if (gethostname(buffer, sizeof buffer - 1) != 0) return "unknown";
  return buffer;
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ranks[i]);
  }
  return out;
}

bool has_root(std::string_view op) {
  return op == "broadcast" || op == "reduce" || op == "gather" || op == "scatter";
}

// Bounds of the write-ahead log, in pages, before SQLite checkpoints it into the file: a quarter
// of the disk reserve (bound_log_by_reserve()), at most 64 MiB. The least reserve gives the least.
constexpr uint64_t kMinCheckpointPages = 16;
constexpr uint64_t kMaxCheckpointPages = 8192;
static_assert(DiskReserve::kMinReserveBytes / 4 / kTracePageBytes == kMinCheckpointPages);
// What an event adds to the write-ahead log, counted generously: its row, index entries and share
// of the pages each commit rewrites came to 31-43 bytes in a 4-rank gpt launch's batches of
// ~4400 events (18-23 pages of 8 KiB each; the commit's debug line says how many).
constexpr uint64_t kLogBytesPerEvent = 128;

// Removes a trace file and what SQLite keeps beside it.
void remove_trace_files(const std::filesystem::path& path) {
  std::error_code ignored;
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::filesystem::remove(path.string() + suffix, ignored);
  }
}

// The last error of `db` was the disk (or the file's size limit) being full: SQLite says so, or
// its filesystem has no block or no inode left (SQLite calls a -wal it cannot create for want of
// an inode "unable to open database file").
bool is_disk_full(const SqliteDb& db, const std::filesystem::path& path) {
  if (db.get() != nullptr &&
      ((db.error_code() & 0xff) == SQLITE_FULL || sqlite3_system_errno(db.get()) == ENOSPC)) {
    return true;
  }
  std::filesystem::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  struct statvfs fs {};
  return statvfs(dir.c_str(), &fs) == 0 && (fs.f_bavail == 0 || fs.f_favail == 0);
}

// RLIMIT_FSIZE (ulimit -f), where one is set.
std::optional<uint64_t> file_size_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_FSIZE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
    return std::nullopt;
  return uint64_t{limit.rlim_cur};
}

// The line of share/schema.sql after which come the indexes built at close.
constexpr std::string_view kDeferredIndexesLine = "-- partrain:deferred-indexes";

// The schema a new trace starts with, and the part of it built when the trace is closed.
std::string_view live_schema() {
  const std::string_view sql = schema_sql();
  return sql.substr(0, sql.find(kDeferredIndexesLine));
}
std::string_view deferred_indexes() {
  const std::string_view sql = schema_sql();
  const size_t at = sql.find(kDeferredIndexesLine);
  return at == std::string_view::npos ? std::string_view() : sql.substr(at);
}

int64_t unix_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool settle_into_one_file(SqliteDb& db) {
  if (!db.exec("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE").is_ok()) {
    return false;
  }
  auto mode = db.query_text("PRAGMA journal_mode");
  return mode.is_ok() && mode->value_or("") == "delete";
}

std::filesystem::path writer_lock_path(const std::filesystem::path& trace) {
  // Beside the file itself, whatever name it is given by (a symbolic link, ./, another working
  // directory): a reader through a link must see the live writer's lock, or it would take the
  // run for one whose writer died and mark it incomplete.
  std::error_code error;
  std::filesystem::path resolved = std::filesystem::weakly_canonical(trace, error);
  if (error || resolved.empty()) resolved = trace;
  return std::filesystem::path(resolved.string() + "-writer");
}

Status create_deferred_indexes(SqliteDb& db, bool* size_limit_hit) {
  RETURN_IF_ERROR(db.exec("BEGIN IMMEDIATE"));
  Status status = db.exec(deferred_indexes());
  if (status.is_ok()) status = db.exec("COMMIT");
  if (!status.is_ok()) {
    if (size_limit_hit != nullptr) {
      *size_limit_hit =
          (db.error_code() & 0xff) == SQLITE_FULL && sqlite3_system_errno(db.get()) != ENOSPC;
    }
    (void)db.exec("ROLLBACK");
    return status.with_context("building the trace's indexes");
  }
  return Status::ok();
}

struct TraceWriter::State {
  std::filesystem::path path;
  TraceWriterOptions options;
  SqliteDb db;
  int lock_fd = -1;
  SqliteStatement insert_string, insert_track, keep_earlier_step, insert_step, insert_counter,
      insert_transfer, insert_expert_load, upsert_stat, upsert_rank, upsert_rank_exit,
      update_run_info, update_run_status;
  SqliteRowBatch slices, collectives, kernels, memory;  // the tables nearly every event goes to
  SqliteRowBatch collective_choices;  // collective_nccl: one row a collective under the plugin
  std::unordered_map<std::string, int64_t, StringHash, std::equal_to<>> strings;
  // A collective's group (its world ranks' bytes) -> the string id of "0,1,2,3", so the list is
  // joined into text only the first time a group is seen.
  std::unordered_map<std::string, int64_t, StringHash, std::equal_to<>> groups;
  std::unordered_map<TrackKey, int64_t, TrackKeyHash> tracks;
  struct LastTrack {
    int32_t rank = 0;
    TrackKind kind = TrackKind::kCpuThread;
    std::string name;
    int64_t name_id = 0;
    int64_t id = 0;  // 0: none yet
  } last_track;
  int64_t next_string_id = 1;
  int64_t next_track_id = 1;
  int64_t next_slice_id = 1;
  bool in_batch = false;
  Clock::time_point batch_opened;
  size_t batch_events = 0;
  uint64_t events_written = 0;
  uint64_t write_errors = 0;
  uint64_t errors_recorded = 0;  // of write_errors, how many are already in stat
  bool created = false;          // create() succeeded: closing builds the deferred indexes
  DiskReserve reserve;
  size_t batch_event_limit = 0;  // options.max_batch_events, or less to fit the reserve
  struct stat identity {};       // of the file created, to tell when its path names another
  // Stopping (trace_writer.h): a full file or a failed COMMIT sets stop_reason; stop() acts on
  // it once the statement in hand is done.
  std::string stop_reason;
  bool stopped = false;
  // The run's own rows (is_run_row) appended since the last commit: a stop rolls their batch
  // back, and they are stored again after it, as any that come later are.
  std::vector<TraceEvent> run_rows_in_batch;
  uint64_t events_dropped = 0;
  uint64_t drops_recorded = 0;  // of events_dropped, how many trace_stopped already counts
  Clock::time_point drops_recorded_at;
  // Another process holding the write lock (trace_writer.h): BEGIN IMMEDIATE failed at once, and
  // what arrives waits in `held` until a later try takes the lock.
  struct LockWait {
    bool locked_out = false;
    Clock::time_point since, tried_at;
    bool warned = false;
    bool gave_up = false;  // the close's wait ran out: nothing more is tried
    std::vector<TraceEvent> held;
    uint64_t dropped = 0, dropped_recorded = 0;
    int64_t waited_ms_unrecorded = 0;
  } lock_wait;

  void note_error(int rc, std::string_view what, uint64_t count = 1) {
    if (stopped) return;  // the failed statements of the stop notice itself: nothing to add
    if (write_errors == 0 && !ends_tracing(rc)) {
      log::warn("trace {}: cannot store {}: {} (further errors are only counted)", path.string(),
                what, sqlite3_errstr(rc));
    }
    write_errors += count;
    if (ends_tracing(rc) && stop_reason.empty()) stop_reason = describe_stop(rc);
  }
  // The file cannot grow, or cannot be written at all: nothing later would be stored either.
  static bool ends_tracing(int rc) {
    const int primary = rc & 0xff;
    return primary == SQLITE_FULL || primary == SQLITE_IOERR;
  }
  std::string describe_stop(int rc) const {
    if ((rc & 0xff) != SQLITE_FULL) return fmt::format("the trace cannot be written ({})",
                                                       sqlite3_errstr(rc));
    if (options.max_file_bytes > 0) {
      return fmt::format("the disk is full or the trace reached its size limit of {} bytes",
                         options.max_file_bytes);
    }
    return "the disk is full";
  }
  void flush(SqliteRowBatch& batch) {
    if (!stop_reason.empty()) return;  // stopping: the batch's rows are discarded with it
    int rc = SQLITE_OK;
    const uint64_t failed = batch.flush(&rc);
    if (failed > 0) note_error(rc, batch.what(), failed);
  }
  void row_added(SqliteRowBatch& batch) {
    if (batch.full()) flush(batch);
  }
  void flush_rows() {
    flush(slices);  // before the collective rows that share their ids
    flush(collectives);
    flush(collective_choices);
    flush(kernels);
    flush(memory);
  }
  void run(SqliteStatement& stmt, std::string_view what) {
    if (!stop_reason.empty() && !stopped) return;  // the batch is lost; nothing goes in alone
    if (!in_batch && lock_wait.locked_out) {       // it would wait out the busy timeout, and fail
      note_error(SQLITE_BUSY, what);
      return;
    }
    int rc = stmt.run();
    if (rc != SQLITE_DONE) note_error(rc, what);
  }
  bool take_write_lock();
  void hold(std::span<const TraceEvent> events);
  void warn_if_locked_long();
  bool wait_for_write_lock();
  void store_batch(std::span<const TraceEvent> events);
  void store_held();
  Status open_new();
  void bound_log_by_reserve();
  Status prepare_statements();
  void begin_batch();
  int64_t intern(std::string_view value);
  int64_t track_id(int32_t rank, TrackKind kind, std::string_view name);
  int64_t group_id(const std::vector<int>& ranks);
  int64_t insert_slice_row(int64_t track, int64_t ts, int64_t dur, int64_t name_id,
                           SliceCategory category, int64_t step, int64_t micro_batch,
                           int64_t layer);
  void store(const SliceEvent& e);
  void store(const CollectiveRecord& r);
  void store(const MemorySample& e);
  void store(const StepEvent& e);
  void store(const StatEvent& e);
  void store(const RankInfo& e);
  void store(const RunInfo& e);
  void store(const KernelRecord& e);
  void store(const TransferRecord& e);
  void store(const CounterSample& e);
  void store(const ExpertLoadRecord& e);
  Status commit_batch();
  void stop();
  void append_after_stop(std::span<const TraceEvent> events);
  void record_drops_if_due();
  void build_indexes();
};

Status TraceWriter::State::prepare_statements() {
  struct Entry {
    SqliteStatement* stmt;
    std::string_view sql;
  };
  const Entry entries[] = {
      {&insert_string, "INSERT INTO string (id, value) VALUES (?1, ?2)"},
      {&insert_track, "INSERT INTO track (id, rank, kind, name_id) VALUES (?1, ?2, ?3, ?4)"},
      {&insert_counter, "INSERT INTO counter (track_id, ts_ns, value) VALUES (?1, ?2, ?3)"},
      {&insert_transfer,
       "INSERT INTO transfer (slice_id, correlation_id, device, stream, bytes) "
       "VALUES (?1, ?2, ?3, ?4, ?5)"},
      // Each torchrun attempt keeps its steps (a restarted worker numbers them from 0 again).
      // A step of a number the rank already has in its attempt (the job's step counter started
      // again) replaces the row in `step`; the row it replaces is kept in `earlier_step` first.
      // The same step sent again (the same start) is not an earlier one.
      {&keep_earlier_step,
       "INSERT INTO earlier_step (rank, step, ts_ns, dur_ns, loss, tokens, attempt) SELECT rank, "
       "step, ts_ns, dur_ns, loss, tokens, attempt FROM step WHERE attempt = ?4 AND rank = ?1 "
       "AND step = ?2 AND ts_ns <> ?3"},
      {&insert_step,
       "INSERT OR REPLACE INTO step (rank, step, ts_ns, dur_ns, loss, tokens, attempt) "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"},
      // A step's record of a layer sent twice (a retried step) keeps the latest, as steps do.
      {&insert_expert_load,
       "INSERT OR REPLACE INTO expert_load (rank, step, layer, experts, tokens, dropped_tokens, "
       "aux_loss) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"},
      {&upsert_stat,
       "INSERT INTO stat (name, rank, value, severity, description) VALUES (?1, ?2, ?3, ?4, ?5) "
       "ON CONFLICT (name, rank) DO UPDATE SET value = value + excluded.value, "
       "severity = excluded.severity, description = CASE WHEN excluded.description <> '' "
       "THEN excluded.description ELSE description END"},
      {&upsert_rank,
       "INSERT INTO rank (rank, local_rank, node, host, pid, device, clock_offset_ns, "
       "clock_uncertainty_ns, clock_drift_ppm) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
       "ON CONFLICT (rank) DO UPDATE SET local_rank = excluded.local_rank, "
       "node = excluded.node, host = excluded.host, pid = excluded.pid, device = excluded.device, "
       "clock_offset_ns = excluded.clock_offset_ns, "
       "clock_uncertainty_ns = excluded.clock_uncertainty_ns, "
       "clock_drift_ppm = excluded.clock_drift_ppm"},
      // The launcher's exit record: the exit status, and who the rank was only where the rank
      // never said so itself (it died before its recorder connected).
      {&upsert_rank_exit,
       "INSERT INTO rank (rank, local_rank, node, host, pid, exit_code, exit_signal) "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (rank) DO UPDATE SET "
       "local_rank = coalesce(local_rank, excluded.local_rank), "
       "node = coalesce(node, excluded.node), host = coalesce(host, excluded.host), "
       "pid = coalesce(pid, excluded.pid), exit_code = excluded.exit_code, "
       "exit_signal = excluded.exit_signal"},
      {&update_run_info,
       // A RunInfo fills in what it knows: empty text, '{}', 0 leave the stored value (a
       // launcher under an outer `partrain trace` adds its world size and config that way).
       "UPDATE run SET run_id = CASE WHEN ?1 = '' THEN run_id ELSE ?1 END, "
       "command = CASE WHEN ?2 = '' THEN command ELSE ?2 END, "
       "config = CASE WHEN ?3 = '{}' THEN config ELSE ?3 END, "
       "world_size = CASE WHEN ?4 = 0 AND world_size IS NOT NULL THEN world_size ELSE ?4 END, "
       "start_unix_ns = CASE WHEN ?5 = 0 AND start_unix_ns IS NOT NULL THEN start_unix_ns "
       "ELSE ?5 END, "
       "start_ns = CASE WHEN ?6 = 0 AND start_ns IS NOT NULL THEN start_ns ELSE ?6 END "
       "WHERE id = 1"},
      {&update_run_status,
       "UPDATE run SET status = ?1, failing_rank = ?2, end_ns = coalesce(?3, end_ns), "
       "end_unix_ns = ?4 WHERE id = 1"},
  };
  for (const Entry& entry : entries) {
    ASSIGN_OR_RETURN(*entry.stmt, SqliteStatement::prepare(db, entry.sql));
  }
  RETURN_IF_ERROR(slices.prepare(db,
                                 "INSERT OR FAIL INTO slice (id, track_id, ts_ns, dur_ns, name_id, "
                                 "category, step, micro_batch, layer)",
                                 9, "slices", {}, /*rowid_first=*/true));
  RETURN_IF_ERROR(collectives.prepare(
      db,
      "INSERT OR FAIL INTO collective (slice_id, comm_id, seq, op, dtype, reduce_op, count, "
      "bytes, peer, root, comm_rank, group_size, group_ranks_id, enqueue_ns, gpu_start_ns, "
      "gpu_end_ns, state)",
      17, "collectives"));
  RETURN_IF_ERROR(kernels.prepare(
      db,
      "INSERT OR FAIL INTO kernel (slice_id, correlation_id, device, stream, grid_x, grid_y, "
      "grid_z, block_x, block_y, block_z, registers, static_shared_bytes, dynamic_shared_bytes)",
      13, "kernels"));
  RETURN_IF_ERROR(collective_choices.prepare(
      db, "INSERT OR FAIL INTO collective_nccl (slice_id, algorithm, protocol, channels)", 4,
      "collectives' NCCL choices"));
  return memory.prepare(db, "INSERT OR FAIL INTO memory (rank, ts_ns, category, bytes)", 4,
                        "memory samples");
}

void TraceWriter::State::begin_batch() { (void)take_write_lock(); }

// Opens a batch: BEGIN IMMEDIATE takes the write lock at once or fails without waiting, so that
// another process's transaction never stalls the collector's thread. False while that process
// holds it (tried again at most every 50 ms) and when BEGIN fails otherwise (the statements then
// go in one at a time, as before a batch).
bool TraceWriter::State::take_write_lock() {
  if (in_batch) return true;
  if (lock_wait.gave_up) return false;
  const Clock::time_point now = Clock::now();
  if (lock_wait.locked_out && now - lock_wait.tried_at < std::chrono::milliseconds(50)) {
    return false;
  }
  lock_wait.tried_at = now;
  Status status = db.exec_without_waiting("BEGIN IMMEDIATE");
  if (!status.is_ok()) {
    if ((db.error_code() & 0xff) != SQLITE_BUSY) {
      note_error(db.error_code(), "a batch (BEGIN)");
      return false;
    }
    if (!lock_wait.locked_out) lock_wait.since = now;
    lock_wait.locked_out = true;
    return false;
  }
  in_batch = true;
  batch_opened = now;
  batch_events = 0;
  if (lock_wait.locked_out) {
    lock_wait.locked_out = false;
    const auto waited = now - lock_wait.since;
    lock_wait.waited_ms_unrecorded +=
        std::chrono::duration_cast<std::chrono::milliseconds>(waited).count();
    if (lock_wait.warned) {
      log::warn(
          "trace {}: the write lock is free again after {:.1f} s; the {} events held "
          "meanwhile are stored{}",
          path.string(), std::chrono::duration<double>(waited).count(), lock_wait.held.size(),
          lock_wait.dropped > lock_wait.dropped_recorded
              ? fmt::format(", {} more were not (stat store_lock_dropped)",
                            lock_wait.dropped - lock_wait.dropped_recorded)
              : "");
      lock_wait.warned = false;
    }
  }
  store_held();
  return true;
}

// While another process holds the write lock: the oldest events are kept, up to the bound, and
// the run's own rows always (they are few); the rest is counted in store_lock_dropped.
void TraceWriter::State::hold(std::span<const TraceEvent> events) {
  std::vector<TraceEvent>& held = lock_wait.held;
  for (const TraceEvent& event : events) {
    if (held.size() < options.max_held_events || is_run_row(event)) {
      held.push_back(event);
    } else {
      ++lock_wait.dropped;
    }
  }
  warn_if_locked_long();
}

// Once the lock has been held elsewhere for a second (a checkpoint's brief hold is no news).
void TraceWriter::State::warn_if_locked_long() {
  if (!lock_wait.locked_out || lock_wait.warned ||
      Clock::now() - lock_wait.since < std::chrono::seconds(1)) {
    return;
  }
  lock_wait.warned = true;
  const std::string holder = sqlite_write_lock_holder(path);
  log::warn(
      "trace {}: {} holds its write lock (a transaction left open in a sqlite3 shell or a "
      "database browser?); the events that arrive meanwhile are kept in memory, up to {}, "
      "and stored once it lets go",
      path.string(), holder.empty() ? "another process" : holder, options.max_held_events);
}

// At the close: waits up to options.close_lock_wait for the lock (true once it is taken, or when
// BEGIN failed for another reason and statements go in one at a time).
bool TraceWriter::State::wait_for_write_lock() {
  if (lock_wait.gave_up) return false;
  if (take_write_lock()) return true;
  if (!lock_wait.locked_out) return true;
  const Clock::time_point deadline = Clock::now() + options.close_lock_wait;
  const std::string holder = sqlite_write_lock_holder(path);
  log::warn(
      "trace {}: waiting up to {:.1f} s for {} to release its write lock; {} events are "
      "held for it",
      path.string(), std::chrono::duration<double>(options.close_lock_wait).count(),
      holder.empty() ? "another process" : holder, lock_wait.held.size());
  lock_wait.warned = true;
  while (Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (take_write_lock()) return true;
  }
  lock_wait.gave_up = true;
  return false;
}

// Stores a batch's events (those of a stopping trace are counted by the stop instead).
void TraceWriter::State::store_batch(std::span<const TraceEvent> events) {
  for (const TraceEvent& event : events) {
    if (is_run_row(event)) run_rows_in_batch.push_back(event);
    // Once stopping, the rest is counted as dropped by the stop (the run's rows stored after it).
    if (stop_reason.empty()) std::visit([this](const auto& e) { store(e); }, event);
  }
  batch_events += events.size();
}

void TraceWriter::State::store_held() {
  if (lock_wait.held.empty()) return;
  const std::vector<TraceEvent> held = std::move(lock_wait.held);
  lock_wait.held.clear();
  store_batch(held);
}

int64_t TraceWriter::State::intern(std::string_view value) {
  auto it = strings.find(value);
  if (it != strings.end()) return it->second;
  int64_t id = next_string_id++;
  insert_string.bind(1, id);
  insert_string.bind(2, value);
  run(insert_string, "a string");
  strings.emplace(std::string(value), id);
  return id;
}

int64_t TraceWriter::State::track_id(int32_t rank, TrackKind kind, std::string_view name) {
  // Events arrive in runs from one rank's thread or communicator (a batch drains one thread's
  // buffer at a time), so the last track usually matches and no hashing is needed.
  if (last_track.id > 0 && last_track.rank == rank && last_track.kind == kind &&
      last_track.name == name) {
    return last_track.id;
  }
  TrackKey key{rank, kind, intern(name)};
  auto it = tracks.find(key);
  int64_t id = 0;
  if (it != tracks.end()) {
    id = it->second;
  } else {
    id = next_track_id++;
    insert_track.bind(1, id);
    insert_track.bind(2, int64_t{rank});
    insert_track.bind(3, int64_t{static_cast<uint8_t>(kind)});
    insert_track.bind(4, key.name_id);
    run(insert_track, "a track");
    tracks.emplace(key, id);
  }
  last_track = {rank, kind, std::string(name), key.name_id, id};
  return id;
}

int64_t TraceWriter::State::group_id(const std::vector<int>& ranks) {
  const std::string_view key(reinterpret_cast<const char*>(ranks.data()),
                             ranks.size() * sizeof(int));
  auto it = groups.find(key);
  if (it != groups.end()) return it->second;
  const int64_t id = intern(join_ranks(ranks));
  groups.emplace(std::string(key), id);
  return id;
}

int64_t TraceWriter::State::insert_slice_row(int64_t track, int64_t ts, int64_t dur,
                                             int64_t name_id, SliceCategory category,
                                             int64_t step, int64_t micro_batch, int64_t layer) {
  const int64_t id = next_slice_id++;
  SqlCell* row = slices.add_row();
  row[0] = sql_integer(id);
  row[1] = sql_integer(track);
  row[2] = sql_integer(ts);
  row[3] = sql_integer(dur);
  row[4] = sql_integer(name_id);
  row[5] = sql_integer(static_cast<uint8_t>(category));
  row[6] = sql_known(step);
  row[7] = sql_known(micro_batch);
  row[8] = sql_known(layer);
  row_added(slices);
  return id;
}

void TraceWriter::State::store(const SliceEvent& e) {
  int64_t track = track_id(e.rank, e.track_kind, e.track);
  insert_slice_row(track, e.ts_ns, e.dur_ns, intern(e.name), e.category, e.step, e.micro_batch,
                   e.layer);
}

void TraceWriter::State::store(const CollectiveRecord& r) {
  const CollectiveEvent& e = r.event;
  const int64_t track = track_id(r.world_rank, TrackKind::kComm, e.comm_id);
  const int64_t comm_id = last_track.name_id;  // track_id interned the communicator's name
  int64_t start = e.start_ns != 0 ? e.start_ns : e.enqueue_ns;
  int64_t dur = e.end_ns >= start ? e.end_ns - start : 0;
  SliceCategory category = is_p2p(e.op) ? SliceCategory::kP2p : SliceCategory::kCollective;
  const int64_t op = intern(e.op);
  // The slice is named for what the op is for, when its caller said; the op is in its row.
  const int64_t name = e.label.empty() ? op : intern(e.label);
  const int64_t slice = insert_slice_row(track, start, dur, name, category, r.step, -1, -1);
  SqlCell* row = collectives.add_row();
  row[0] = sql_integer(slice);
  row[1] = sql_integer(comm_id);
  row[2] = sql_integer(static_cast<int64_t>(e.seq));
  row[3] = sql_integer(op);
  row[4] = sql_integer(intern(e.dtype));
  row[5] = e.reduce_op.empty() ? kSqlNull : sql_integer(intern(e.reduce_op));
  row[6] = sql_integer(static_cast<int64_t>(e.count));
  row[7] = sql_integer(static_cast<int64_t>(e.bytes));
  row[8] = sql_known(is_p2p(e.op) ? e.peer : -1);
  row[9] = sql_known(has_root(e.op) ? e.peer : -1);
  row[10] = sql_integer(e.rank);
  row[11] = sql_integer(e.group_size > 0 ? e.group_size
                                         : static_cast<int64_t>(e.group_ranks.size()));
  row[12] = e.group_ranks.empty() ? kSqlNull : sql_integer(group_id(e.group_ranks));
  row[13] = sql_known(e.enqueue_ns != 0 ? e.enqueue_ns : -1);
  row[14] = sql_known(r.gpu_start_ns);
  row[15] = sql_known(r.gpu_end_ns);
  row[16] = sql_integer(static_cast<uint8_t>(e.state));
  row_added(collectives);
  // What NCCL chose, where its profiler plugin said.
  if (!e.algorithm.empty() || !e.protocol.empty() || e.channels > 0) {
    SqlCell* choice = collective_choices.add_row();
    choice[0] = sql_integer(slice);
    choice[1] = e.algorithm.empty() ? kSqlNull : sql_integer(intern(e.algorithm));
    choice[2] = e.protocol.empty() ? kSqlNull : sql_integer(intern(e.protocol));
    choice[3] = e.channels > 0 ? sql_integer(e.channels) : kSqlNull;
    row_added(collective_choices);
  }
}

void TraceWriter::State::store(const KernelRecord& e) {
  const SliceEvent& s = e.slice;
  const int64_t track = track_id(s.rank, TrackKind::kCudaStream, s.track);
  const int64_t slice = insert_slice_row(track, s.ts_ns, s.dur_ns, intern(s.name),
                                         SliceCategory::kKernel, s.step, -1, -1);
  SqlCell* row = kernels.add_row();
  row[0] = sql_integer(slice);
  row[1] = sql_integer(e.correlation_id);
  row[2] = sql_integer(e.device);
  row[3] = sql_integer(e.stream);
  for (size_t i = 0; i < 3; ++i) {
    row[4 + i] = sql_integer(e.grid[i]);
    row[7 + i] = sql_integer(e.block[i]);
  }
  row[10] = sql_integer(e.registers);
  row[11] = sql_integer(e.static_shared_bytes);
  row[12] = sql_integer(e.dynamic_shared_bytes);
  row_added(kernels);
}

// GPU copies and fills are few next to kernels: one statement each, no batch.
void TraceWriter::State::store(const TransferRecord& e) {
  const SliceEvent& s = e.slice;
  const int64_t track = track_id(s.rank, TrackKind::kCudaStream, s.track);
  insert_transfer.bind(1, insert_slice_row(track, s.ts_ns, s.dur_ns, intern(s.name), s.category,
                                           s.step, -1, -1));
  insert_transfer.bind(2, int64_t{e.correlation_id});
  insert_transfer.bind(3, int64_t{e.device});
  insert_transfer.bind(4, e.stream);
  insert_transfer.bind(5, static_cast<int64_t>(e.bytes));
  run(insert_transfer, "a transfer");
}

void TraceWriter::State::store(const MemorySample& e) {
  constexpr uint8_t kOther = 6;  // memory::Category::kOther, for codes this build does not know
  SqlCell* row = memory.add_row();
  row[0] = sql_integer(e.rank);
  row[1] = sql_integer(e.ts_ns);
  row[2] = sql_integer(std::min(e.category, kOther));
  row[3] = sql_integer(e.bytes);
  row_added(memory);
}

void TraceWriter::State::store(const StepEvent& e) {
  keep_earlier_step.bind(1, int64_t{e.rank});
  keep_earlier_step.bind(2, e.step);
  keep_earlier_step.bind(3, e.ts_ns);
  keep_earlier_step.bind(4, int64_t{e.attempt});
  run(keep_earlier_step, "a replaced step");
  insert_step.bind(1, int64_t{e.rank});
  insert_step.bind(2, e.step);
  insert_step.bind(3, e.ts_ns);
  insert_step.bind(4, e.dur_ns);
  insert_step.bind(5, e.loss);
  insert_step.bind(6, e.tokens);
  insert_step.bind(7, int64_t{e.attempt});
  run(insert_step, "a step");
}

void TraceWriter::State::store(const CounterSample& e) {
  insert_counter.bind(1, track_id(e.rank, TrackKind::kCounter, e.name));
  insert_counter.bind(2, e.ts_ns);
  insert_counter.bind(3, e.value);
  run(insert_counter, "a counter sample");
}

// A layer's step: one row, its experts' counts as a JSON array (share/schema.sql).
void TraceWriter::State::store(const ExpertLoadRecord& e) {
  std::string tokens = "[";
  for (size_t i = 0; i < e.tokens_per_expert.size(); ++i) {
    if (i > 0) tokens += ',';
    tokens += std::to_string(e.tokens_per_expert[i]);
  }
  tokens += ']';
  insert_expert_load.bind(1, int64_t{e.rank});
  insert_expert_load.bind(2, e.step);
  insert_expert_load.bind(3, int64_t{e.layer});
  insert_expert_load.bind(4, static_cast<int64_t>(e.tokens_per_expert.size()));
  insert_expert_load.bind(5, std::string_view(tokens));
  insert_expert_load.bind(6, e.dropped_tokens);
  if (std::isnan(e.aux_loss)) {
    insert_expert_load.bind_null(7);
  } else {
    insert_expert_load.bind(7, e.aux_loss);
  }
  run(insert_expert_load, "an expert load");
}

void TraceWriter::State::store(const StatEvent& e) {
  upsert_stat.bind(1, std::string_view(e.name));
  upsert_stat.bind(2, int64_t{e.rank < 0 ? -1 : e.rank});
  upsert_stat.bind(3, e.value);
  upsert_stat.bind(4, stat_severity_name(e.severity));
  upsert_stat.bind(5, std::string_view(e.description));
  run(upsert_stat, "a stat");
}

void TraceWriter::State::store(const RankInfo& e) {
  if (e.exited) {
    SqliteStatement& s = upsert_rank_exit;
    s.bind(1, int64_t{e.rank});
    s.bind(2, int64_t{e.local_rank});
    s.bind(3, int64_t{e.node});
    s.bind(4, std::string_view(e.host));
    s.bind(5, e.pid);
    // A rank a signal ended has no exit code (as waitpid's WEXITSTATUS means nothing then).
    if (e.exit_signal != 0) {
      s.bind_null(6);
    } else {
      s.bind(6, int64_t{e.exit_code});
    }
    s.bind(7, int64_t{e.exit_signal});
    run(s, "a rank's exit");
    return;
  }
  SqliteStatement& s = upsert_rank;
  s.bind(1, int64_t{e.rank});
  s.bind(2, int64_t{e.local_rank});
  s.bind(3, int64_t{e.node});
  s.bind(4, std::string_view(e.host));
  s.bind(5, e.pid);
  s.bind(6, std::string_view(e.device));
  s.bind(7, e.clock_offset_ns);
  s.bind(8, e.clock_uncertainty_ns);
  s.bind(9, e.clock_drift_ppm);
  run(s, "a rank");
}

void TraceWriter::State::store(const RunInfo& e) {
  SqliteStatement& s = update_run_info;
  s.bind(1, std::string_view(e.run_id));
  s.bind(2, std::string_view(e.command));
  s.bind(3, std::string_view(e.config_json.empty() ? "{}" : e.config_json));
  s.bind(4, int64_t{e.world_size});
  s.bind(5, e.start_unix_ns);
  s.bind(6, e.start_ns);
  run(s, "the run");
}

Status TraceWriter::State::commit_batch() {
  if (!stopped) flush_rows();  // even outside a batch (BEGIN failed): one statement at a time
  if (!stop_reason.empty() && !stopped) stop();
  if (stopped && events_dropped > drops_recorded && in_batch) {
    StatEvent dropped{"trace_stopped", -1, static_cast<int64_t>(events_dropped - drops_recorded),
                      StatSeverity::kDataLoss, ""};
    drops_recorded = events_dropped;
    drops_recorded_at = Clock::now();
    store(dropped);
  }
  if (!in_batch) {
    run_rows_in_batch.clear();  // stored a statement at a time: nothing to roll back
    return Status::ok();
  }
  if (!stopped && write_errors > errors_recorded) {
    StatEvent stat{"store_write_errors", -1, static_cast<int64_t>(write_errors - errors_recorded),
                   StatSeverity::kDataLoss, "events the trace writer could not store"};
    errors_recorded = write_errors;
    store(stat);
  }
  if (!stopped && lock_wait.waited_ms_unrecorded > 0) {
    store(StatEvent{"store_lock_wait_ms", -1, lock_wait.waited_ms_unrecorded, StatSeverity::kInfo,
                    "milliseconds another process held the trace's write lock while the run "
                    "went on; the events meanwhile were held in memory and stored after"});
    lock_wait.waited_ms_unrecorded = 0;
  }
  if (!stopped && lock_wait.dropped > lock_wait.dropped_recorded) {
    store(StatEvent{"store_lock_dropped", -1,
                    static_cast<int64_t>(lock_wait.dropped - lock_wait.dropped_recorded),
                    StatSeverity::kDataLoss,
                    fmt::format("events not stored: they arrived while another process held the "
                                "trace's write lock, past the {} the writer holds in memory",
                                options.max_held_events)});
    lock_wait.dropped_recorded = lock_wait.dropped;
  }
  in_batch = false;
  Status status = db.exec("COMMIT");
  if (status.is_ok()) {
    run_rows_in_batch.clear();
    int pages = 0, unused = 0;  // written to the log by this batch (kLogBytesPerEvent)
    sqlite3_db_status(db.get(), SQLITE_DBSTATUS_CACHE_WRITE, &pages, &unused, 1);
    log::debug("trace {}: a batch of {} events committed, {} pages into the log", path.string(),
               batch_events, pages);
    return Status::ok();
  }
  const int rc = db.error_code();
  (void)db.exec("ROLLBACK");
  if (stopped) return status.with_context(fmt::format("committing to {}", path.string()));
  // The batch is gone, and with it the rows the writer's id caches point to.
  note_error(rc, "a batch (COMMIT)");
  if (stop_reason.empty()) stop_reason = describe_stop(rc);
  stop();
  return Status::ok();
}

// Rolls back the batch in flight, hands back the disk reserve and records the stop (trace_writer.h).
void TraceWriter::State::stop() {
  if (stopped) return;
  if (in_batch) (void)db.exec("ROLLBACK");  // SQLite may have rolled it back already
  in_batch = false;
  // The run's own rows of the batch are stored again below: not dropped.
  const std::vector<TraceEvent> run_rows = std::move(run_rows_in_batch);
  run_rows_in_batch.clear();
  events_dropped += batch_events - std::min(batch_events, run_rows.size());
  batch_events = 0;
  for (SqliteRowBatch* batch : {&slices, &collectives, &collective_choices, &kernels, &memory}) {
    batch->discard();
  }
  strings.clear();  // their rows may have been in the batch
  tracks.clear();
  groups.clear();
  last_track = {};
  stopped = true;
  const uint64_t freed = reserve.bytes();
  reserve.release();
  // The log into the file, and the log emptied: its rows no longer depend on a -wal file, and
  // its space is free for what follows (the stop notice, the ranks' exits, the run's status).
  if (!db.exec("PRAGMA wal_checkpoint(TRUNCATE)").is_ok()) {
    log::debug("trace {}: the write-ahead log could not be checkpointed at the stop: {}",
               path.string(), db.error_message());
  }
  if (options.max_file_bytes > 0) {
    // Room for the notice when the limit, not the disk, is what is full.
    (void)db.exec(fmt::format("PRAGMA max_page_count = {}",
                              options.max_file_bytes / kTracePageBytes + 512));
  }
  log::warn("trace {}: {}: tracing stops here and the run goes on; the trace keeps the {} "
            "events stored before (the {} bytes held in reserve were freed to record the stop)",
            path.string(), stop_reason, events_written - events_dropped, freed);
  begin_batch();
  StatEvent notice{"trace_stopped", -1, static_cast<int64_t>(events_dropped),
                   StatSeverity::kDataLoss,
                   fmt::format("tracing stopped: {}; the run went on, and the events after it "
                               "(counted here) are not in the trace", stop_reason)};
  drops_recorded = events_dropped;
  drops_recorded_at = Clock::now();
  store(notice);
  (void)commit_batch();
  append_after_stop(run_rows);
}

// Once stopped: the run's own rows are stored (each alone, they are few); the rest is counted.
void TraceWriter::State::append_after_stop(std::span<const TraceEvent> events) {
  bool kept = false;
  for (const TraceEvent& event : events) {
    if (!is_run_row(event)) {
      ++events_dropped;
      continue;
    }
    begin_batch();
    std::visit([this](const auto& e) { store(e); }, event);
    kept = true;
  }
  if (kept) (void)commit_batch();
  record_drops_if_due();
}

// Once stopped, the count in trace_stopped follows the events dropped on the commit cadence, not
// only at the end: a live reader (the metrics endpoint) serves it while the run goes on, and the
// growing count says the ranks still record. One row updated in place: no room is needed.
void TraceWriter::State::record_drops_if_due() {
  if (!stopped || events_dropped <= drops_recorded) return;
  if (Clock::now() - drops_recorded_at < options.max_commit_interval) return;
  begin_batch();
  (void)commit_batch();  // stores what trace_stopped does not count yet
}

// The deferred indexes, at close. Where they do not fit under --trace-max-size the trace stays
// as it is, every event in it (readers scan instead), and says so: in the log, naming the limit
// (SQLite's "database or disk is full" read as a full disk), and in the stat
// trace_indexes_not_built, for which the limit is raised by a few pages, as for trace_stopped.
void TraceWriter::State::build_indexes() {
  const auto start = Clock::now();
  bool size_limit_hit = false;
  const Status status = create_deferred_indexes(db, &size_limit_hit);
  log::debug("trace {}: indexes built in {} ms", path.string(),
             std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
  if (status.is_ok()) return;
  if (!size_limit_hit || options.max_file_bytes == 0) {
    log::warn("trace {}: {}; readers get the same answers, more slowly", path.string(),
              status.message());
    return;
  }
  const std::string reason = fmt::format(
      "the indexes were not built: they did not fit under the trace's size limit of {} bytes "
      "(--trace-max-size); every event is stored, and readers get the same answers, more slowly",
      options.max_file_bytes);
  log::warn("trace {}: {}", path.string(), reason);
  (void)db.exec(
      fmt::format("PRAGMA max_page_count = {}", options.max_file_bytes / kTracePageBytes + 16));
  begin_batch();
  store(StatEvent{"trace_indexes_not_built", -1, 1, StatSeverity::kInfo, reason});
  if (Status stored = commit_batch(); !stored.is_ok()) {
    log::debug("trace {}: trace_indexes_not_built not stored: {}", path.string(), stored.message());
  }
}

namespace {

// Takes the writer lock: held (flock, exclusive) for the writer's life and released by the
// kernel when the process dies, which is how readers tell a live run from an abandoned one.
StatusOr<int> take_writer_lock(const std::filesystem::path& trace) {
  std::filesystem::path lock = writer_lock_path(trace);
  // Beside the trace, in a directory others may write to: never through a link planted there.
  ASSIGN_OR_RETURN(const int fd, open_own_file(lock, "the trace's writer lock"));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return invalid_argument("{} is being written by another process (its lock {} is held)",
                            trace.string(), lock.string());
  }
  std::string owner = fmt::format("{} {}\n", host_name(), getpid());
  if (ftruncate(fd, 0) != 0 || write(fd, owner.data(), owner.size()) < 0) {
    log::debug("could not write the owner into {}", lock.string());
  }
  return fd;
}

Status apply_schema(SqliteDb& db) {
  // page_size must precede the first table; WAL cannot be entered inside a transaction.
  // temp_store stays at its default: MEMORY kept the statement journal of every multi-row upsert
  // in memory, a copy of each page it touched (a sixth of the cost of a memory sample).
  RETURN_IF_ERROR(db.exec(fmt::format("PRAGMA page_size = {}; PRAGMA journal_mode = WAL; "
                                      "PRAGMA synchronous = NORMAL; PRAGMA cache_size = -65536; "
                                      "PRAGMA wal_autocheckpoint = 8192",
                                      kTracePageBytes)));
  RETURN_IF_ERROR(db.exec("BEGIN"));
  RETURN_IF_ERROR(db.exec(live_schema()));
  RETURN_IF_ERROR(db.exec(views_sql()));
  ASSIGN_OR_RETURN(SqliteStatement meta,
                   SqliteStatement::prepare(db, "INSERT INTO meta (key, value) VALUES (?1, ?2)"));
  const std::pair<std::string_view, std::string> rows[] = {
      {"format", std::string(kTraceFormatName)},
      {"schema_version", std::to_string(kTraceSchemaVersion)},
      {"writer", "partrain " PARTRAIN_VERSION},
      {"writer_host", host_name()},
      {"writer_pid", std::to_string(getpid())},
      {"created_unix_ns", std::to_string(unix_now_ns())},
  };
  for (const auto& [key, value] : rows) {
    meta.bind(1, key);
    meta.bind(2, std::string_view(value));
    if (meta.run() != SQLITE_DONE) return failed("writing meta: {}", db.error_message());
  }
  RETURN_IF_ERROR(db.exec("INSERT INTO run (id, run_id, status) VALUES (1, '', 'running')"));
  return db.exec("COMMIT");
}

Status disk_full(std::string_view detail) {
  return failed(
      "the disk is full ({}): free some space, trace into a file on another "
      "filesystem (--trace FILE), or run without a trace (--no-trace)",
      detail);
}

// SQLite follows a symbolic link at the trace's name, and writer_lock_path() resolves one: a
// dangling link planted in a directory others write to would have the trace and its lock created
// wherever it points. Refused, naming it.
Status refuse_dangling_link(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::is_symlink(std::filesystem::symlink_status(path, error)) ||
      std::filesystem::exists(path, error)) {
    return Status::ok();
  }
  return invalid_argument(
      "{} is a symbolic link to a file that does not exist: a trace is not created through a "
      "link (another user may have put it there); remove it, or name the file itself",
      path.string());
}

// The trace file, made here new and empty (SQLite takes it for an empty database), never through
// a link at its name (O_NOFOLLOW: one planted since refuse_dangling_link() looked is refused too).
Status create_empty_trace_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd >= 0) {
    ::close(fd);
    return Status::ok();
  }
  const int error = errno;
  RETURN_IF_ERROR(refuse_dangling_link(path));
  if (error == ENOSPC || error == EDQUOT) return disk_full(strerror(error));
  return failed("cannot create {}: {}", path.string(), strerror(error));
}

}  // namespace

StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::create(const std::filesystem::path& path,
                                                           const TraceWriterOptions& options) {
  if (options.disk_reserve_bytes > 0) {
    // Refused before any file is made: a trace begun on a nearly full disk could not be closed.
    if (std::optional<uint64_t> free = free_bytes_beside(path)) {
      RETURN_IF_ERROR(check_room_for_trace(path, *free));
    }
  }
  RETURN_IF_ERROR(refuse_dangling_link(path));  // before the lock is made beside its target
  auto state = std::make_unique<State>();
  state->path = path;
  state->options = options;
  state->batch_event_limit = options.max_batch_events;
  ASSIGN_OR_RETURN(state->lock_fd, take_writer_lock(path));
  TraceWriter writer(std::move(state));  // from here on, failures release the lock
  State& s = *writer.state_;
  std::error_code error;
  if (std::filesystem::exists(path, error)) {
    if (!options.overwrite) {
      return invalid_argument("{} already exists; choose another file or allow overwriting",
                              path.string());
    }
    remove_trace_files(path);
  }
  // Taken before the file, whose schema alone is ~240 KiB: the free space check_room_for_trace
  // saw is the space the reserve is a share of.
  if (options.disk_reserve_bytes > 0) {
    ASSIGN_OR_RETURN(s.reserve, DiskReserve::claim(path, options.disk_reserve_bytes));
  }
  if (Status made = create_empty_trace_file(path); !made.is_ok()) {
    if (made.code() == StatusCode::kInvalidArgument) return made;  // it names the path
    return made.with_context(fmt::format("creating trace {}", path.string()));
  }
  if (Status status = s.open_new(); !status.is_ok()) {
    { TraceWriter closing(std::move(writer.state_)); }  // closes the file, releases the lock
    // What SQLite made of the file is no trace: left, it would refuse a retry ("already exists").
    remove_trace_files(path);
    return status.with_context(fmt::format("creating trace {}", path.string()));
  }
  s.created = true;
  (void)::stat(path.c_str(), &s.identity);
  if (options.disk_reserve_bytes > 0) s.bound_log_by_reserve();
  return std::unique_ptr<TraceWriter>(new TraceWriter(std::move(writer.state_)));
}

Status TraceWriter::State::open_new() {
  auto opened = SqliteDb::open(path.string(),
                               SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX);
  Status status = opened.status();
  if (status.is_ok()) {
    db = std::move(*opened);
    status = apply_schema(db);
  }
  if (status.is_ok() && options.max_file_bytes > 0) {
    status = db.exec(fmt::format("PRAGMA max_page_count = {}",
                                 std::max<uint64_t>(options.max_file_bytes / kTracePageBytes, 1)));
  }
  if (status.is_ok()) status = prepare_statements();
  if (!status.is_ok() && file_size_limit()) {
    // SQLite reports the EFBIG of a write past the limit as an I/O error.
    return failed(
        "the trace does not fit under the file-size limit of {} (ulimit -f; {}): "
        "raise it, or run without a trace (--no-trace)",
        format_bytes(*file_size_limit()), status.message());
  }
  if (status.is_ok() || !is_disk_full(db, path)) return status;
  // SQLite says "disk I/O error" for a full disk met while it sizes its -shm file.
  return disk_full(status.message());
}

// At a full disk the stop frees the reserve and checkpoints the write-ahead log into the file
// before it records itself: the log must fit in what the reserve frees, or the trace would stay
// `running` with its rows in the log only. The log holds at most the checkpoint threshold and the
// batch committed past it, each kept within a quarter of the reserve; the other half is for
// the file to grow by what the checkpoint brings in and for the stop's own rows.
void TraceWriter::State::bound_log_by_reserve() {
  const uint64_t quarter = reserve.bytes() / 4;
  const uint64_t log_pages =
      std::clamp<uint64_t>(quarter / kTracePageBytes, kMinCheckpointPages, kMaxCheckpointPages);
  // The schema, ~30 pages, is in the log yet: into the file with it, before any batch counts.
  (void)db.exec(
      fmt::format("PRAGMA wal_autocheckpoint = {}; PRAGMA wal_checkpoint(TRUNCATE)", log_pages));
  if (reserve.held()) {
    batch_event_limit =
        std::min<size_t>(batch_event_limit, std::max<uint64_t>(quarter / kLogBytesPerEvent, 1));
  }
  if (const std::optional<uint64_t> limit = file_size_limit()) {
    // Past it a write fails with EFBIG (partrain ignores SIGXFSZ): the full-disk path.
    log::warn(
        "trace {}: files are limited to {} here (ulimit -f): once the trace reaches that, "
        "what comes after is not stored (a traced run goes on); raise the limit to keep "
        "it all",
        path.string(), format_bytes(*limit));
  } else if (reserve.bytes() < options.disk_reserve_bytes) {
    const std::optional<uint64_t> free = free_bytes_beside(path);
    log::warn(
        "trace {}: little space on its filesystem ({} free after a reserve of {} instead "
        "of {}): tracing will stop when it fills up and the run will go on; free some "
        "space or trace elsewhere to keep the whole run",
        path.string(), format_bytes(free.value_or(0)), format_bytes(reserve.bytes()),
        format_bytes(options.disk_reserve_bytes));
  }
}

TraceWriter::TraceWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}

TraceWriter::~TraceWriter() {
  if (!state_) return;
  Status status = state_->commit_batch();
  if (!status.is_ok()) log::warn("{}", status.message());
  if (!state_->lock_wait.held.empty() && state_->wait_for_write_lock()) {
    (void)state_->commit_batch();  // what arrived after the run's status
  }
  if (state_->lock_wait.gave_up) {
    log::debug(
        "trace {}: closed while another process holds its write lock ({} events not "
        "stored); its indexes are not built",
        state_->path.string(), state_->lock_wait.held.size());
  } else if (state_->stopped) {
    // The indexes would need the room that is not there; readers scan instead.
    log::debug("trace {}: closed after tracing stopped ({} events not stored); its indexes are "
              "not built, readers get the same answers more slowly",
              state_->path.string(), state_->events_dropped);
    (void)settle_into_one_file(state_->db);  // may fail for want of room: the WAL stays then
  } else if (state_->created) {
    // While the lock is held, so that a reader never takes a closed trace for one that died
    // before its indexes were built.
    state_->build_indexes();
    if (!settle_into_one_file(state_->db)) {
      log::debug("trace {}: a reader has it open, it stays in WAL mode", state_->path.string());
    }
  }
  // Finalize statements and close (checkpointing the WAL) before the lock says "writer gone".
  std::filesystem::path lock = writer_lock_path(state_->path);
  int fd = state_->lock_fd;
  state_.reset();
  std::error_code ignored;
  std::filesystem::remove(lock, ignored);
  if (fd >= 0) close(fd);
}

void TraceWriter::append(std::span<const TraceEvent> events) {
  State& s = *state_;
  s.events_written += events.size();
  if (s.stopped) {
    s.append_after_stop(events);
    return;
  }
  if (!s.take_write_lock() && s.lock_wait.locked_out) {
    s.hold(events);
    return;
  }
  s.store_batch(events);
  if (!s.stop_reason.empty() || s.batch_events >= s.batch_event_limit) {
    (void)commit();
  } else {
    commit_if_due();
  }
}

void TraceWriter::commit_if_due() {
  State& s = *state_;
  if (s.stopped) {
    s.record_drops_if_due();
    return;
  }
  if (s.lock_wait.locked_out) {
    if (s.take_write_lock())
      (void)commit();  // what was held, at once
    else
      s.warn_if_locked_long();
    return;
  }
  if (s.in_batch && Clock::now() - s.batch_opened >= s.options.max_commit_interval) {
    (void)commit();
  }
}

Status TraceWriter::commit() { return state_->commit_batch(); }

Status TraceWriter::set_run_status(RunStatus status, std::optional<int> failing_rank,
                                   std::optional<int64_t> end_ns) {
  State& s = *state_;
  // The batch in flight first, so that a disk that fills at its commit stops tracing before the
  // status is written: the status then goes in alone, as the run's rows do after a stop.
  (void)commit();
  if (!s.stopped && !s.wait_for_write_lock()) {
    const std::string holder = sqlite_write_lock_holder(s.path);
    return failed(
        "trace {}: its write lock is still held by {} after {:.1f} s: the run's last {} "
        "events and its status are not stored (readers will mark it incomplete); end "
        "that process's transaction while a run writes its trace",
        s.path.string(), holder.empty() ? "another process" : holder,
        std::chrono::duration<double>(s.options.close_lock_wait).count(), s.lock_wait.held.size());
  }
  s.begin_batch();
  s.update_run_status.bind(1, run_status_name(status));
  if (failing_rank) s.update_run_status.bind(2, int64_t{*failing_rank});
  else s.update_run_status.bind_null(2);
  if (end_ns) s.update_run_status.bind(3, *end_ns);
  else s.update_run_status.bind_null(3);
  s.update_run_status.bind(4, unix_now_ns());
  s.run(s.update_run_status, "the run status");
  return commit();
}

uint64_t TraceWriter::events_written() const { return state_->events_written; }
uint64_t TraceWriter::write_errors() const { return state_->write_errors; }
const std::string& TraceWriter::stop_reason() const { return state_->stop_reason; }
uint64_t TraceWriter::events_dropped() const { return state_->events_dropped; }
const std::filesystem::path& TraceWriter::path() const { return state_->path; }

std::string TraceWriter::file_gone() const {
  struct stat now {};
  if (::stat(state_->path.c_str(), &now) != 0) return "removed";
  if (now.st_dev != state_->identity.st_dev || now.st_ino != state_->identity.st_ino) {
    return "replaced by another file";
  }
  return "";
}

}  // namespace partrain::profiler
