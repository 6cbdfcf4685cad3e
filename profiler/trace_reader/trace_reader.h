// The one way into a trace for whoever reads it to analyse, show or export it (the analyzers, the
// dashboard, the exporters, the commands): typed rows and cursors over the raw tables, the
// codes decoded (trace_codes.h). Only this folder and the store (schema, TraceWriter, open and
// repair, merge, the SQLite wrappers) write SQL; sql_confinement_test.cpp beside this folder's
// tests fails the suite otherwise. Hot loops read raw tables, not the views (docs/decisions.md),
// so a cursor costs what its query costs; nothing here loads a table that grows with the run.
// This file: the reader and the run's small tables. Events: step_reads.h, slice_reads.h,
// collective_reads.h, memory_reads.h, kernel_reads.h, expert_reads.h, live_reads.h,
// export_reads.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "profiler/sqlite_db.h"
#include "profiler/trace_event.h"

namespace partrain::profiler {

// The run row (the runs view).
struct RunRow {
  std::string run_id;
  std::string command;
  std::string config;               // JSON text; '{}' for a program partrain did not launch
  std::optional<RunStatus> status;  // nullopt: a word this build does not know
  std::optional<int> world_size;
  std::optional<int64_t> start_ns;  // run-wide timeline
  std::optional<int64_t> end_ns;
  std::optional<int> failing_rank;
  std::string backend;              // config's "backend" ("gloo", "nccl"), empty when it has none
  std::optional<int> nproc_per_node;  // config's "nproc_per_node" (a launch's ranks per node)
  std::string imported_from;  // config's "imported_from" ("kineto", "nsys"), empty when traced
};

// A row of the ranks view. Texts the trace does not know are empty.
struct RankRow {
  int rank = 0;
  std::string host;
  std::string device;
  std::optional<int> exit_code;
  std::optional<int> exit_signal;
  std::optional<int> node;  // the launcher's node index, when it wrote one
};

struct TrackRow {
  int64_t id = 0;
  int rank = 0;
  std::optional<TrackKind> kind;  // nullopt: a kind this build does not know
  std::string name;
};

// A row of the stats view: a problem or counter of the trace (rank nullopt: the whole run).
struct StatRow {
  std::string name;
  std::optional<int> rank;
  int64_t value = 0;
  std::optional<StatSeverity> severity;
  std::string description;
};

class TraceReader {
 public:
  // A view of an open trace (open_trace's connection), made for nothing: implicit, so every
  // reading function takes a connection as readily as a reader. It caches the interned strings
  // and the tracks it meets. One thread at a time, like the connection.
  TraceReader(const SqliteDb& db) : db_(&db) {}  // NOLINT(google-explicit-constructor)
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;
  TraceReader(TraceReader&&) = default;
  TraceReader& operator=(TraceReader&&) = default;

  // nullopt: the trace has no run row (a file whose writer died before writing it).
  StatusOr<std::optional<RunRow>> run() const;
  // The ranks table, by rank.
  StatusOr<std::vector<RankRow>> ranks() const;
  // Ranks with a ranks row, and ranks that recorded tracks or steps without one, ascending.
  StatusOr<std::vector<int>> recorded_ranks() const;
  // Every track, by id.
  StatusOr<std::vector<TrackRow>> tracks() const;
  // The tracks of one rank, by id: what a per-rank read needs, without copying every rank's
  // (tracks() for each of 1,024 ranks was half of analyze's time).
  StatusOr<std::vector<TrackRow>> tracks_of_rank(int rank) const;
  // The track `id`, nullptr when the trace has none (yet); valid while the reader lives.
  StatusOr<const TrackRow*> track(int64_t id) const;
  // The interned string `id` ("(lost string N)" when the string table lost it: damaged_rows.h);
  // valid while the reader lives.
  StatusOr<std::string_view> string(int64_t id) const;
  // Every stat row, by name and rank (the run's first).
  StatusOr<std::vector<StatRow>> stats() const;
  // Whether the trace is `partrain merge`'s join of other files (meta 'merged_from').
  StatusOr<bool> is_merge() const;
  // Events stored: slice rows (collectives, kernels and transfers are slices too), memory
  // samples and steps.
  StatusOr<int64_t> event_count() const;

  // The string or track when the reader has met it already, else nullptr: the lookups of the hot
  // loops, which take the slow path (string(), track()) on a miss only.
  const std::string* cached_string(int64_t id) const {
    auto found = strings_.find(id);
    return found == strings_.end() ? nullptr : &found->second;
  }
  const TrackRow* cached_track(int64_t id) const {
    auto found = tracks_.find(id);
    return found == tracks_.end() ? nullptr : &found->second;
  }

  // For the cursors of this folder: a statement on the trace, and the error of a failed read.
  const SqliteDb& db() const { return *db_; }
  StatusOr<SqliteStatement> prepare(std::string_view sql) const;
  Status read_error(std::string_view what) const;
  // Calls on_row(stmt) for each row of `stmt`; the read error naming `what` when a step fails.
  template <typename OnRow>
  Status each_row(SqliteStatement& stmt, std::string_view what, OnRow on_row) const {
    int rc = SQLITE_ROW;
    while ((rc = stmt.step()) == SQLITE_ROW) on_row(stmt);
    return rc == SQLITE_DONE ? Status::ok() : read_error(what);
  }

 private:
  Status read_tracks_after(int64_t id) const;

  const SqliteDb* db_;
  mutable std::unordered_map<int64_t, std::string> strings_;
  mutable std::optional<SqliteStatement> string_stmt_;
  mutable std::unordered_map<int64_t, TrackRow> tracks_;
  mutable std::unordered_map<int, std::vector<int64_t>> rank_track_ids_;  // ascending ids
  mutable int64_t last_track_id_ = 0;
};

}  // namespace partrain::profiler
