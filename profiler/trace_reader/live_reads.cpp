#include "profiler/trace_reader/live_reads.h"

#include <fmt/format.h>

#include "profiler/trace_reader/trace_codes.h"

namespace partrain::profiler {
namespace {

constexpr const char* kStoredSliceColumns =
    "SELECT s.id, s.track_id, s.ts_ns, s.dur_ns, s.category, "
    "c.comm_id, c.seq, c.op, c.bytes, c.group_size, "
    "coalesce(c.peer, c.root), c.gpu_start_ns, c.gpu_end_ns, "
    "s.name_id FROM slice s "
    "LEFT JOIN collective c ON c.slice_id = s.id ";

// Slices of every track starting at or after ?1, along slice_track_ts (one range per track),
// counted up to ?2.
constexpr const char* kCountStartedSinceSql =
    "SELECT count(*) FROM (SELECT 1 FROM slice "
    "WHERE track_id IN (SELECT id FROM track) AND ts_ns >= ?1 LIMIT ?2)";

}  // namespace

StatusOr<int64_t> data_version(const TraceReader& reader) {
  ASSIGN_OR_RETURN(SqliteStatement stmt, reader.prepare("PRAGMA data_version"));
  if (stmt.step() != SQLITE_ROW) return reader.read_error("reading the data version");
  return stmt.column_int(0);
}

StatusOr<ReadSnapshot> ReadSnapshot::begin(const TraceReader& reader) {
  ASSIGN_OR_RETURN(SqliteStatement stmt, reader.prepare("BEGIN"));
  if (stmt.step() != SQLITE_DONE) return reader.read_error("starting a read");
  return ReadSnapshot(reader);
}

Status ReadSnapshot::end() {
  if (reader_ == nullptr) return Status::ok();
  const TraceReader& reader = *reader_;
  reader_ = nullptr;
  ASSIGN_OR_RETURN(SqliteStatement stmt, reader.prepare("COMMIT"));
  if (stmt.step() != SQLITE_DONE) return reader.read_error("ending a read");
  return Status::ok();
}

ReadSnapshot::~ReadSnapshot() { (void)end(); }

bool StoredSliceCursor::next(StoredSlice& slice) {
  while (step()) {
    const int64_t track_id = stmt_.column_int(1);
    const TrackRow* track = reader_->cached_track(track_id);
    if (track == nullptr) {
      StatusOr<const TrackRow*> found = reader_->track(track_id);  // a track created since
      if (!found.is_ok()) return fail(found.status());
      if (*found == nullptr) continue;
      track = *found;
    }
    slice.id = stmt_.column_int(0);
    slice.rank = track->rank;
    slice.start_ns = stmt_.column_int(2);
    slice.end_ns = slice.start_ns + stmt_.column_int(3);
    slice.category = slice_category_from_code(stmt_.column_int(4));
    slice.name_id = stmt_.column_int(13);
    slice.is_collective = !stmt_.column_is_null(5);
    if (!slice.is_collective) return true;
    CollectiveOp& op = slice.collective;
    StatusOr<std::string_view> comm_id = reader_->string(stmt_.column_int(5));
    if (!comm_id.is_ok()) return fail(comm_id.status());
    StatusOr<std::string_view> name = reader_->string(stmt_.column_int(7));
    if (!name.is_ok()) return fail(name.status());
    op.rank = slice.rank;
    op.comm_id = *comm_id;
    op.seq = stmt_.column_int(6);
    op.op = *name;
    op.label = {};
    if (slice.name_id != stmt_.column_int(7)) {  // the slice is named for its caller's label
      StatusOr<std::string_view> label = reader_->string(slice.name_id);
      if (!label.is_ok()) return fail(label.status());
      op.label = *label;
    }
    op.bytes = stmt_.column_int(8);
    op.group_size = static_cast<int>(stmt_.column_int(9));  // NULL reads as 0
    op.peer = stmt_.column_is_null(10) ? std::nullopt
                                       : std::optional(static_cast<int>(stmt_.column_int(10)));
    op.ts_ns = slice.start_ns;
    op.dur_ns = slice.end_ns - slice.start_ns;
    op.gpu_start_ns =
        stmt_.column_is_null(11) ? std::nullopt : std::optional(stmt_.column_int(11));
    op.gpu_end_ns = stmt_.column_is_null(12) ? std::nullopt : std::optional(stmt_.column_int(12));
    op.group_ranks = {};
    op.state.reset();
    return true;
  }
  return false;
}

StatusOr<StoredSliceCursor> slices_stored_between(const TraceReader& reader, int64_t after,
                                                  int64_t upto) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare(std::string(kStoredSliceColumns) +
                                  "WHERE s.id > ?1 AND s.id <= ?2 ORDER BY s.id"));
  stmt.bind(1, after);
  stmt.bind(2, upto);
  return StoredSliceCursor(reader, std::move(stmt));
}

StatusOr<bool> slices_indexed_by_time(const TraceReader& reader) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare("SELECT count(*) FROM sqlite_master "
                                  "WHERE type = 'index' AND name = 'slice_track_ts'"));
  if (stmt.step() != SQLITE_ROW) return reader.read_error("reading the trace's indexes");
  return stmt.column_int(0) > 0;
}

StatusOr<int64_t> newest_slices_start(const TraceReader& reader, int64_t count) {
  // The first and last start over the tracks: two index probes per track.
  ASSIGN_OR_RETURN(SqliteStatement bounds,
                   reader.prepare("SELECT min(lo), max(hi) FROM (SELECT "
                                  "(SELECT min(ts_ns) FROM slice WHERE track_id = t.id) lo, "
                                  "(SELECT max(ts_ns) FROM slice WHERE track_id = t.id) hi "
                                  "FROM track t)"));
  if (bounds.step() != SQLITE_ROW) return reader.read_error("reading the slices' time span");
  if (bounds.column_is_null(0)) return int64_t{0};
  int64_t early = bounds.column_int(0), late = bounds.column_int(1);
  ASSIGN_OR_RETURN(SqliteStatement counted, reader.prepare(kCountStartedSinceSql));
  // The latest start with at least `count` slices from it on: `early` always has (or is the
  // first slice), `late + 1` never has.
  ++late;
  while (late - early > 1) {
    const int64_t mid = early + (late - early) / 2;
    counted.reset();
    counted.bind(1, mid);
    counted.bind(2, count);
    if (counted.step() != SQLITE_ROW) return reader.read_error("counting the newest slices");
    (counted.column_int(0) >= count ? early : late) = mid;
  }
  return early;
}

StatusOr<StoredSliceCursor> slices_started_since(const TraceReader& reader, int64_t since_ns,
                                                 int64_t upto) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare(std::string(kStoredSliceColumns) +
                                  "WHERE s.track_id IN (SELECT id FROM track) AND s.ts_ns >= ?1 "
                                  "AND s.id <= ?2 ORDER BY s.ts_ns"));
  stmt.bind(1, since_ns);
  stmt.bind(2, upto);
  return StoredSliceCursor(reader, std::move(stmt));
}

StatusOr<int64_t> last_slice_id(const TraceReader& reader) {
  ASSIGN_OR_RETURN(SqliteStatement stmt, reader.prepare("SELECT coalesce(max(id), 0) FROM slice"));
  if (stmt.step() != SQLITE_ROW) return reader.read_error("reading new slices");
  return stmt.column_int(0);
}

}  // namespace partrain::profiler
